"""MobiDFL's learning engine.

Datasets, partitions, network templates, stacked-parameter training of all agents (``loop`` /
``batched`` backends) and sparse mixing.

Typical use (what the Mesa model does each step)::

    ds = load_dataset("mnist5k", root=None, test_size=500, seed=0)
    parts = make_partition("shards", ds.train_labels, n_agents, rng=rng)
    training = TrainingSettings(net="mlp", lr=0.05, batch_size=16, local_steps=5, seed=0)
    eng = make_engine("loop", training, dataset=ds, parts=parts)
    eng.train()                       # K local steps per agent
    eng.mix(W)                        # W: scipy CSR, row-stochastic (mobidfl.model.maths.mixing)
    acc, loss = eng.evaluate()

Names are imported lazily (PEP 562), so ``import mobidfl.model.learning.partition`` (e.g. for the
config's name check) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DATASETS": "data",
    "Dataset": "data",
    "DatasetUnavailable": "data",
    "DatasetDamaged": "data",
    "load_dataset": "data",
    "BACKENDS": "engine",
    "Engine": "engine",
    "make_engine": "engine",
    "TrainingSettings": "engine",
    "NETS": "nets",
    "build_net": "nets",
    "flops_per_sample": "nets",
    "PARTITIONS": "partition",
    "label_histograms": "partition",
    "make_partition": "partition",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mobidfl.model.learning' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mobidfl.model.learning.{_EXPORTS[name]}"), name)
