"""One typed, validated config: names work everywhere; bad values fail at once, clearly."""

from __future__ import annotations

import pytest

from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, public_names, settings_table


def test_dotted_underscored_and_nested_names_reach_the_same_setting(tmp_path):
    # Prepare
    path = tmp_path / "run.toml"
    path.write_text('vehicles = 7\n[vehicle]\nmobility = "random_walk"\n')
    # Execute
    from_toml = Config.from_toml(path)
    from_set = Config().with_overrides(["vehicles=7", "vehicle.mobility=random_walk"])
    from_kwargs = Config.from_settings(vehicles=7, vehicle_mobility="random_walk")
    # Assert
    assert from_toml == from_set == from_kwargs
    assert from_set.vehicle.mobility == "random_walk"
    assert from_set.vehicle.speed == 13.89  # untouched per-kind default kept


def test_resolved_toml_round_trips(tmp_path):
    config = Config().with_overrides(["rm_cells=inf", "uav.policy=local", "seed=3"])
    path = tmp_path / "config.toml"
    path.write_text(config.to_toml())
    assert Config.from_toml(path) == config


@pytest.mark.parametrize(
    "assignment, setting",
    [
        ("radius_m=-5", "radius_m"),
        ("vehicle.speed=-1", "vehicle.speed"),
        ("hm_fraction=1.5", "hm_fraction"),
        ("turn_left=0.5", "turn_straight+turn_left+turn_right"),
        ("manhattan.turn_rule=zigzag", "manhattan.turn_rule"),
        ("walk_q=0.5,0.5,0.5,0.5", "walk_q"),
        ("policy=gossip", "policy"),
        ("vehicle.mobility=teleport", "vehicle.mobility"),
        ("dataset=imagenet", "dataset"),
        ("steps=2.5", "steps"),
        ("learning=maybe", "learning"),
        ("colour=red", "colour"),
        ("mobility_alpha=2", "mobility_alpha"),
    ],
)
def test_bad_value_names_setting_value_and_what_is_allowed(assignment, setting):
    # Execute
    with pytest.raises(ConfigError) as info:
        Config().with_overrides([assignment])
    # Assert
    message = str(info.value)
    assert info.value.setting == setting
    assert f"setting '{setting}'" in message and "allowed" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "assignments, setting, allowed",
    [
        (["optimizer=adam", "momentum=0.9"], "momentum", "0 with optimizer = adam"),
        (["optimizer=adam", "workers=2"], "workers", "1 with optimizer = adam"),
        (["optimizer=adam", "worker_backend=ray"], "worker_backend", "processes with optimizer"),
        (["backend=batched", "worker_backend=ray"], "worker_backend", "unless backend = loop"),
        (["backend=batched", "workers=2"], "workers", "1 unless backend = loop on the CPU"),
        (["device=cuda", "workers=2"], "workers", "1 unless backend = loop on the CPU"),
    ],
)
def test_training_combinations_are_refused_by_the_config_before_any_engine(
    assignments, setting, allowed
):
    # Execute: the config is the one place these rules live (the engine trusts its settings)
    with pytest.raises(ConfigError) as info:
        Config().with_overrides(assignments)
    # Assert: named as the setting, one line; a world that does not learn never reads them
    assert info.value.setting == setting and allowed in info.value.allowed
    assert "\n" not in str(info.value)
    assert not Config().with_overrides([*assignments, "learning=false"]).learning


def test_plugin_settings_by_namespace_table_keyword_and_old_flat_name(tmp_path):
    # Prepare
    path = tmp_path / "run.toml"
    path.write_text("[psfl]\nsigma = 20\n[cached]\nsize = 4\n")
    # Execute
    from_toml = Config.from_toml(path)
    from_set = Config().with_overrides(["psfl.sigma=20", "cached.size=4"])
    from_kwargs = Config.from_settings(**{"psfl.sigma": 20, "cached.size": 4})
    from_alias = Config.from_settings(psfl_sigma=20, cache_size=4)
    written = from_set.to_toml()
    # Assert: one setting under four spellings; the config records it by namespace
    assert from_toml == from_set == from_kwargs == from_alias
    assert from_set.psfl.sigma == from_set.psfl_sigma == from_set.setting("psfl_sigma") == 20.0
    assert from_set.cached.size == 4 and from_set.explicit_settings() == {
        "psfl.sigma": 20.0, "cached.size": 4
    }
    assert "\n[psfl]\nsigma = 20.0\n" in written and "psfl_sigma" not in written
    assert Config.from_toml(_write(tmp_path / "again.toml", written)) == from_set


def test_raw_constructor_takes_plugin_settings_by_any_name_unvalidated():
    # Execute
    raw = Config(rm_cells=2.0, **{"psfl.sigma": -1.0}, vehicle_speed=3.0, seed=4)
    # Assert: placed like from_settings would, but not checked (from_settings checks)
    assert (raw.dam.rm_cells, raw.psfl.sigma, raw.vehicle.speed, raw.seed) == (2.0, -1.0, 3.0, 4)
    assert raw.manhattan == Config().manhattan
    with pytest.raises(ConfigError, match="setting 'psfl.sigma' = -1.0"):
        raw.validated()
    with pytest.raises(ConfigError, match="setting 'colour'"):
        Config(colour="red")


@pytest.mark.parametrize(
    "assignments, setting, allowed",
    [
        (["psfl.sigma=-1"], "psfl.sigma", "a number > 0"),
        (["psfl_sigma=-1"], "psfl_sigma", "a number > 0"),
        (["psfl.walker_speed=inf", "psfl.sigma=inf"], "psfl.sigma", "a finite number"),
        (["manhattan.turn_left=0.5"],
         "manhattan.turn_straight+manhattan.turn_left+manhattan.turn_right", "sum to 1"),
        (["random_walk.beta=0.5"], "random_walk.beta", "a number > 1"),
        (["psfl.colour=1"], "psfl.colour", "allowed names are listed by `mobidfl settings`"),
    ],
)
def test_plugin_setting_errors_name_the_setting_as_written(assignments, setting, allowed):
    # Execute
    with pytest.raises(ConfigError) as info:
        Config().with_overrides(assignments)
    # Assert
    assert info.value.setting == setting and allowed in str(info.value)
    assert "\n" not in str(info.value)


def _write(path, text):
    path.write_text(text)
    return path


def test_every_public_setting_is_documented():
    rows = settings_table()
    assert all(help_text for _, _, help_text in rows)
    names = public_names()
    for required in (
        "map", "vehicles", "pedestrians", "sensors", "uavs", "steps", "step_s", "seed",
        "radius_m", "contact", "cell_m", "areas", "vehicle.mobility", "dataset", "data_root",
        "partition", "dirichlet_alpha", "model", "local_steps", "batch_size", "lr", "backend",
        "device", "eval_every", "test_size", "policy", "vehicle.policy", "sensor.policy",
    ):
        assert required in names


def test_settings_page_documents_every_setting():
    from mobidfl.analysis.readme import SETTINGS_PAGE

    page = SETTINGS_PAGE.read_text()
    missing = [name for name in public_names() if f"`{name}`" not in page]
    assert not missing, f"docs/reference/settings.md lacks {missing}: run `make docs-reference`"


def test_settings_page_table_is_generated_from_the_config():
    from mobidfl.analysis.readme import SETTINGS_PAGE, with_settings_table

    # Prepare
    page = SETTINGS_PAGE.read_text()
    # Execute
    regenerated = with_settings_table(page)
    # Assert: `make docs-reference` would change nothing (defaults and help texts in sync)
    assert regenerated == page, "docs/reference/settings.md is stale: run `make docs-reference`"


@pytest.mark.parametrize(
    "assignment, suggested",
    [
        ("clients=128", "'vehicles' or 'pedestrians' or 'sensors' or 'uavs'"),
        ("rounds=300", "'steps'"),
        ("vehicle.speeed=3", "'vehicle.speed'"),
        ("lrr=0.1", "'lr'"),
    ],
)
def test_unknown_setting_says_so_and_names_the_closest_known_ones(assignment, suggested):
    # Execute
    with pytest.raises(ConfigError) as info:
        Config().with_overrides([assignment])
    # Assert: one line naming the unknown name and what to write instead
    name = assignment.partition("=")[0]
    message = str(info.value)
    assert message.startswith(f"unknown setting '{name}'") and "\n" not in message
    assert f"did you mean {suggested}" in message and info.value.setting == name

