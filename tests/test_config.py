"""One typed, validated config: names work everywhere; bad values fail at once, clearly."""

from __future__ import annotations

import pytest

from model.config import Config, public_names, settings_table
from model.errors import ConfigError


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


def test_readme_documents_every_setting():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    missing = [name for name in public_names() if f"`{name}`" not in readme]
    assert not missing, f"README settings table lacks {missing}: run `mobidfl settings --markdown`"


def test_readme_settings_table_is_generated_from_the_config():
    from pathlib import Path

    from analysis.readme import with_settings_table

    # Prepare
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    # Execute
    regenerated = with_settings_table(readme)
    # Assert: `make readme` would change nothing (defaults and help texts are in sync)
    assert regenerated == readme, "README settings table is stale: run `make readme`"
