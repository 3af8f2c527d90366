"""Contacts come from a spatial index and match brute force; 'during' sees crossings."""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.model.contacts import brute_force_contacts, contact_matrix, sub_samples


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ckdtree_contacts_equal_brute_force(seed):
    # Prepare
    rng = np.random.default_rng(seed)
    xy = rng.random((400, 2)) * 1000.0
    # Execute
    fast = contact_matrix(xy[None], radius_m=80.0, mode="end")
    slow = brute_force_contacts(xy, 80.0)
    # Assert
    assert fast.nnz > 0
    assert (fast != slow).nnz == 0


def test_crossing_is_found_by_during_and_missed_by_end():
    # Prepare: two agents drive through each other between the start and end of a step
    start = np.array([[0.0, 0.0], [1000.0, 0.0]])
    end = np.array([[1000.0, 0.0], [0.0, 0.0]])
    trajectory = np.stack([start, end])
    # Execute
    during = contact_matrix(trajectory, radius_m=100.0, mode="during")
    at_end = contact_matrix(trajectory, radius_m=100.0, mode="end")
    # Assert
    assert during[0, 1] and during[1, 0]
    assert at_end.nnz == 0


def test_near_miss_outside_radius_is_not_a_contact():
    # parallel tracks 150 m apart crossing in x: closest approach 150 m > 100 m
    start = np.array([[0.0, 0.0], [1000.0, 150.0]])
    end = np.array([[1000.0, 0.0], [0.0, 150.0]])
    during = contact_matrix(np.stack([start, end]), radius_m=100.0, mode="during")
    assert during.nnz == 0


def test_sub_samples_grow_with_speed_times_step_over_radius():
    assert sub_samples(max_step_distance=0.0, radius_m=100.0) == 1
    assert sub_samples(max_step_distance=1666.8, radius_m=100.0) == 34


def test_crowded_steps_use_the_bitmap_and_agree_with_the_sparse_path(monkeypatch):
    from mobidfl.model import contacts

    # Prepare: 300 agents crossing a 200 m box: far more than n^2/16 pair sightings
    rng = np.random.default_rng(3)
    start, end = rng.random((300, 2)) * 200, rng.random((300, 2)) * 200
    trajectory = np.stack([start, (start + end) / 2, end])
    # Execute
    crowded = contact_matrix(trajectory, radius_m=100.0, mode="during")
    monkeypatch.setattr(contacts, "DENSE_DEDUP_LIMIT", 0)  # force the sparse path
    sparse = contact_matrix(trajectory, radius_m=100.0, mode="during")
    # Assert
    assert crowded.nnz > 300 * 300 // 16
    assert (crowded != sparse).nnz == 0


# --- the rewritten 'during' search against the code it replaced (tests/contacts_oracle.py) ---


def _same_as_oracle(trajectory: np.ndarray, radius: float) -> int:
    """Asserts the new contact matrix equals the oracle's; returns the pair count."""
    from tests.contacts_oracle import contact_matrix as oracle

    new = contact_matrix(trajectory, radius_m=radius, mode="during")
    old = oracle(trajectory, radius_m=radius, mode="during")
    assert new.shape == old.shape
    assert (new != old).nnz == 0
    assert new.has_canonical_format
    return new.nnz // 2


def _random_trajectories(seed: int, n: int, steps: int, box: float, speed: float) -> np.ndarray:
    """Random walks with per-agent speeds, a fifth of the agents standing still."""
    rng = np.random.default_rng(seed)
    start = rng.random((n, 2)) * box + 5e5  # UTM-like coordinates
    heading = rng.random(n) * 2 * np.pi
    v = rng.random(n) * speed
    v[rng.random(n) < 0.2] = 0.0
    out = [start]
    for _ in range(steps):
        heading += rng.normal(0, 0.6, n)
        out.append(out[-1] + np.stack([np.cos(heading), np.sin(heading)], 1) * v[:, None])
    return np.stack(out)


@pytest.mark.parametrize("seed", range(6))
def test_during_contacts_equal_the_oracle_on_random_walks(seed):
    # Prepare
    trajectory = _random_trajectories(seed, n=700, steps=6, box=2000.0, speed=60.0)
    # Execute / Assert
    assert _same_as_oracle(trajectory, radius=100.0) > 100


@pytest.mark.parametrize("grid", [None, (1, 1), (2, 2), (3, 3), (3, 12), (5, 2), (4, 16)])
def test_every_grid_resolution_and_the_tree_fallback_equal_the_oracle(monkeypatch, grid):
    from mobidfl.model import contacts

    # Prepare: grid None is the cKDTree fallback
    monkeypatch.setattr(contacts, "GRIDS", (grid,) if grid else ())
    monkeypatch.setattr(contacts, "CELLS_PER_AGENT", 10**6)
    monkeypatch.setattr(contacts, "CHUNK", 257)  # many blocks, uneven
    trajectory = _random_trajectories(11, n=500, steps=4, box=1500.0, speed=45.0)
    # Execute / Assert
    assert _same_as_oracle(trajectory, radius=80.0) > 100


def test_a_grid_too_large_falls_back_to_the_tree(monkeypatch):
    from mobidfl.model import contacts

    monkeypatch.setattr(contacts, "CELL_LIMIT", 10)
    trajectory = _random_trajectories(12, n=300, steps=3, box=1000.0, speed=40.0)
    assert _same_as_oracle(trajectory, radius=90.0) > 50


def test_edge_cases_equal_the_oracle():
    # Prepare: exactly representable coordinates on a 50 m lattice, R = 100
    r = 100.0
    rows = [
        # standing still exactly R apart, and just beyond
        ([0, 0], [0, 0]), ([100, 0], [100, 0]), ([0, 1000], [0, 1000]),
        ([100.00000000001, 1000], [100.00000000001, 1000]),
        # parallel tracks exactly R apart, same direction and opposite directions
        ([0, 2000], [50, 2000]), ([0, 2100], [50, 2100]), ([50, 2200], [0, 2200]),
        # head-on swap: in range only strictly inside the sub-interval
        ([0, 3000], [400, 3000]), ([400, 3000], [0, 3000]),
        # crossing paths at right angles, passing the crossing at different times
        ([1000, 0], [1000, 400]), ([800, 200], [1200, 200]),
        # receding from exactly R, and closing to exactly R
        ([2000, 0], [1950, 0]), ([2100, 0], [2150, 0]),
        ([3000, 0], [3050, 0]), ([3200, 0], [3150, 0]),
        # on top of each other
        ([4000, 4000], [4000, 4000]), ([4000, 4000], [4050, 4000]),
    ]  # fmt: skip
    start = np.array([a for a, _ in rows], float)
    end = np.array([b for _, b in rows], float)
    for steps in (1, 2, 4):
        trajectory = np.stack([start + (end - start) * k / steps for k in range(steps + 1)])
        # Execute / Assert
        assert _same_as_oracle(trajectory, radius=r) >= 6
        assert _same_as_oracle(trajectory + 5e5, radius=r) >= 6  # UTM-sized coordinates


def test_all_agents_standing_still_is_the_end_rule():
    rng = np.random.default_rng(4)
    xy = np.round(rng.random((400, 2)) * 20) * 50.0  # many pairs exactly 100 m apart
    trajectory = np.stack([xy, xy, xy])
    during = contact_matrix(trajectory, radius_m=100.0, mode="during")
    assert (during != brute_force_contacts(xy, 100.0)).nnz == 0
    assert _same_as_oracle(trajectory, radius=100.0) > 400


def test_manhattan_lattice_motion_equals_the_oracle():
    # Prepare: agents on a 100 m street lattice moving along the streets, many exact ties
    rng = np.random.default_rng(8)
    n, steps = 600, 8
    xy = np.stack([rng.integers(0, 30, n) * 100.0, rng.integers(0, 30, n) * 25.0], 1)
    xy[n // 2 :] = xy[n // 2 :, ::-1]  # half on the other street direction
    along = np.where(np.arange(n) < n // 2, 0, 1)
    step = rng.choice([-25.0, 0.0, 25.0, 50.0], n)
    out = [xy]
    for _ in range(steps):
        nxt = out[-1].copy()
        nxt[np.arange(n), 1 - along] += step
        out.append(nxt)
    # Execute / Assert
    assert _same_as_oracle(np.stack(out), radius=100.0) > 1000


def test_crowded_bitmap_path_equals_the_oracle():
    trajectory = _random_trajectories(13, n=400, steps=5, box=250.0, speed=30.0)
    assert _same_as_oracle(trajectory, radius=100.0) > 400 * 400 // 16


@pytest.mark.parametrize("skip_known", [False, True])
def test_crowded_bitmap_path_with_or_without_skipping_known_pairs(monkeypatch, skip_known):
    from mobidfl.model import contacts

    monkeypatch.setattr(contacts, "SKIP_KNOWN", skip_known)
    trajectory = _random_trajectories(14, n=350, steps=6, box=300.0, speed=40.0)
    assert _same_as_oracle(trajectory, radius=90.0) > 350 * 350 // 16


def test_zero_radius_and_a_huge_map_use_the_tree():
    # Prepare: R = 0 (no grid cell size) and a 1e15 m extent (a grid would overflow)
    rng = np.random.default_rng(15)
    trajectory = _random_trajectories(15, n=200, steps=2, box=500.0, speed=30.0)
    far = trajectory.copy()
    far[:, :5] += 1e15
    # Execute / Assert
    assert _same_as_oracle(trajectory, radius=0.0) == 0
    assert _same_as_oracle(far, radius=80.0) > 10
    still = np.stack([rng.random((50, 2))] * 2)
    assert _same_as_oracle(still, radius=0.0) == 0
