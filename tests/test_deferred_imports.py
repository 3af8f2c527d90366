"""libpysal imported on first use (mobidfl/deferred.py), in fresh interpreters.

mesa-geo imports libpysal (and through it scikit-learn and scipy.stats) at import time for
polygon neighbourhoods MobiDFL never asks for; the stand-in must save that import and still
give mesa-geo, and anyone else, the real libpysal the moment it is used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys
from mobidfl.model import MobiDFLModel
model = MobiDFLModel(map="grid:3x3", vehicles=3, pedestrians=2, sensors=1, uavs=1, steps=2,
                     learning=False, seed=0)
model.step()
loaded = [m for m in ("sklearn", "scipy.stats", "libpysal.graph") if m in sys.modules]
world = [type(sys.modules["libpysal"]).__name__, loaded, model.steps]
# then mesa-geo's polygon neighbourhoods, which need libpysal
import mesa, mesa_geo
from shapely.geometry import box
owner = mesa.Model(rng=0)
space = mesa_geo.GeoSpace(crs="epsg:3857", warn_crs_conversion=False)
squares = [box(0, 0, 1, 1), box(1, 0, 2, 1), box(5, 5, 6, 6)]
cells = [mesa_geo.GeoAgent(owner, geometry=g, crs="epsg:3857") for g in squares]
space.add_agents(cells)
near = [sorted(cells.index(n) for n in space.get_neighbors(c)) for c in cells]
import libpysal, libpysal.graph
print(json.dumps([world, [near, type(sys.modules["libpysal"]).__name__,
                          isinstance(libpysal.__version__, str), libpysal.graph.Graph.__name__]]))
"""


@pytest.fixture(scope="module")
def probed() -> list:
    """One fresh interpreter: a world first, then mesa-geo's neighbourhoods."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_world_imports_neither_libpysal_nor_scikit_learn(probed):
    # Execute
    stand_in, loaded, steps = probed[0]
    # Assert: mesa-geo was imported (the world is a GeoSpace), libpysal was not
    assert stand_in == "DeferredModule"
    assert loaded == [] and steps == 1


def test_mesa_geo_polygon_neighbours_get_the_real_libpysal_on_first_use(probed):
    # Execute
    near, after, has_version, graph = probed[1]
    # Assert: Queen contiguity as without the stand-in: the two squares sharing an edge are
    # neighbours, the far one has none; the real package replaced the stand-in
    assert near == [[1], [0], []]
    assert after == "module" and has_version and graph == "Graph"
