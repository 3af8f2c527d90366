"""Shared fixtures: one thread per process (measured: 2 threads can be 10x slower here)."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def nyc():
    from maps.world import WorldMap

    return WorldMap.build("nyc_uws", cell_m=100.0, areas=3, seed=0)
