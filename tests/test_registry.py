"""The one plug-in Registry (model/registry.py): names, duplicates, lookups, and a toy policy
that registers in this file and runs end to end through the Mesa model."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from agents.mobility import MOBILITY_MODELS, MobilityModel, register_mobility
from model.errors import ConfigError
from model.policies import (
    POLICIES,
    Exchange,
    ExchangeContext,
    ExchangePolicy,
    register_policy,
)
from model.registry import Registry


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


def test_a_toy_policy_in_a_test_registers_and_runs_end_to_end(tmp_path):
    from model.world import MobiDFLModel

    # Prepare: a FedAvg over all members with two declared metrics, defined here
    @register_policy
    class ToyMean(ExchangePolicy):
        name = "toy_mean"
        metric_names: ClassVar[tuple[str, ...]] = ("toy_members", "toy_step")

        def exchange(self, ctx: ExchangeContext) -> Exchange:
            mean = ctx.engine.average(agents=ctx.members)
            return Exchange(
                assign={int(i): mean for i in ctx.members},
                metrics={"toy_members": float(ctx.members.size), "toy_step": float(ctx.step)},
            )

    try:
        # Execute
        model = MobiDFLModel(policy="toy_mean", map="nyc_uws", vehicles=4, pedestrians=0,
                             sensors=0, uavs=0, steps=2, test_size=50).run()
        model.model_table().to_csv(tmp_path / "model.csv", index=False)
        table = pd.read_csv(tmp_path / "model.csv")

        # Assert: the policy ran (all models equal) and its metrics reached model.csv
        assert POLICIES["toy_mean"] is ToyMean and "toy_mean" in POLICIES.names()
        assert model.steps == 2 and model.learner.engine.consensus() == 0.0
        ran = table[table["step"] >= 1]
        assert ran["toy_members"].tolist() == [4.0, 4.0]
        assert ran["toy_step"].tolist() == [1.0, 2.0]
        with pytest.raises(ValueError, match="'toy_mean' is registered twice"):

            @register_policy
            class ToyAgain(ToyMean):
                name = "toy_mean"

    finally:
        POLICIES.unregister("toy_mean")
    assert "toy_mean" not in POLICIES
    with pytest.raises(ConfigError, match="setting 'policy' = 'toy_mean'"):
        MobiDFLModel(policy="toy_mean", map="nyc_uws", vehicles=4, pedestrians=0, sensors=0,
                     uavs=0, steps=2, test_size=50)
