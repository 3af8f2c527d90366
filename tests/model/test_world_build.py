"""Start-up cost of a world: what a world without learning imports (benchmarks/world_build.py).

A mobility-only world (``learning = false``) needs no torch, and building any world needs
no plotting: torch's import alone is seconds on a cold disk, matplotlib's pyplot (through
osmnx) a large part of the rest. Checked in a fresh interpreter, where nothing is loaded yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
from mobidfl.model import MobiDFLModel
after_import = sorted(m for m in ("torch", "matplotlib", "osmnx") if m in sys.modules)
model = MobiDFLModel(map="nyc_uws", vehicles=5, pedestrians=3, sensors=2, uavs=1, steps=2,
                     learning=False, seed=0)
model.step()
after_build = sorted(m for m in ("torch", "matplotlib", "osmnx") if m in sys.modules)
from mobidfl.model import Config
Config(model="cached_cnn", dataset="fashion_mnist", policy="psfl")  # names checked, no torch
after_check = sorted(m for m in ("torch",) if m in sys.modules)
print(json.dumps([after_import, after_build, after_check, model.steps]))
"""


AUTO_PROBE = r"""
import json, sys
from mobidfl.model import MobiDFLModel
model = MobiDFLModel(map="grid:3x3", vehicles=3, pedestrians=0, sensors=0, uavs=0, steps=1,
                     learning=False, seed=0)  # the default data set: auto:fashion_mnist|mnist5k
model.step()
print(json.dumps([model.config.dataset, "torch" in sys.modules]))
"""
SYSTEM_FASHION = Path("/usr/share/datasets/fashion-mnist")


def probe(code: str = PROBE, **env_extra: str) -> list:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_world_without_learning_imports_neither_torch_nor_plotting():
    # Execute
    after_import, after_build, after_check, steps = probe()
    # Assert: the map of nyc_uws is read from momepy's GraphML without osmnx too
    assert after_import == []
    assert after_build == [] and steps == 1
    assert after_check == []


@pytest.mark.skipif(not (SYSTEM_FASHION / "t10k-labels-idx1-ubyte.gz").is_file(),
                    reason="Debian's dataset-fashion-mnist is not installed (make fashion-mnist)")
def test_finding_the_default_data_set_present_imports_no_torch():
    # Execute: the system copy visible (conftest hides it from the other tests)
    dataset, torch_imported = probe(AUTO_PROBE, MOBIDFL_FASHION_DIR=str(SYSTEM_FASHION))
    # Assert: its files were read and checked (it was chosen), no tensors were made
    assert dataset == "fashion_mnist"
    assert not torch_imported


def test_learning_still_gets_torch_where_tensors_are_made(ds):
    # Prepare / Execute: the dataset fixture made tensors, the nets build modules
    from mobidfl.model.learning.nets import build_net, flops_per_sample

    net = build_net("cached_cnn", ds.input_shape, ds.num_classes)
    # Assert
    assert ds.x_train.dtype.is_floating_point and ds.y_train.dtype.is_signed
    assert flops_per_sample(net, ds.input_shape, backward=False) > 0
