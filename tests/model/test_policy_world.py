"""A policy never changes the world.

Swapping ``policy`` (or ``<kind>.policy``) in a fixed world leaves every other setting as it
was (map, mobility, speeds, radius, contact rule, link, data, partition, model, training,
test set); a policy that cannot run there is refused in one line naming what it needs; two
policies' metrics of one name get two columns; the run's first line names every setting not
at its default and where it came from. Config resolution only, plus one 1-step run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mobidfl.analysis.cli import run_summary
from mobidfl.errors import ConfigError
from mobidfl.model.config import KINDS, Config, preset_names
from mobidfl.model.policies.base import metric_columns, policy_metric_column
from mobidfl.model.world import MobiDFLModel
from mobidfl.plugins import POLICIES

WORLDS: dict[str, dict[str, Any]] = {
    "default": {},
    "routes and servers": {  # MoFeL's kind of world: route-following cars, 4 territories
        "map": "nyc_uws", "vehicles": 20, "pedestrians": 0, "sensors": 0, "uavs": 0,
        "vehicle.mobility": "route", "areas": 4,
    },
    "802.11p-like link": {"link": "fixed_rate"},  # only policies that honour a link run
    **{f"preset {name}": {"preset": name} for name in preset_names()},
}
"""Fixed worlds; each registered policy is swapped into each."""


def world_settings(config: Config) -> dict[str, Any]:
    """Every resolved setting but the policy choice itself (global and per kind)."""
    settings = config.to_dict()
    settings.pop("policy")
    for kind in KINDS:
        settings[kind].pop("policy", None)
    return settings


def resolve_each_policy(world: dict[str, Any]) -> tuple[dict[str, Config], dict[str, str]]:
    ran: dict[str, Config] = {}
    refused: dict[str, str] = {}
    for name in POLICIES.names():
        try:
            ran[name] = Config.from_settings(world, policy=name)
        except ConfigError as err:
            refused[name] = str(err)
    return ran, refused


@pytest.mark.parametrize("world", list(WORLDS))
def test_every_policy_that_runs_in_a_world_leaves_every_world_setting_as_it_was(world):
    # Prepare: the world as its own settings (and preset) give it
    base = Config.from_settings(WORLDS[world])
    # Execute: every registered policy swapped in
    ran, refused = resolve_each_policy(WORLDS[world])
    # Assert: the same world for each policy that runs; a one-line refusal, naming the
    # setting, for each that cannot
    assert ran, world
    for name, config in ran.items():
        assert world_settings(config) == world_settings(base), (world, name)
        assert config.policy == name
    for name, message in refused.items():
        assert message.startswith("setting '") and "\n" not in message, (world, name)
        assert name in message, (world, name)


def test_mofel_runs_only_where_routes_are_and_is_refused_elsewhere_naming_them():
    # Execute
    default_ran, default_refused = resolve_each_policy(WORLDS["default"])
    routes_ran, _ = resolve_each_policy(WORLDS["routes and servers"])
    # Assert: refused in the default world (it does not bring routes), runs with them
    for name in ("mofel", "mofel_a1", "mofel_a2"):
        assert name not in default_ran and name in routes_ran
        message = default_refused[name]
        assert message.startswith("setting 'vehicle.mobility' = 'manhattan' is not allowed: "
                                  "'route'")
    assert {"psfl", "local", "dpsgd", "central_fedavg", "cached_lru"} <= set(default_ran)


def test_no_registered_policy_declares_defaults():
    for name, cls in POLICIES.items():
        assert not getattr(cls, "defaults", None), name


def test_sensor_policy_psfl_changes_neither_radius_nor_other_kinds():
    # Prepare
    base = Config().with_overrides([])
    # Execute: as typed on the command line
    swapped = Config().with_overrides(["sensor.policy=psfl"])
    # Assert: radius (100 m, issue 30's 150 m before), partitions and other kinds as they were
    assert swapped.radius_m == base.radius_m == 100.0
    assert swapped.policy_of("sensor") == "psfl"
    for kind in KINDS:
        assert swapped.partition_of(kind) == base.partition_of(kind) == "shards"
        if kind != "sensor":
            assert swapped.kind(kind) == base.kind(kind)
            assert swapped.policy_of(kind) == base.policy_of(kind)
    assert world_settings(swapped) == world_settings(base)
    origins = swapped.setting_origins()
    assert origins.pop("sensor.policy") == "user"
    auto = "default auto:fashion_mnist|mnist5k (the first one installed)"
    assert origins in ({}, {"dataset": auto})


def test_metric_columns_name_their_policy_and_keep_a_bare_name_only_when_unambiguous():
    # Execute
    columns = metric_columns({
        "dpsgd": ("degree_mean",),
        "fedavg_weighted": ("degree_mean",),
        "psfl": ("federations", "area_acc_mean"),
        "central_fedavg": ("participants", "area_acc_mean"),
    })
    # Assert
    assert columns["degree_mean_policy_dpsgd"] == ("dpsgd", "degree_mean")
    assert columns["degree_mean_policy_fedavg_weighted"] == ("fedavg_weighted", "degree_mean")
    assert "degree_mean" not in columns and "area_acc_mean" not in columns
    assert columns["federations"] == columns["federations_policy_psfl"] == ("psfl", "federations")
    assert columns["participants"] == ("central_fedavg", "participants")
    assert policy_metric_column("nfc", "mofel_a1") == "nfc_policy_mofel_a1"


def test_two_kinds_reporting_the_same_metric_get_two_columns_of_their_own_values():
    # Prepare: pedestrians on D-PSGD, sensors and UAVs on FedAvg-weighted (the defaults):
    # both report degree_mean
    model = MobiDFLModel(map="grid:3x3:100", vehicles=0, pedestrians=5, sensors=4, uavs=2,
                         steps=1, local_steps=1, test_size=50, seed=3)
    # Execute
    model.run()
    last = model.model_table().iloc[-1]
    # Assert: one column per policy, each the mean member-member degree of its own group
    adjacency = model.adjacency
    for policy in ("dpsgd", "fedavg_weighted"):
        members = np.flatnonzero(model.policy_of_agent == policy)
        degree = np.asarray(adjacency[members][:, members].sum(axis=1)).mean()
        assert last[policy_metric_column("degree_mean", policy)] == pytest.approx(degree)
    assert "degree_mean" not in model.model_table().columns


def test_the_first_line_names_every_changed_setting_and_where_it_came_from():
    # Prepare: PSFL's preset, central FedAvg swapped in and the rounds changed by the user
    config = Config.from_settings(preset="psfl_004", steps=3, policy="central_fedavg")
    # Execute
    line = run_summary(config)
    # Assert: one line; the preset's world (radius, partition) named as the preset's, the
    # user's two changes as the user's, and nothing at its default listed
    assert "\n" not in line
    listed = line.split("preset psfl_004 [", 1)[1].split("]", 1)[0].split(", ")
    from_preset = dict(item.split("=", 1) for item in listed)
    assert from_preset["radius_m"] == "150.0" and from_preset["partition"] == "area"
    assert "policy" not in from_preset and "steps" not in from_preset
    assert "user [steps=3, policy=central_fedavg]" in line
    assert "seed=" not in line and "learning=" not in line  # at their defaults
    assert line.endswith("not the preset's: steps=3, policy=central_fedavg")
