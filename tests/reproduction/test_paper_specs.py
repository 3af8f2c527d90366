"""The paper reproduction specs read from TOML (analysis/scenarios/papers/): the same specs as
the Python constants they replaced, and a bad file refused in one line naming file and key."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from importlib import resources
from pathlib import Path

import pytest

from mobidfl.analysis import paper_specs
from mobidfl.analysis.cli import main
from mobidfl.analysis.paper_specs import (
    ALIASES,
    CI,
    PAPERS,
    load_paper,
    load_papers,
    mofel_speed,
    paper_spec,
)
from mobidfl.errors import ConfigError

SNAPSHOT = Path(__file__).parents[1] / "fixtures" / "paper_specs.json"
"""Every PaperSpec field's repr, taken from the Python constants before the specs moved to
TOML (the world sentence by its function's name); PAPERS' order and ALIASES likewise."""

LISTED = ("mobidfl: error: setting 'PAPER' = 'nosuch' is not allowed: one of mobility_000, "
          "dam_001, cached_dfl_003, psfl_004, mofel_002, cached_dfl_003_sumo, "
          "cached_dfl_003_areas")
"""What ``mobidfl reproduce nosuch`` printed before the move: the specs it lists, in order."""


def _fields(spec: paper_specs.PaperSpec) -> dict[str, str]:
    out = {}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        out[f.name] = value.__name__ if callable(value) else repr(value)
    return out


def test_loaded_specs_are_exactly_the_frozen_python_specs():
    # Prepare
    frozen = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    # Execute
    loaded = {name: _fields(spec) for name, spec in PAPERS.items()}
    # Assert: names and order, aliases, every field (repr: types, key order and floats exact)
    assert list(PAPERS) == frozen["papers"]
    assert repr(ALIASES) == frozen["aliases"]
    assert frozen["ci"] == CI
    for name, fields in frozen["specs"].items():
        assert loaded[name] == fields, name


def test_reproduce_keeps_the_spec_names_importable():
    from mobidfl.analysis import reproduce

    assert reproduce.PAPERS is PAPERS
    assert reproduce.paper_spec("003") is PAPERS["cached_dfl_003"]
    assert reproduce.CACHED is PAPERS["cached_dfl_003"]
    assert reproduce.MOFEL is paper_spec("mofel")
    assert reproduce.CACHED_SUMO is paper_spec("sumo")
    assert reproduce.CACHED_AREAS is paper_spec("cached_dfl_areas")
    assert (reproduce.MOBILITY, reproduce.DAM, reproduce.PSFL) == (
        PAPERS["mobility_000"], PAPERS["dam_001"], PAPERS["psfl_004"])


def test_mofel_speeds_written_in_the_file_are_the_papers_times_20_over_3():
    # Each MoFeL variant is named "<policy> <v_max in m/min>"
    for name, settings in paper_spec("mofel_002").variants.items():
        v_max = float(name.rsplit(" ", 1)[1])
        assert settings["vehicle.speed"] == mofel_speed(v_max), name


def test_reproduce_lists_the_same_papers_as_before(tmp_path, capsys):
    # Execute
    code = main(["reproduce", "nosuch", "--scale", "ci", "--out", str(tmp_path / "o")])
    # Assert
    assert code == 2
    assert capsys.readouterr().err.strip() == LISTED
    assert not (tmp_path / "o").exists()


# --- refusals ------------------------------------------------------------------------------------
@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the bundled spec files to break one at a time."""
    root = resources.files(paper_specs.PACKAGE)
    out = tmp_path / "papers"
    out.mkdir()
    for f in root.iterdir():
        if f.name.endswith(".toml"):
            (out / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    return out


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _refusal(folder: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_papers(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_copy_loads_as_the_bundled_specs(folder):
    papers, aliases = load_papers(folder)
    assert {n: _fields(s) for n, s in papers.items()} == {
        n: _fields(s) for n, s in PAPERS.items()}
    assert aliases == ALIASES


@pytest.mark.parametrize(("file", "old", "new", "key"), [
    # an unknown key, in [about] and in a claim; an unknown table
    ("dam_001.toml", 'preset = "dam_001"', 'preset = "dam_001"\nauthor = "Reza"',
     "[about].author"),
    ("dam_001.toml", 'paper_value = 8.0', 'paper_value = 8.0\npaper_valu = 8.0',
     "[[claims]] 2.paper_valu"),
    ("psfl_004.toml", "[skip]", "[skips]", "[skips]"),
    # a wrong type
    ("dam_001.toml", 'paper_value = 8.0', 'paper_value = "8"', "[[claims]] 2.paper_value"),
    ("psfl_004.toml", 'title = "PSFL (Domini et al., ACSOS 2024)"', "title = 4",
     "[about].title = 4"),
    ("cached_dfl_003.toml", 'ci = ["CFL"]', 'ci = "CFL"', "[skip].ci"),
    ("mofel_002.toml", "sign = 0", "sign = 2", "[[claims]] 1.sign = 2"),
    # a missing key
    ("dam_001.toml", 'a = "Random"\n', "", "[[claims]] 1.a"),
    ("psfl_004.toml", 'preset = "psfl_004"\n', "", "[about].preset"),
    # an unknown setting, in a variant, a scale and a reading
    ("dam_001.toml", '"uav.mobility" = "dcm"', '"uav.mobilty" = "dcm"', "uav.mobilty"),
    ("mobility_000.toml", "steps = 150", "rounds = 150", "rounds"),
    ("dam_001.toml", 'optimizer_state = "reset"', 'optimiser_state = "reset"',
     "optimiser_state"),
    # names that are not the spec's: a variant, a scale, a world sentence, a preset
    ("dam_001.toml", 'b = "Static"', 'b = "Statik"', "[[claims]] 1.b = 'Statik'"),
    ("psfl_004.toml", "[scales.paper]", "[scales.huge]", "[scales.huge]"),
    ("mofel_002.toml", 'world = "mofel"', 'world = "mofl"', "[about].world = 'mofl'"),
    ("dam_001.toml", 'preset = "dam_001"', 'preset = "dam_002"', "[about].preset = 'dam_002'"),
    # a ci note that does not say it is the tests' scale
    ("psfl_004.toml", "note = \"test scale of", "note = \"a scale of", "[scales.ci].note"),
])
def test_a_bad_file_is_refused_in_one_line_naming_file_and_key(folder, file, old, new, key):
    # Prepare
    _edit(folder / file, old, new)
    # Execute
    message = _refusal(folder)
    # Assert
    assert str(folder / file) in message
    assert key in message


def test_a_listed_file_that_is_missing_is_refused(folder):
    (folder / "psfl_004.toml").unlink()
    message = _refusal(folder)
    assert str(folder / "psfl_004.toml") in message
    assert "a readable TOML file" in message


def test_a_file_the_index_does_not_list_is_refused(folder):
    shutil.copy(folder / "psfl_004.toml", folder / "psfl_005.toml")
    message = _refusal(folder)
    assert str(folder / "_papers.toml") in message
    assert "psfl_005" in message


def test_a_file_named_other_than_its_spec_is_refused(folder):
    _edit(folder / "cached_dfl_003_sumo.toml", 'key = "cached_dfl_003_sumo"',
          'key = "cached_dfl_003_traffic"')
    message = _refusal(folder)
    assert re.search(r"cached_dfl_003_sumo\.toml.*\[about\]\.key", message)


def test_not_toml_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text("[about\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_paper(path)
