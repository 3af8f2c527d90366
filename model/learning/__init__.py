"""MobiDFL's learning engine: datasets, partitions, network templates, stacked-parameter
training of all agents (``loop`` / ``batched`` backends) and sparse mixing.

Typical use (what the Mesa model does each step)::

    ds = load_dataset("mnist5k", root=None, test_size=500, seed=0)
    parts = make_partition("shards", ds.train_labels, n_agents, rng=rng)
    eng = make_engine("loop", net="mlp", dataset=ds, parts=parts, lr=0.05, batch_size=16,
                      local_steps=5, seed=0)
    eng.train()                       # K local steps per agent
    eng.mix(W)                        # W: scipy CSR, row-stochastic (model.maths.mixing)
    acc, loss = eng.evaluate()
"""

from model.learning.data import DATASETS, Dataset, DatasetUnavailable, load_dataset
from model.learning.engine import BACKENDS, Engine, make_engine
from model.learning.nets import NETS, build_net, flops_per_sample
from model.learning.partition import PARTITIONS, label_histograms, make_partition

__all__ = [
    "BACKENDS",
    "DATASETS",
    "NETS",
    "PARTITIONS",
    "Dataset",
    "DatasetUnavailable",
    "Engine",
    "build_net",
    "flops_per_sample",
    "label_histograms",
    "load_dataset",
    "make_engine",
    "make_partition",
]
