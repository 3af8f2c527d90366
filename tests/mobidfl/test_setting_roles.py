"""Each setting declares what it describes (world, run, policy) and which plug-ins read it.

The benchmark's world/run split, the scenario files' required settings and the inert-setting
warning are read off these declarations (:func:`mobidfl.settings.setting`), not off hand-kept
lists or help text.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields

import pytest

from mobidfl.model.config import (
    Config,
    InertSettingWarning,
    UnknownSetting,
    public_names,
    required_world,
    setting_role,
    settings_table,
)
from mobidfl.model.config.fields import _plugin_namespaces as plugin_namespaces
from mobidfl.model.config.inert import _owners
from mobidfl.settings import KINDS, setting


@pytest.mark.parametrize(("name", "role"), [
    ("lr", "world"), ("map", "world"), ("vehicles", "world"), ("vehicle.mobility", "world"),
    ("random_walk.hm_fraction", "world"), ("link.profile", "world"),
    ("seed", "run"), ("learning", "run"), ("workers", "run"), ("contacts_out", "run"),
    ("policy", "policy"), ("vehicle.policy", "policy"), ("cached.size", "policy"),
    ("psfl.sigma", "policy"), ("psfl_sigma", "policy"), ("vehicle_policy", "policy"),
])
def test_a_setting_says_what_it_describes(name, role):
    assert setting_role(name) == role


def test_every_setting_has_one_of_the_three_roles_and_an_unknown_name_none():
    roles = {setting_role(name) for name in public_names()}
    assert roles == {"world", "run", "policy"}
    with pytest.raises(UnknownSetting):
        setting_role("no_such_setting")


def test_a_declared_role_outside_the_three_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="one of world, run, policy"):
        setting(0, "help", role="wrold")  # type: ignore[arg-type]


def test_the_settings_a_scenario_writes_are_the_world_ones_that_stand_alone():
    required = set(required_world())
    # Every kind's mobility and speed, the map, the data and the recipe
    assert {"map", "radius_m", "dataset", "partition", "lr", "steps"} <= required
    assert {f"{kind}.{attr}" for kind in KINDS for attr in ("mobility", "speed")} <= required
    # Not a run setting, not the policy, not a per-kind value that follows a global one,
    # not a plug-in's own (written only where that plug-in is used)
    assert not required & {"seed", "learning", "workers", "policy", "preset"}
    assert not required & {f"{kind}.{attr}" for kind in KINDS for attr in ("policy",
                                                                           "partition")}
    assert not {name for name in required if name.split(".")[0] in plugin_namespaces()}
    assert all(setting_role(name) == "world" for name in required)


def test_declared_readers_are_some_of_the_plugins_of_their_namespace():
    owners = _owners()
    declared = 0
    for namespace, own in plugin_namespaces().items():
        names = {name for _, name in owners.get(namespace, [])}
        for f in fields(own):  # type: ignore[arg-type]
            readers = set(f.metadata.get("readers", ()))
            if readers:
                declared += 1
                assert readers < names, f"{namespace}.{f.name}: {readers} of {names}"
            # A help text that opens by naming only some of the namespace's plug-ins
            # ("cached_group_lru: ...") must declare them as readers: the help is not read
            head, sep, _ = str(f.metadata["help"]).partition(":")
            named = {n.strip() for n in head.split("/")} if sep else set()
            assert not (named and named < names), f"{namespace}.{f.name} names {named}"
    assert declared >= 10


def test_the_settings_table_shows_the_declared_readers():
    rows = {name: text for name, _, text in settings_table()}
    assert rows["cached.groups"].startswith("cached_group_lru: ")
    assert rows["link.profile"].startswith("distance_rate/ns3: ")
    assert rows["psfl.sigma"].startswith("psfl: ")


@pytest.mark.parametrize(("given", "inert"), [
    ({"policy": "cached_lru", "cached.groups": "4,3,3"}, True),
    ({"policy": "cached_group_lru", "cached.groups": "4,3,3"}, False),
    ({"policy": "cached_lru", "cached.size": 7}, False),
    ({"link.model": "fixed_rate", "link.profile": "cv2x"}, True),
    ({"link.model": "distance_rate", "link.profile": "cv2x"}, False),
])
def test_a_setting_is_inert_exactly_when_none_of_its_readers_runs(given, inert):
    settings = {"vehicles": 4, "steps": 1, **given}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings(settings)
    shown = [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]
    named = [m for m in shown if any(k in m for k in given if "." in k)]
    assert bool(named) == inert, shown


def test_a_plugin_registered_later_has_its_roles_and_loses_them_when_removed():
    from typing import ClassVar

    from mobidfl.agents.mobility import MOBILITY_MODELS, MobilityModel
    from mobidfl.model.policies import ExchangePolicy
    from mobidfl.plugins import POLICIES
    from mobidfl.settings import PluginSettings

    # Prepare: a policy and a mobility model, each with a namespace of its own
    @dataclass(frozen=True, kw_only=True)
    class KnobSettings(PluginSettings):
        namespace: ClassVar[str] = "knob_test"
        k: float = setting(1.0, "a policy's knob")

    @dataclass(frozen=True, kw_only=True)
    class PaceSettings(PluginSettings):
        namespace: ClassVar[str] = "pace_test"
        pace: float = setting(1.0, "a mobility model's speed factor")

    class Knob(ExchangePolicy):
        name = "knob_test"
        settings_class = KnobSettings

    class Pace(MobilityModel):
        name = "pace_test"
        settings_class = PaceSettings

    with pytest.raises(UnknownSetting):
        setting_role("knob_test.k")  # asked before registration: must not be kept
    POLICIES.register("knob_test")(Knob)
    MOBILITY_MODELS.register("pace_test")(Pace)
    try:
        # Execute, Assert: the roles follow the registry at each call
        assert setting_role("knob_test.k") == "policy"
        assert setting_role("pace_test.pace") == "world"
    finally:
        POLICIES.unregister("knob_test")
        MOBILITY_MODELS.unregister("pace_test")
    with pytest.raises(UnknownSetting):
        setting_role("knob_test.k")
