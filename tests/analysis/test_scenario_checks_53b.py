"""Issue 53 (round three): a user's scenario files for ``mobidfl bench --scenarios`` are
checked whole before any folder is written, refused in one line naming the file and the
setting (exit 2), and the bench is quiet about a scenario's or study's own settings.

The benches that run here are the smallest there are (ci scale, one world, the local policy,
two seeds, in this process); the refusals run nothing.
"""

from __future__ import annotations

import importlib.util
import math
import re
import tempfile
import tomllib
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobidfl.analysis.bench import run_bench
from mobidfl.analysis.bench_scenarios import (
    check_scenario,
    columns,
    load_scenario,
    scenario_names,
)
from mobidfl.analysis.cli import main
from mobidfl.analysis.study import load_study, study_names
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, InertSettingWarning, load_preset, preset_names

SCENARIOS = Path(__file__).resolve().parents[2] / "analysis" / "scenarios"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heterogeneous_world.py"
SMALL = ["--scale", "ci", "--seeds", "2", "--links", "ideal", "--policies", "local",
         "--processes", "0", "--quiet"]


def _scenario(folder: Path, file: str, *, base: str = "static_sensors", name: str = "mine",
              **replace: str) -> Path:
    """A bundled scenario's text as the user's own file, lines starting ``key =`` replaced."""
    text = (SCENARIOS / f"{base}.toml").read_text()
    text = text.replace(f'name = "{base}"', f'name = "{name}"', 1)
    for key, line in replace.items():
        text, count = re.subn(rf"(?m)^{re.escape(key)} = .*$", line, text, count=1)
        assert count == 1, key
    path = folder / file
    path.write_text(text)
    return path


def _one_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# --- 1. the checks --describe applies, before any folder is written ----------------------
@pytest.mark.parametrize(("old", "new", "setting"), [
    ('map = "grid:4x4:100"', 'map = "{folder}/no_such_map.geojson"', "map"),
    ("sensors = 8", "sensors = 50000000", "sensors"),  # a fleet no memory holds
])
def test_a_world_its_runs_refuse_is_refused_before_the_folder(tmp_path, capsys, old, new,
                                                                setting):
    # Prepare: a user's scenario file whose map is missing, or whose fleet fits no memory
    path = _scenario(tmp_path, "bad.toml")
    text = path.read_text()
    assert old in text  # the ci scale's own line
    path.write_text(text.replace(old, new.format(folder=tmp_path)))
    out = tmp_path / "bench"
    # Execute
    code = main(["bench", *SMALL, "--scenarios", str(path), "--out", str(out)])
    # Assert: one line naming the file and the setting, exit 2, nothing written
    line = _one_line(capsys)
    assert code == 2
    assert not out.exists()
    assert f"scenario file {path}: {setting}'" in line


def test_the_valid_world_still_runs(tmp_path):
    # Prepare: a user's valid file, the same world as a bundled one under its own name
    path = _scenario(tmp_path, "ok.toml")
    # Execute
    written = run_bench(out=tmp_path / "bench", scenarios=[str(path)], policies="local",
                        seeds=2, scale="ci", links=["ideal"], processes=0, progress=False)
    # Assert
    assert (tmp_path / "bench" / "leaderboard.csv") in written


# --- 2. one [about].name, two files ----------------------------------------------------
def test_two_files_with_one_name_and_different_worlds_are_refused(tmp_path):
    # Prepare: the same [about].name, two different worlds
    a = _scenario(tmp_path, "a.toml", sensors="sensors = 8")
    b = _scenario(tmp_path, "b.toml", sensors="sensors = 9")
    # Execute / Assert: one line naming both files
    with pytest.raises(ConfigError) as caught:
        columns([str(a), str(b)], scale="ci")
    message = str(caught.value)
    assert str(a) in message and str(b) in message and "'mine'" in message
    assert "\n" not in message


def test_one_file_given_twice_is_one_world(tmp_path):
    # Prepare: the same text under two paths
    a = _scenario(tmp_path, "a.toml")
    b = tmp_path / "copy.toml"
    b.write_text(a.read_text())
    # Execute
    cols = columns([str(a), str(b)], scale="ci", links=["ideal"])
    # Assert: one column, not the same world twice
    assert [c.key for c in cols] == ["mine@ideal"]


# --- 3. an old flat name and its new dotted name ------------------------------------------
def test_a_setting_under_its_old_and_new_name_is_refused(tmp_path):
    # Prepare: turn_straight in [world] and in [world.manhattan]
    path = _scenario(tmp_path, "dup.toml", base="cars_manhattan",
                     cell_m="cell_m = 100.0\nturn_straight = 0.2",
                     turn_straight="turn_straight = 0.6")
    # Execute / Assert: neither value silently dropped: one line naming the file and both names
    with pytest.raises(ConfigError) as caught:
        load_scenario(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert "turn_straight" in message and "manhattan.turn_straight" in message
    assert "\n" not in message


# --- 4. a value out of range names the file, not --policies -------------------------------
@pytest.mark.parametrize("value", ["-50.0", "nan"])
def test_a_bad_value_names_the_file_and_the_setting(tmp_path, value):
    # Prepare
    path = _scenario(tmp_path, "radius.toml", radius_m=f"radius_m = {value}")
    # Execute
    with pytest.raises(ConfigError) as caught:
        run_bench(out=tmp_path / "bench", scenarios=[str(path)], policies="local", seeds=2,
                  scale="ci", links=["ideal"], processes=0, progress=False)
    # Assert
    message = str(caught.value)
    assert f"scenario file {path}: radius_m'" in message
    assert "--policies" not in message
    assert not (tmp_path / "bench").exists()


# --- 5. quiet by default; public names only in what ships ---------------------------------
def test_the_bench_warns_nothing_about_a_scenarios_own_settings(tmp_path):
    # Prepare: a world that writes dirichlet_alpha (read only by partition = dirichlet)
    path = _scenario(tmp_path, "quiet.toml", dirichlet_alpha="dirichlet_alpha = 0.3")
    # Execute: the whole bench, report and figures included
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_bench(out=tmp_path / "bench", scenarios=[str(path)], policies="local", seeds=2,
                  scale="ci", links=["ideal"], processes=0, progress=False)
    # Assert: no inert-setting warning, and no library warning either
    assert [str(w.message) for w in caught] == []


def test_a_figure_too_small_for_its_labels_is_laid_out_without_a_warning():
    # Prepare: a figure whose title cannot fit (as the heat-map of a study's 25 worlds)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mobidfl.analysis import bench

    fig, ax = plt.subplots(figsize=(1.0, 0.6))
    ax.set_title("a title\n" * 12)
    with pytest.warns(UserWarning, match="Tight layout not applied"):
        fig.tight_layout()  # what the bench called, and printed
    # Execute / Assert
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench.tight(fig)
    plt.close(fig)
    assert [str(w.message) for w in caught] == []


def test_a_users_own_settings_still_warn_when_inert():
    # Execute / Assert: outside the bench, a setting nothing reads is still told
    with pytest.warns(InertSettingWarning, match="dirichlet_alpha"):
        Config.from_settings({"partition": "iid", "dirichlet_alpha": 0.3})


def test_an_old_name_in_a_scenario_file_is_warned(tmp_path):
    # Prepare: manhattan.turn_straight under its old flat name
    text = (SCENARIOS / "cars_manhattan.toml").read_text()
    text = text.replace('name = "cars_manhattan"', 'name = "old_names"')
    text = text.replace("turn_straight = 0.5", "").replace("cell_m = 100.0",
                                                          "cell_m = 100.0\nturn_straight = 0.5")
    path = tmp_path / "old.toml"
    path.write_text(text)
    # Execute / Assert
    with pytest.warns(DeprecationWarning, match="turn_straight"):
        load_scenario(str(path))


def _example():
    spec = importlib.util.spec_from_file_location("heterogeneous_world_53b", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_what_ships_uses_public_names_only():
    # Prepare: read again, not from the caches (a warning is raised on reading)
    load_scenario.cache_clear()
    load_study.cache_clear()
    load_preset.cache_clear()
    example = _example()
    # Execute / Assert: an old name raises here
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("ignore", InertSettingWarning)
        for name in scenario_names():
            load_scenario(name)
        for name in study_names():
            load_study(name)
        for name in preset_names():
            load_preset(name)
            Config.from_settings({"preset": name})
        for size in example.SIZES.values():
            Config.from_settings({**example.WORLD, **size})


# --- 6. fuzz: accepted or refused in one line, never another exception ---------------------
BASE = tomllib.loads((SCENARIOS / "static_sensors.toml").read_text())
WORLD_KEYS = sorted(k for k, v in BASE["world"].items() if not isinstance(v, dict))

_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 10**12, 5e7, 1e308]),
)
_values = st.one_of(
    _numbers, st.booleans(), st.text(max_size=12), st.sampled_from(
        ["", "grid:4x4:100", "nyc_uws", "missing.geojson", "auto:", "dirichlet", "\x00"]),
    st.lists(st.integers(-3, 3), max_size=3),
)


def _toml_value(value: object) -> str:
    """One TOML value (inline)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}"
                             for c in value) + '"'
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"  # type: ignore[attr-defined]


_valid = {  # values each of these settings accepts at the ci scale
    "radius_m": st.floats(1.0, 1000.0), "steps": st.integers(1, 3),
    "cell_m": st.floats(50.0, 400.0), "lr": st.floats(1e-4, 1.0),
    "dirichlet_alpha": st.floats(0.01, 10.0), "partition": st.sampled_from(["iid", "area"]),
}


@st.composite
def _scenario_text(draw: st.DrawFn) -> str:
    """static_sensors as the user's file: valid variations, or a few settings broken."""
    world = {k: BASE["world"][k] for k in WORLD_KEYS}
    broken = draw(st.booleans())
    for key in draw(st.lists(st.sampled_from(sorted(_valid)), max_size=3)):
        world[key] = draw(_valid[key])
    if broken:
        for key in draw(st.lists(st.sampled_from(WORLD_KEYS), max_size=2)):
            world[key] = draw(_values)
        extra = draw(st.lists(st.sampled_from([
            "unknown_key", "turn_straight", "psfl_sigma", "policy", "vehicle_speed", "clients",
        ]), max_size=1))
        for key in extra:
            world[key] = draw(_values)
        for key in draw(st.lists(st.sampled_from(WORLD_KEYS), max_size=1)):
            world.pop(key, None)
    version = draw(st.sampled_from(["1", "1.5", "true"])) if broken else "2"
    lines = ["[about]", 'name = "fuzz"', f"version = {version}", 'title = "t"',
             'provenance = "p"', 'why = "w"', "", "[world]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in world.items()]
    for kind in ("vehicle", "pedestrian", "sensor", "uav"):
        speed = draw(st.one_of(st.just(0.0), _numbers)) if broken else 0.0
        lines += [f"[world.{kind}]", 'mobility = "static"', f"speed = {_toml_value(speed)}"]
    if broken and draw(st.booleans()):
        lines += ["[world.manhattan]", f"turn_straight = {_toml_value(draw(_numbers))}"]
    sensors = draw(st.one_of(st.just(8), _values) if broken else st.integers(1, 12))
    lines += ["[scales.ci]", f"sensors = {_toml_value(sensors)}", 'map = "grid:4x4:100"',
              'dataset = "mnist5k"', "steps = 2", "test_size = 50"]
    tails = ["", "[axes]\nradius_m = [100.0, 200.0]"]
    if broken:
        tails += ["[extra]\na = 1", "[scales.tiny]\nsteps = 1", "[axes]\nradius_m = 3",
                  "[axes]\nradius_m = [1.0]\nsteps = [1, 2]", "world = 3"]
    return "\n".join([*lines, draw(st.sampled_from(tails))]) + "\n"


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=_scenario_text())
def test_fuzz_a_scenario_file_is_accepted_or_refused_in_one_line(text):
    # Prepare: a new path each time (the reader caches by path)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.toml"
        path.write_text(text, encoding="utf-8")
        # Execute / Assert: no training; the up-front check only
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                check_scenario(str(path), scale="ci")
            except ConfigError as exc:
                assert "\n" not in str(exc)
