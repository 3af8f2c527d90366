"""Performance paths keep the numbers: channels-last, eval chunks, auto/Ray workers, CUDA,
bounded-memory contacts, and no step-0 evaluation unless asked (issue 15)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
import torch

from mobidfl.errors import ConfigError
from mobidfl.model import contacts
from mobidfl.model.learning.engine import (
    AUTO_WORKERS_MIN_FLOP,
    TrainingSettings,
    auto_workers,
    make_engine,
)
from mobidfl.model.learning.partition import partition_shards
from mobidfl.model.world import MobiDFLModel


def engine(ds, backend="loop", n=4, **kw):
    opts = dict(net="cnn", lr=0.05, batch_size=16, local_steps=3, seed=3, momentum=0.5)
    opts.update(kw)
    parts = partition_shards(ds.train_labels, n, rng=np.random.default_rng(0))
    return make_engine(backend, TrainingSettings(**opts), dataset=ds, parts=parts)


def max_diff(a, b) -> float:
    return max(float((x.cpu() - y.cpu()).abs().max()) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("net", ["cnn", "cached_cnn"])
def test_channels_last_evaluation_gives_the_same_accuracy(ds, net):
    # Prepare
    nhwc, nchw = engine(ds, net=net, channels_last=True), engine(ds, net=net, channels_last=False)
    # Execute
    for e in (nhwc, nchw):
        e.train()
        e.train()
    # Assert: training is untouched; evaluation differs by float rounding only
    assert nhwc.channels_last and not nchw.channels_last
    assert max_diff(nhwc.params, nchw.params) == 0.0
    assert max_diff(nhwc.momentum_buffers, nchw.momentum_buffers) == 0.0
    acc_a, loss_a = nhwc.evaluate()
    acc_b, loss_b = nchw.evaluate()
    # accuracy by at most one of the 200 test samples (a near-tie of two logits); the loss
    # by another conv summation order, measured <= 1.5e-7 over make test-cpu-matrix's 8
    # dispatches (0 except under oneDNN AVX2), 65 x inside 1e-5
    assert np.allclose(acc_a, acc_b, atol=1 / 200)  # one sample of 200
    assert np.allclose(loss_a, loss_b, rtol=0, atol=1e-5)  # loss: <= 1.5e-7 measured


def test_channels_last_defaults_to_conv_nets_on_the_cpu_loop(ds):
    # Execute / Assert
    assert engine(ds, net="cnn").channels_last
    assert not engine(ds, net="mlp").channels_last
    assert not engine(ds, "batched", net="cnn").channels_last


def test_eval_chunk_does_not_change_results(ds):
    # Prepare
    e = engine(ds)
    e.train()
    # Execute
    small, default = e.evaluate(chunk=7), e.evaluate()
    # Assert
    assert e.eval_chunk == 128
    assert np.array_equal(small[0], default[0])
    # Chunks of 7 vs 128 samples: other GEMM blocks and another order of the mean's float32
    # sum; with np.allclose's default rtol 1e-5 the bound is 1e-6 + 1e-5 x loss (2.3) =
    # 2.4e-5, about gamma_200 x mean loss (Higham, the 200-sample mean); measured <= 1.9e-7
    # over make test-cpu-matrix's 8 dispatches
    assert np.allclose(small[1], default[1], atol=1e-6)


def test_auto_workers_only_for_big_steps_and_at_most_one_per_agent():
    # Execute / Assert
    assert auto_workers(flops_per_step=AUTO_WORKERS_MIN_FLOP / 2, n_agents=100) == 1
    assert auto_workers(flops_per_step=1e15, n_agents=1) == 1
    assert auto_workers(flops_per_step=1e15, n_agents=100, pooled=False) == 1
    assert 1 <= auto_workers(flops_per_step=1e15, n_agents=100) <= torch.multiprocessing.cpu_count()


def test_workers_auto_resolves_to_one_for_a_small_run_and_matches(ds):
    # Prepare / Execute
    auto, one = engine(ds, workers=0), engine(ds, workers=1)
    auto.train()
    one.train()
    # Assert
    assert auto.workers == 1
    assert max_diff(auto.params, one.params) == 0.0


def test_two_worker_processes_are_bit_identical_with_channels_last(ds):
    # Prepare
    one = engine(ds, net="cached_cnn", n=3, workers=1)
    with engine(ds, net="cached_cnn", n=3, workers=2) as two:
        # Execute
        for e in (one, two):
            e.train()
        acc_one, acc_two = one.evaluate(), two.evaluate()
        # Assert
        assert two.channels_last and len(two._pool.timings) == 2  # per worker: wall, CPU, faults
        # one thread per worker: CPU seconds within wall seconds, up to the clocks' jitter
        # (process_time also counts a helper thread's moments)
        assert all(w > 0.0 and 0.0 <= c <= 1.1 * w + 0.05 and f >= 0
                   for w, c, f in two._pool.timings), two._pool.timings
        assert max_diff(one.params, two.params) == 0.0
        assert np.array_equal(acc_one[0], acc_two[0]) and np.array_equal(acc_one[1], acc_two[1])


@pytest.mark.slow  # starting a local Ray takes ~15-40 s on a busy 2-core box
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_ray_actors_give_the_same_numbers_as_local_workers(ds):
    # Prepare: a local Ray with 2 actors vs the in-process loop, same seed
    one = engine(ds, n=4, workers=1)
    with engine(ds, n=4, workers=2, worker_backend="ray") as ray_engine:
        # Execute
        for e in (one, ray_engine):
            e.train()
            e.train(mask=np.array([True, False, True, True]))
        acc_one, acc_ray = one.evaluate(), ray_engine.evaluate()
        # Assert
        assert max_diff(one.params, ray_engine.params) == 0.0
        assert max_diff(one.momentum_buffers, ray_engine.momentum_buffers) == 0.0
        assert np.array_equal(acc_one[0], acc_ray[0])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batched_backend_on_cuda_agrees_with_the_cpu_loop(ds):
    # Prepare: full fp32 on the GPU (TF32 would change the numbers by ~1e-3)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cpu = engine(ds, net="cnn", workers=1)
    gpu = engine(ds, "batched", net="cnn", device="cuda")
    # Execute
    for e in (cpu, gpu):
        e.train()
        e.train()
    # Assert
    assert gpu.params[0].is_cuda
    # cuDNN vs oneDNN orders over 6 steps: 10 x the CPU loop-vs-batched bound (1e-5,
    # tests/model/learning/test_engine.py) for the GPU's other kernels; not in make test-cpu-matrix
    # (CUDA)
    assert max_diff(cpu.params, gpu.params) < 1e-4
    assert np.allclose(cpu.evaluate()[0], gpu.evaluate()[0], atol=1 / 200)  # <= 1 sample of 200


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA fallback")
def test_device_cuda_without_cuda_stops_before_the_first_step():
    # Execute / Assert
    with pytest.raises(ConfigError, match="device"):
        MobiDFLModel(map="nyc_uws", vehicles=4, pedestrians=0, sensors=0, uavs=0, steps=1,
                     test_size=50, backend="batched", device="cuda")  # fmt: skip


def test_no_step_zero_evaluation_unless_asked():
    # Prepare
    run = dict(map="nyc_uws", vehicles=6, pedestrians=0, sensors=0, uavs=0, steps=2,
               test_size=100, local_steps=2, model="mlp", workers=1, seed=2)  # fmt: skip
    # Execute
    quiet = MobiDFLModel(eval_initial=False, **run).run().model_table()
    asked = MobiDFLModel(eval_initial=True, **run).run().model_table()
    # Assert: step 0 is NaN unless asked; evaluating does not change later steps
    assert np.isnan(quiet["acc_mean"].iloc[0]) and np.isfinite(asked["acc_mean"].iloc[0])
    assert quiet["acc_mean"].iloc[1:].tolist() == asked["acc_mean"].iloc[1:].tolist()


def test_blocked_candidate_search_and_compaction_find_the_same_contacts(monkeypatch):
    # Prepare: a crowded box so the sampled estimate exceeds a tiny budget
    rng = np.random.default_rng(5)
    start = rng.random((600, 2)) * 400
    trajectory = np.stack([start, start + 20, start + 40, start + 60])
    reference = contacts.contact_matrix(trajectory, radius_m=60.0, mode="during")
    # Execute
    monkeypatch.setattr(contacts, "PAIR_BUDGET", 500)
    monkeypatch.setattr(contacts, "DENSE_DEDUP_LIMIT", 0)  # the sparse, compacting path
    blocked = contacts.contact_matrix(trajectory, radius_m=60.0, mode="during")
    pairs = contacts.chord_pairs(trajectory[0], trajectory[1], 60.0, budget=500)
    # Assert
    assert reference.nnz > 1000
    assert (reference != blocked).nnz == 0
    one_shot = contacts.chord_pairs(trajectory[0], trajectory[1], 60.0, budget=10**9)
    assert {tuple(p) for p in pairs} == {tuple(p) for p in one_shot}


def test_threaded_sub_intervals_give_the_same_contacts(monkeypatch):
    # Prepare
    rng = np.random.default_rng(6)
    start = rng.random((500, 2)) * 1500
    trajectory = np.stack([start + k * rng.normal(0, 15, (500, 2)) for k in range(6)])
    monkeypatch.setattr(contacts, "CONTACT_THREADS", 1)
    serial = contacts.contact_matrix(trajectory, radius_m=50.0, mode="during")
    # Execute
    monkeypatch.setattr(contacts, "CONTACT_THREADS", 2)
    monkeypatch.setattr(contacts, "THREADED_FROM", 0)
    threaded = contacts.contact_matrix(trajectory, radius_m=50.0, mode="during")
    # Assert
    assert serial.nnz > 100
    assert (serial != threaded).nnz == 0
    assert threaded.has_canonical_format


_FAULTS = """
import sys, numpy as np, torch
from mobidfl.model.learning.backends import Functional, evaluate_agents
from mobidfl.model.learning.nets import build_net
from mobidfl.model.learning.workers import keep_heap, minor_faults
torch.set_num_threads(1)
kept = keep_heap() if sys.argv[1] == "keep" else False
if not kept:  # glibc's starting thresholds, pinned: its adaptive ones depend on what the
    import ctypes  # imports happened to free first (seen: 0 faults in one CI run)
    ctypes.CDLL(None).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD's default
    ctypes.CDLL(None).mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD's default
fn = Functional(build_net("cached_cnn", (1, 28, 28), 10), channels_last=True)
ps = [p.detach()[None].clone() for p in fn.template.parameters()]
x, y = torch.randn(1024, 1, 28, 28), torch.zeros(1024, dtype=torch.long)
evaluate_agents(fn, ps, x, y, np.zeros(1, np.int64), 128)
f = minor_faults()
evaluate_agents(fn, ps, x, y, np.zeros(1, np.int64), 128)  # 8 forwards of 128 images
print(int(kept), minor_faults() - f)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_heap_ends_page_faults_of_evaluation_in_a_fresh_process():
    # Prepare / Execute: fresh processes (glibc's thresholds start low, as in a worker)
    def run(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True,
                             text=True, check=True, timeout=120)  # fmt: skip
        kept, faults = out.stdout.split()
        return int(kept), int(faults)

    kept, with_keep = run("keep")
    _, without = run("default")
    # Assert: without it every forward maps its activations anew (11k-53k faults for the
    # 8 forwards); with it, fewer than one forward's share of those: at most the heap
    # growing once (0 in most runs here; 392 or 784 pages, one or two pooled activations
    # of 1.6 MB, in some runs here and in one CI run)
    assert kept == 1
    assert without > 2000 and with_keep * 8 < without, (with_keep, without)
