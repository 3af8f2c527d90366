"""The one plug-in Registry (model/registry.py): names, duplicates, lookups, and a toy policy
that registers in this file and runs end to end through the Mesa model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from mobidfl.agents.mobility import MOBILITY_MODELS, MobilityModel, register_mobility
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, public_names, settings_table
from mobidfl.model.policies import (
    POLICIES,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    register_policy,
)
from mobidfl.registry import Registry, plugin_modules
from mobidfl.settings import PluginSettings, positive, setting


class _Plugin:
    name = "alpha"

    def __init__(self, *, size: int = 1) -> None:
        self.size = size


def test_registry_registers_by_attribute_or_name_and_reads_like_a_dict():
    # Prepare
    reg: Registry[_Plugin] = Registry("plugin")

    # Execute
    reg.register(_Plugin)

    @reg.register("beta")
    class Beta(_Plugin):
        pass

    # Assert
    assert list(reg) == ["alpha", "beta"] and reg.names() == ["alpha", "beta"]
    assert "beta" in reg and reg["beta"] is Beta and reg.get("gamma") is None
    assert dict(reg.items()) == {"alpha": _Plugin, "beta": Beta} and len(reg) == 2
    assert reg.make("beta", size=3).size == 3
    assert reg.register(_Plugin) is _Plugin  # the same class again is a no-op


def test_registry_refuses_duplicates_bad_names_and_unknown_lookups():
    reg: Registry[_Plugin] = Registry("plugin")
    reg.register(_Plugin)
    with pytest.raises(ValueError, match="'alpha' is registered twice"):
        reg.register("alpha")(type("Other", (_Plugin,), {}))
    for bad in ("", "two words", "1st", "a-b", "x.y"):
        with pytest.raises(ValueError, match="not an identifier"):
            reg.register(bad)(_Plugin)
    with pytest.raises(TypeError, match="class attribute `name`"):
        reg.register(type("Nameless", (), {}))
    with pytest.raises(ConfigError, match=r"setting 'plugin' = 'gamma'.*one of alpha$"):
        reg.make("gamma")
    with pytest.raises(ConfigError, match="setting 'uav.plugin'"):
        reg.lookup("gamma", setting="uav.plugin")


def test_mobility_registry_refuses_a_taken_name():
    assert {"static", "route", "random_walk"} <= set(MOBILITY_MODELS.keys())
    with pytest.raises(ValueError, match="'static' is registered twice"):

        @register_mobility
        class Impostor(MobilityModel):
            name = "static"

            def advance(self, ctx):
                return np.zeros((1, self.count, 2))


@dataclass(frozen=True, kw_only=True)
class ToySettings(PluginSettings):
    """The toy policy's own setting: a weight reported as a metric."""

    namespace: ClassVar[str] = "toy"
    x: float = setting(1.0, "toy_mean: the weight it reports", positive, alias="toy_x")


TOY_WORLD = {"policy": "toy_mean", "map": "nyc_uws", "vehicles": 4, "pedestrians": 0,
             "sensors": 0, "uavs": 0, "steps": 2, "test_size": 50}


def test_a_toy_policy_in_a_test_registers_and_runs_end_to_end(tmp_path):
    from mobidfl.model.world import MobiDFLModel

    # Prepare: a FedAvg over all members with its own settings and declared metrics,
    # declaring a requirement by an old flat name (checked, never applied)
    @register_policy
    class ToyMean(ExchangePolicy):
        name = "toy_mean"
        settings_class = ToySettings
        options: ToySettings
        metric_names: ClassVar[tuple[str, ...]] = ("toy_members", "toy_step", "toy_x")
        requires: ClassVar[dict[str, Any]] = {"cache_size": 7}

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            mean = ctx.engine.average(agents=ctx.members)
            return Exchange(
                assign={int(i): mean for i in ctx.members},
                metrics={"toy_members": float(ctx.members.size), "toy_step": float(ctx.step),
                         "toy_x": self.options.x},
            )

    try:
        # Execute
        declared = Config.from_settings(TOY_WORLD, cache_size=7)
        from_set = Config().with_overrides([f"{k}={v}" for k, v in TOY_WORLD.items()]
                                           + ["toy.x=2.5", "cache_size=7"])
        from_alias = Config.from_settings(TOY_WORLD, toy_x=2.5, cache_size=7)
        with pytest.raises(ConfigError) as bad:
            Config.from_settings(TOY_WORLD, cache_size=7, **{"toy.x": -1})
        with pytest.raises(ConfigError) as contrary:
            Config.from_settings(TOY_WORLD, cache_size=5)
        with pytest.raises(ConfigError) as missing:
            Config.from_settings(TOY_WORLD)
        model = MobiDFLModel(**TOY_WORLD, cache_size=7, **{"toy.x": 2.0}).run()
        model.model_table().to_csv(tmp_path / "model.csv", index=False)
        table = pd.read_csv(tmp_path / "model.csv")
        rows = {name: default for name, default, _ in settings_table()}

        # Assert: the settings are composed, documented, validated with one line
        assert (declared.toy.x, declared.cached.size) == (1.0, 7)
        # a policy fills nothing (the default data set's auto choice is no policy's)
        assert declared.derived_settings() <= {"dataset"}
        assert str(missing.value).startswith("setting 'cached.size' = ")
        assert "is not allowed: 7, which the vehicle policy toy_mean needs" in str(missing.value)
        assert from_set.toy.x == from_alias.toy.x == from_set.setting("toy_x") == 2.5
        assert rows["toy.x"] == "1.0"
        assert str(bad.value) == "setting 'toy.x' = -1.0 is not allowed: a number > 0"
        assert str(contrary.value).startswith("setting 'cache_size' = 5 is not allowed: 7")
        # the policy ran with its own instance (all models equal, its x in model.csv)
        assert POLICIES["toy_mean"] is ToyMean and "toy_mean" in POLICIES.names()
        assert model.config.toy == ToySettings(x=2.0)
        assert "[toy]\nx = 2.0\n" in model.config.to_toml()
        assert model.steps == 2 and model.learner.engine.consensus() == 0.0
        ran = table[table["step"] >= 1]
        assert ran["toy_members"].tolist() == [4.0, 4.0]
        assert ran["toy_step"].tolist() == [1.0, 2.0]
        assert ran["toy_x"].tolist() == [2.0, 2.0]
        with pytest.raises(ValueError, match="'toy_mean' is registered twice"):

            @register_policy
            class ToyAgain(ToyMean):
                name = "toy_mean"

    finally:
        POLICIES.unregister("toy_mean")
    assert "toy_mean" not in POLICIES and "toy.x" not in public_names()
    with pytest.raises(ConfigError, match="setting 'policy' = 'toy_mean'"):
        MobiDFLModel(**TOY_WORLD)
    with pytest.raises(ConfigError, match="unknown setting 'toy.x'"):
        Config.from_settings({"toy.x": 2.0})


def test_a_policy_that_declares_defaults_is_refused_in_one_line():
    # Prepare: a plug-in policy that would change the world when chosen
    @register_policy
    class Meddler(ExchangePolicy):
        name = "toy_meddler"
        defaults: ClassVar[dict[str, Any]] = {"radius_m": 150.0}

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            return Exchange()

    try:
        # Execute
        with pytest.raises(ConfigError) as err:
            Config.from_settings(TOY_WORLD, policy="toy_meddler")
        # Assert: one line naming the class attribute and why
        message = str(err.value)
        assert message.startswith("setting 'policy toy_meddler.defaults' = {'radius_m': 150.0}")
        assert "a policy never changes the world" in message and "\n" not in message
    finally:
        POLICIES.unregister("toy_meddler")


def test_plugin_modules_come_from_the_entry_points_of_the_project_file():
    # Prepare / Execute
    modules = plugin_modules()
    # Assert: the built-ins are declared (pyproject.toml), and loaded into the registries
    assert modules[:5] == ["mobidfl.model.policies", "mobidfl.agents.mobility",
                           "mobidfl.model.learning.data", "mobidfl.model.learning.partition",
                           "mobidfl.model.learning.nets"]
    assert {"psfl", "mofel"} <= set(POLICIES) and "route" in MOBILITY_MODELS


def test_a_registry_with_a_group_loads_its_plugins_once_on_first_lookup(tmp_path, monkeypatch):
    # Prepare: a group whose one module (a real file) registers into a fresh registry
    import sys
    import types

    reg: Registry[Any] = Registry("gadget", group="toy.group")
    target = types.ModuleType("toy_gadget_target")
    target.__dict__.update(REG=reg, PLUGIN=_Plugin, LOADS=[])
    (tmp_path / "toy_gadgets.py").write_text(
        "import toy_gadget_target as t\nt.LOADS.append(1)\nt.REG.register(t.PLUGIN)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "toy_gadget_target", target)
    monkeypatch.delitem(sys.modules, "toy_gadgets", raising=False)
    monkeypatch.setattr("mobidfl.registry._LOADED", {})
    monkeypatch.setattr(
        "mobidfl.registry.plugin_modules",
        lambda group: ["toy_gadgets"] if group == "toy.group" else [],
    )
    # Execute
    reg.register("late")(_Plugin)  # registering does not load
    before = list(target.LOADS)
    names = reg.names()
    again = ("alpha" in reg, len(reg), reg["alpha"])
    # Assert
    assert before == [] and names == ["alpha", "late"] and again == (True, 2, _Plugin)
    assert target.LOADS == [1]


def test_a_plugin_namespace_that_shadows_a_setting_is_refused():
    # Prepare: a policy whose settings namespace is the core setting `seed`
    @dataclass(frozen=True, kw_only=True)
    class SeedSettings(PluginSettings):
        namespace: ClassVar[str] = "seed"
        x: int = setting(1, "nothing")

    @register_policy
    class Shadow(ExchangePolicy):
        name = "toy_shadow"
        settings_class = SeedSettings

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            return Exchange()

    # Execute
    try:
        with pytest.raises(ConfigError) as info:
            Config.from_settings(vehicles=3)
    finally:
        POLICIES.unregister("toy_shadow")
    # Assert
    assert info.value.setting == "policy toy_shadow.settings_class.namespace"
    assert Config.from_settings(vehicles=3).vehicles == 3  # fine again once it is gone


def test_the_namespace_table_follows_registering_and_removing_a_plugin():
    # Prepare: the table as it is, and the registry's version
    from mobidfl.model.config.fields import _plugin_namespaces as plugin_namespaces

    before, version = plugin_namespaces(), POLICIES.version

    @register_policy
    class ToyNamespaced(ExchangePolicy):
        name = "toy_namespaced"
        settings_class = ToySettings

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            return Exchange()

    # Execute: read the table while the policy is registered, and after it is removed
    try:
        register_policy(ToyNamespaced)  # the same class again: no change
        during, version_during = plugin_namespaces(), POLICIES.version
    finally:
        POLICIES.unregister("toy_namespaced")
    after = plugin_namespaces()
    # Assert: one version step per change; the toy namespace appears, then goes
    assert version_during == version + 1 and POLICIES.version == version + 2
    assert during == {**before, "toy": ToySettings} and "toy" not in before
    assert after == before
