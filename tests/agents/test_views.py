"""The world as plug-ins see it (mobidfl.agents.views.WorldView over the Mesa model)."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.model.world import MobiDFLModel
from tests.worlds import NO_AGENTS


@pytest.fixture(scope="module")
def model() -> MobiDFLModel:
    return MobiDFLModel(
        **NO_AGENTS | {"vehicles": 5, "sensors": 3},
        map="nyc_uws", areas=3, steps=2, learning=False, seed=1,
        **{"vehicle.mobility": "route", "sensor.mobility": "static"},
    )


def test_groups_offer_routes_and_static_flags_only_where_the_mobility_has_them(model):
    # Execute
    groups = {g.kind: g for g in model.view.groups}
    # Assert: vehicles disclose routes (MoFeL), sensors are Reza et al.'s static clients
    assert set(groups) == {"vehicle", "sensor"}
    assert groups["vehicle"].route is not None and not groups["vehicle"].static
    assert groups["sensor"].route is None and groups["sensor"].static
    assert groups["vehicle"].mobility == "route"
    assert groups["vehicle"].walker is None and groups["sensor"].walker is None
    assert model.view.n_agents == 8
    np.testing.assert_array_equal(model.view.members_of("sensor"), [5, 6, 7])
    assert model.view.members_of("uav").size == 0


def test_view_reads_are_live_and_refuse_writes(model):
    # Prepare
    view = model.view
    # Execute
    model.step()
    position = view.position
    # Assert: the view follows the model, and a plug-in cannot write through it
    np.testing.assert_array_equal(position, model.position)
    with pytest.raises(ValueError, match="read-only"):
        position[0, 0] = 0.0
    assert model.position.flags.writeable
    assert view.label_hist is None  # learning = false
    assert view.n_areas == 3
    here = model.world_map.area_of(model.position)
    np.testing.assert_array_equal(view.area_of(model.position), here)
    with pytest.raises(ValueError, match="read-only"):
        view.road_node_xy[0, 0] = 0.0
