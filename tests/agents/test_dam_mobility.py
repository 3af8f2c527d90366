"""DAM / DCM mobility wired into MobiDFL (Reza et al., eqs. 4-9, Alg. 1): agents/mobility/dam.py."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from mobidfl.agents.mobility import MobilityContext, make_mobility
from mobidfl.agents.mobility.dam import NO_DESTINATION, DistributionAwareGrid
from mobidfl.agents.mobility.distribution import coverage_matrix, label_distribution_at_cells
from mobidfl.errors import ConfigError
from mobidfl.maps.world import WorldMap
from mobidfl.model.config import Config
from mobidfl.model.world import MobiDFLModel
from mobidfl.model.world_view import ModelWorldView

# Hand 3x3 layout of tests/agents/test_distribution.py, now as MobiDFL agents on 10 m cells:
#   sensor A on cell 0 with label counts [2, 0], sensor B on cell 8 with [0, 6],
#   one UAV with [1, 1]; R_c = 1 cell (radius_m = 10), Euclidean.
HAND_HIST = np.array([[2, 0], [0, 6], [1, 1]])


@pytest.fixture(scope="module")
def grid3() -> WorldMap:
    return WorldMap.build("grid:2x2:30", cell_m=10.0, areas=1, seed=0)


def _hand_world(
    grid3: WorldMap, mobility: str, *, rm: float = math.inf, sensors_in: bool = True
) -> tuple[ModelWorldView, DistributionAwareGrid]:
    """A world view over a stand-in model: groups, positions, label histograms (what DAM/DCM
    read); ``sensors_in=False`` leaves the static sensors' group out."""
    settings = Config(
        map="grid:2x2:30", cell_m=10.0, radius_m=10.0, rm_cells=rm, vehicles=0, sensors=2,
        uavs=1,
    )
    rng = np.random.default_rng(0)
    sensors = make_mobility(
        "static", world=grid3, kind="sensor", count=2, settings=settings, rng=rng
    )
    sensors.cell = np.array([0, 8])
    sensors.position = grid3.grid.centres(sensors.cell)
    uav = make_mobility(mobility, world=grid3, kind="uav", count=1, settings=settings, rng=rng)
    uav.cell = np.array([0])
    uav.position = grid3.grid.centres(uav.cell)
    groups = [("sensor", slice(0, 2), sensors), ("uav", slice(2, 3), uav)]
    model = SimpleNamespace(
        groups=groups if sensors_in else groups[1:],
        position=np.concatenate([sensors.position, uav.position]),
        label_hist=HAND_HIST,
    )
    return ModelWorldView(model), uav


def _ctx(world: ModelWorldView, rng: np.random.Generator) -> MobilityContext:
    return MobilityContext(world=world, step_s=60.0, fractions=np.array([1.0]), rng=rng)


def test_grid3_map_is_a_3x3_grid(grid3: WorldMap) -> None:
    # Assert: the hand case really sits on a 3 x 3 grid of 10 m cells.
    assert (grid3.grid.rows, grid3.grid.cols, grid3.grid.cell_m) == (3, 3, 10.0)


def test_dam_reads_static_clients_and_histograms_per_eq4(grid3: WorldMap) -> None:
    # Prepare
    model, uav = _hand_world(grid3, "dam")
    # Execute
    dist = uav.distributions(model)
    # Assert: the same numbers as the hand table of test_distribution (eq. 4).
    expected = np.array(
        [
            [0.75, 0.25], [0.75, 0.25], [0.5, 0.5],
            [0.75, 0.25], [0.5, 0.5], [0.125, 0.875],
            [0.5, 0.5], [0.125, 0.875], [0.125, 0.875],
        ]
    )
    assert dist.shape == (1, 9, 2)
    # exact integer counts, one correctly rounded division of exact dyadic values: bit-exact
    np.testing.assert_array_equal(dist[0], expected)


def test_dam_destination_frequencies_follow_eq6(grid3: WorldMap) -> None:
    # Prepare: unconstrained, so the UAV lands on the destination it draws.
    model, uav = _hand_world(grid3, "dam")
    rng = np.random.default_rng(11)
    draws = []
    for _ in range(4200):
        uav.cell = np.array([0])
        uav.destination = np.array([NO_DESTINATION])
        # Execute
        draws.append(int(uav.next_cells(_ctx(model, rng))[0]))
    # Assert: eq. 6 from cell 0: 5/21 on cells 5,7,8; 2/21 on 2,4,6; 0 on 0,1,3.
    freq = np.bincount(draws, minlength=9) / len(draws)
    expected = np.array([0, 0, 2, 0, 2, 5, 2, 5, 5]) / 21
    # statistical: binomial sd sqrt(p(1-p)/n) <= sqrt(5/21 * 16/21 / 4200) = 0.0066, so 0.025
    # is 3.8 sd; the draws are seeded (PCG64, integer arithmetic): the same on every CPU
    np.testing.assert_allclose(freq, expected, rtol=0, atol=0.025)
    assert freq[[0, 1, 3]].sum() == 0.0


def test_dcm_centres_follow_alg1_and_destinations_use_eq9(grid3: WorldMap) -> None:
    # Prepare: Alg. 1 with R_c = 1: each sensor is covered by 3 tied cells, so one centre in
    # {0, 1, 3} (A's side) and one in {5, 7, 8} (B's side). From cell 0 (which sees A's
    # mix), A's centre has distance 0, so eq. 9 puts all mass on B's centre.
    model, uav = _hand_world(grid3, "dcm")
    rng = np.random.default_rng(5)
    # Execute
    first = int(uav.next_cells(_ctx(model, rng))[0])
    centres = uav.centres.tolist()
    # Assert
    assert len(centres) == 2
    assert {c in {0, 1, 3} for c in centres} == {True, False}
    b_centre = next(c for c in centres if c in {5, 7, 8})
    assert first == b_centre and int(uav.destination[0]) == b_centre
    cover = coverage_matrix([0, 8], grid=3, rc=1.0)
    assert cover[centres].any(axis=0).all()
    # Later draws from B's centre go back to A's centre only.
    for _ in range(5):
        assert int(uav.next_cells(_ctx(model, rng))[0]) in centres
        uav.cell = uav.destination.copy()


def test_destination_is_kept_until_reached_eq8_and_moves_respect_rm(grid3: WorldMap) -> None:
    # Prepare: R_m = 1 on the 3 x 3 grid: the far side (cells 5,7,8) needs >= 2 steps.
    model, uav = _hand_world(grid3, "dam", rm=1.0)
    rng = np.random.default_rng(3)
    kept = redrawn = 0
    for _ in range(300):
        before, target = int(uav.cell[0]), int(uav.destination[0])
        # Execute
        uav.cell = uav.next_cells(_ctx(model, rng))
        after = int(uav.cell[0])
        # Assert: at most R_m per step (eq. 7) ...
        r0, c0 = divmod(before, 3)
        r1, c1 = divmod(after, 3)
        assert math.hypot(r1 - r0, c1 - c0) <= 1.0 + 1e-12
        # ... and the destination survives until reached (eq. 8).
        if target not in (NO_DESTINATION, before):
            assert int(uav.destination[0]) == target
            kept += 1
        else:
            redrawn += 1
    assert kept > 0 and redrawn > 0


@pytest.mark.parametrize("mobility", ["dam", "dcm"])
def test_real_run_never_moves_more_than_rm(mobility: str) -> None:
    # Prepare: Reza et al.'s world at toy size: 12 x 12 cells, 8 sensors, 3 UAVs, R_m = 2.
    model = MobiDFLModel(
        **{
            "map": "grid:2x2:120", "cell_m": 10.0, "vehicles": 0, "pedestrians": 0,
            "sensors": 8, "uavs": 3,
            "uav.mobility": mobility, "rm_cells": 2.0, "radius_m": 30.1, "contact": "end",
            "policy": "fedavg_weighted", "partition": "dirichlet", "dirichlet_alpha": 0.05,
            "steps": 12, "local_steps": 1, "batch_size": 10, "eval_every": 12,
            "record_every": 1, "seed": 4,
        }
    )
    uav_group = model.groups[-1][2]
    assert (model.world_map.grid.rows, model.world_map.grid.cols) == (12, 12)
    # Execute
    model.run()
    agents = model.agent_table()
    # Assert: positions of the mobile clients over time are in agents.parquet's table and no
    # step is longer than R_m cells; sensors never move; something did move.
    uavs = agents[agents["kind"] == "uav"].sort_values(["agent_id", "step"])
    assert uavs["step"].nunique() == 13
    steps = uavs.groupby("agent_id")[["x_m", "y_m"]].diff().dropna()
    hops = np.hypot(steps["x_m"], steps["y_m"]) / 10.0
    assert hops.max() <= 2.0 + 1e-9
    assert hops.max() > 0.0
    sensors = agents[agents["kind"] == "sensor"]
    assert sensors.groupby("agent_id")[["x_m", "y_m"]].nunique().max().max() == 1
    assert np.isfinite(model.accuracy).all()
    # The distributions the UAVs steer by are eq. 4 over the model's own sensors and data.
    sensor_idx = np.flatnonzero(model.kind_of == "sensor")
    cells = model.world_map.grid.cell_of(model.position[sensor_idx])
    want = label_distribution_at_cells(
        cells, model.label_hist[sensor_idx], model.label_hist[-1], grid=(12, 12), rc=3.01
    )
    # bit-exact: same code path (label_distribution_at_cells on the same integer counts)
    np.testing.assert_array_equal(uav_group.distributions(model.view)[-1], want)


@pytest.mark.parametrize("mobility", ["dam", "dcm"])
def test_state_dict_round_trip_continues_identically(grid3: WorldMap, mobility: str) -> None:
    # Prepare: run a few steps, checkpoint mobility state and the model's generator.
    model, uav = _hand_world(grid3, mobility, rm=1.0)
    rng = np.random.default_rng(9)
    for _ in range(4):
        uav.cell = uav.next_cells(_ctx(model, rng))
    state = uav.state_dict()
    rng_state = rng.bit_generator.state
    expected = []
    for _ in range(6):
        uav.cell = uav.next_cells(_ctx(model, rng))
        expected.append(int(uav.cell[0]))
    # Execute: a fresh mobility loads the state (no generator inside it) and continues.
    fresh_model, fresh = _hand_world(grid3, mobility, rm=1.0)
    fresh.load_state_dict(state)
    rng2 = np.random.default_rng(0)
    rng2.bit_generator.state = rng_state
    got = []
    for _ in range(6):
        fresh.cell = fresh.next_cells(_ctx(fresh_model, rng2))
        got.append(int(fresh.cell[0]))
    # Assert
    assert got == expected
    assert "destination" in state and not any("rng" in k for k in state)
    if mobility == "dcm":
        assert state["centres"] is not None


def test_dam_without_learning_is_a_config_error(grid3: WorldMap) -> None:
    settings = Config(map="grid:2x2:30", cell_m=10.0, vehicles=0, uavs=1, learning=False)
    with pytest.raises(ConfigError, match="uav.mobility"):
        make_mobility(
            "dam", world=grid3, kind="uav", count=1, settings=settings,
            rng=np.random.default_rng(0),
        )


def test_dcm_without_static_clients_is_a_config_error(grid3: WorldMap) -> None:
    # Prepare: only the UAV's own group, no static clients for Alg. 1.
    model, uav = _hand_world(grid3, "dcm", sensors_in=False)
    # Execute / Assert
    with pytest.raises(ConfigError, match="static client"):
        uav.next_cells(_ctx(model, np.random.default_rng(0)))


@pytest.mark.parametrize("mobility", ["dam", "dcm"])
def test_model_checkpoint_resume_equals_uninterrupted_run(tmp_path, mobility: str) -> None:
    # Prepare: the real checkpoint path (weights-only torch file) with DAM/DCM UAVs, R_m = 1
    # so destinations are still pending (eq. 8 state) at the checkpoint.
    from mobidfl.model.checkpoint import load, save_atomic

    settings = {
        "map": "grid:2x2:80", "cell_m": 10.0, "vehicles": 0, "pedestrians": 0, "sensors": 5,
        "uavs": 2,
        "uav.mobility": mobility, "rm_cells": 1.0, "radius_m": 20.1, "contact": "end",
        "policy": "fedavg_weighted", "partition": "dirichlet", "dirichlet_alpha": 0.05,
        "steps": 8, "local_steps": 1, "batch_size": 10, "eval_every": 4, "test_size": 100,
        "seed": 2,
    }
    straight = MobiDFLModel(**settings).run()
    first = MobiDFLModel(**settings)
    first.run(steps=3)
    path = save_atomic(first.state_dict(), tmp_path / "state.pt")
    # Execute
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(path))
    resumed.run()
    # Assert: same trajectories and accuracies as the run that never stopped.
    import pandas as pd

    pd.testing.assert_frame_equal(resumed.agent_table(), straight.agent_table())
    pd.testing.assert_frame_equal(resumed.model_table(), straight.model_table())
