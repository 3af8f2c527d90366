"""Agents are created in bulk per kind and are thin views onto the model's arrays."""

from __future__ import annotations

import numpy as np

from mobidfl.agents.kinds import UAV, Pedestrian, Sensor, Vehicle
from mobidfl.model.world import MobiDFLModel


def test_agents_by_type_and_ids_follow_the_arrays():
    # Prepare
    model = MobiDFLModel(map="nyc_uws", vehicles=4, pedestrians=3, sensors=2, uavs=1,
                         learning=False, steps=1, seed=3)
    # Execute
    model.step()
    # Assert: one AgentSet per kind, agent_id = row of the arrays = unique_id - 1
    counts = {cls: len(model.agents_by_type[cls]) for cls in (Vehicle, Pedestrian, Sensor, UAV)}
    assert counts == {Vehicle: 4, Pedestrian: 3, Sensor: 2, UAV: 1}
    for agent in model.device_agents:
        assert agent.unique_id == agent.index + 1
        assert model.kind_of[agent.index] == agent.kind
        np.testing.assert_array_equal(agent.position_m, model.position[agent.index])
    speeds = model.agents_by_type[Vehicle].get("speed")
    np.testing.assert_allclose(speeds, model.speed[:4])
