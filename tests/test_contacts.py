"""Contacts come from a spatial index and match brute force; 'during' sees crossings."""

from __future__ import annotations

import numpy as np
import pytest

from model.contacts import brute_force_contacts, contact_matrix, sub_samples


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
    import model.contacts as contacts

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
