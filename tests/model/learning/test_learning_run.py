"""Learning inside the moving world: the effect is there, reproducible, and per-kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mobidfl.errors import ConfigError
from mobidfl.model.world import MobiDFLModel
from tests.worlds import NO_AGENTS, UWS_CARS

RUN = dict({k: v for k, v in UWS_CARS.items() if k != "policy"}, steps=15, test_size=300,
           eval_every=15, partition="shards")


def _final_accuracy(policy: str, seed: int) -> float:
    model = MobiDFLModel(policy=policy, seed=seed, **RUN).run()
    return float(model.model_table()["acc_mean"].iloc[-1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mobile_dpsgd_beats_local_and_central_fedavg_is_at_least_as_good(seed):
    # Execute
    local = _final_accuracy("local", seed)
    dpsgd = _final_accuracy("dpsgd", seed)
    central = _final_accuracy("central_fedavg", seed)
    # Assert: shards give each car 1-4 labels, so local models stay poor
    assert dpsgd > local + 0.2
    assert central >= dpsgd - 0.01


def test_same_seed_gives_identical_model_csv():
    first = MobiDFLModel(seed=4, **RUN).run().model_table()
    second = MobiDFLModel(seed=4, **RUN).run().model_table()
    other = MobiDFLModel(seed=5, **RUN).run().model_table()
    pd.testing.assert_frame_equal(first, second)
    assert not first["acc_mean"].equals(other["acc_mean"])


def test_kinds_can_use_different_policies_in_one_run():
    # Prepare
    model = MobiDFLModel(
        **NO_AGENTS | {"vehicles": 10, "sensors": 6}, map="nyc_uws", steps=3, test_size=100,
        vehicle_policy="dpsgd",
        sensor_policy="local",
    )
    sensors = np.flatnonzero(model.kind_of == "sensor")
    # Execute
    model.run()
    table = model.model_table()
    # Assert: one policy instance per name, over exactly its kind's agents
    assert {"acc_policy_dpsgd", "acc_policy_local", "acc_vehicle", "acc_sensor"} <= set(table)
    assert all(not np.isnan(table[c].iloc[-1]) for c in ("acc_policy_dpsgd", "acc_policy_local"))
    assert np.array_equal(model.learner.policies["local"][1], sensors)
    assert np.array_equal(
        model.learner.policies["dpsgd"][1], np.flatnonzero(model.kind_of == "vehicle")
    )


def test_batch_larger_than_an_agents_data_uses_all_of_it():
    # issue 12: per-agent batch min(B, |D_i|) instead of a refusal
    model = MobiDFLModel(vehicles=10, batch_size=4000, steps=1, test_size=50)
    engine = model.learner.engine
    assert engine.batch_sizes.tolist() == engine.data_sizes.tolist()
    with pytest.raises(ConfigError, match="batch_size"):
        MobiDFLModel(vehicles=10, batch_size=-1, steps=1)
