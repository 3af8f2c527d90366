"""Controlled studies (analysis/study.py): each column differs from the base in exactly the
settings of the levels it names, a cross in both factors' levels, and a bad study file is
refused in one line."""

from __future__ import annotations

import pytest

from mobidfl.analysis.study import BASE, HELDOUT_PREFIX, changed_settings, load_study, study_names
from mobidfl.model.config import KINDS, Config


def _expected(study, variant: str, changes: dict) -> set[str]:
    names = set(changes)
    if "partition" in changes:  # every kind's partition is explicit and follows the level's
        names |= {f"{kind}.partition" for kind in KINDS}
    return names


@pytest.mark.parametrize("name", study_names())
@pytest.mark.parametrize("scale", ["ci", "small"])
def test_each_column_differs_from_the_base_in_exactly_the_factors_it_names(name, scale):
    # Prepare
    study = load_study(name)
    columns = {c.variant: c for c in study.columns(scale)}
    base = columns[BASE]
    # Execute / Assert: every column, by what its variant names
    for variant, named, changes in study.variants():
        changed = changed_settings(columns[variant], base)
        assert set(changed) == _expected(study, variant, changes), variant
        if variant == BASE or variant.startswith(HELDOUT_PREFIX):
            continue
        # the named levels, and nothing else, account for every change
        from_levels = {}
        for factor, level in named.items():
            from_levels.update(study.factors[factor].levels[level])
        assert from_levels == changes, variant
        assert all(level != study.factors[f].base for f, level in named.items())
        assert 1 <= len(named) <= max(2, len(study.grid))


@pytest.mark.parametrize("name", study_names())
def test_every_column_is_a_world_the_model_accepts(name):
    # Execute / Assert: each column's settings resolve (a level that names an unknown
    # setting or value is refused here, not in the middle of a bench)
    for column in load_study(name).columns("ci"):
        Config.from_settings(column.settings).validated()


def test_the_mobility_skew_study_has_the_issue_s_axes():
    study = load_study("mobility_skew")
    levels = {f: set(study.factors[f].levels) for f in study.factors}
    assert {"static", "random_walk", "manhattan", "route", "sumo"} <= levels["mobility"]
    assert {"iid", "dirichlet_1", "dirichlet_0.3", "dirichlet_0.1", "shards", "area"} \
        <= levels["skew"]
    assert len(levels["density"]) >= 3 and len(levels["speed"]) >= 3
    assert study.crosses and study.heldout


def test_a_level_equal_to_the_base_is_refused_in_one_line(tmp_path, monkeypatch):
    import mobidfl.analysis.study as study_module
    from mobidfl.errors import ConfigError

    # Prepare: a copy of the study whose static level repeats the base's mobility
    text = study_module.resources.files(study_module.PACKAGE).joinpath(
        "mobility_skew.toml").read_text()
    bad = text.replace('[factors.mobility.levels.static]\n"vehicle.mobility" = "static"',
                       '[factors.mobility.levels.static]\n"vehicle.mobility" = "manhattan"')
    assert bad != text
    (tmp_path / "bad.toml").write_text(bad)
    monkeypatch.setattr(study_module, "study_names", lambda: ["bad"])
    monkeypatch.setattr(study_module.resources, "files", lambda package: tmp_path)
    study_module.load_study.cache_clear()
    # Execute / Assert
    try:
        with pytest.raises(ConfigError) as info:
            study_module.load_study("bad")
        assert "levels.static" in str(info.value) and "\n" not in str(info.value)
    finally:
        study_module.load_study.cache_clear()


def test_a_grid_study_has_every_combination_of_its_factors_levels():
    # Prepare
    study = load_study("mobility_regimes")
    # Execute
    variants = [v for v, _, _ in study.variants() if not v.startswith(HELDOUT_PREFIX)]
    # Assert: 5 x 3 x 2 worlds, each once, the base among them, and 10 held-out worlds
    sizes = [len(study.factors[f].levels) for f in study.grid]
    assert sizes == [5, 3, 2]
    assert len(variants) == len(set(variants)) == 30
    assert BASE in variants and "contacts=c4_saturated+skew=shards+data=mnist5k" in variants
    assert len(study.heldout) >= 10


def test_a_study_s_policy_reading_reaches_every_cell_of_that_policy_only():
    from mobidfl.analysis.bench_scenarios import build_cells

    # Prepare
    study = load_study("mobility_regimes")
    cols = study.columns("ci")[:2]
    # Execute
    cells = build_cells(cols, ["dpsgd", "psfl"], readings=study.policies)
    # Assert: psfl runs the declared reading, dpsgd's settings carry none of it
    for cell in cells:
        if cell.policy == "psfl":
            assert cell.settings["psfl.loss_batches"] == 4.5
            assert cell.settings["psfl.loss_samples"] == 288
        else:
            assert "psfl.loss_samples" not in cell.settings


def test_a_grid_whose_factors_touch_one_setting_is_refused_in_one_line(tmp_path, monkeypatch):
    import mobidfl.analysis.study as study_module
    from mobidfl.errors import ConfigError

    # Prepare: a copy of the grid study whose data factor also sets the radius
    text = (study_module.resources.files(study_module.PACKAGE)
            / "mobility_regimes.toml").read_text()
    bad = text.replace('dataset = "mnist5k"         #', 'radius_m = 75.0\ndataset = "mnist5k" #', 1)
    assert bad != text
    (tmp_path / "bad_grid.toml").write_text(bad)
    monkeypatch.setattr(study_module.resources, "files", lambda _: tmp_path)
    study_module.load_study.cache_clear()
    # Execute / Assert
    try:
        with pytest.raises(ConfigError, match="factors that change different settings"):
            study_module.load_study("bad_grid")
    finally:
        study_module.load_study.cache_clear()
