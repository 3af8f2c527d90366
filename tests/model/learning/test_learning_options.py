"""Learning options the seed papers use (issue 12): per-agent and full batches, Adam,
ReduceLROnPlateau and early stop (model/maths/schedule.py), ceil(pN) HM clients."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mobidfl.agents.mobility.random_walk import high_mobility_count
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config
from mobidfl.model.learning.engine import (
    TrainingSettings,
    adam_update,
    agent_batch_sizes,
    make_engine,
)
from mobidfl.model.maths.schedule import (
    EarlyStopState,
    PlateauState,
    early_stop_step,
    plateau_step,
)


def uneven_parts() -> list[np.ndarray]:
    """Four agents of 5, 12, 40 and 90 samples (smaller than B = 16 for two of them)."""
    edges = np.cumsum([0, 5, 12, 40, 90])
    return [np.arange(edges[i], edges[i + 1]) for i in range(4)]


def make(ds, backend: str, **kw):
    opts = dict(net="mlp", lr=0.05, batch_size=16, local_steps=3, seed=3)
    opts.update(kw)
    return make_engine(backend, TrainingSettings(**opts), dataset=ds, parts=uneven_parts())


def max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a.params, b.params, strict=True))


def test_agent_batch_sizes_is_min_of_b_and_data_and_zero_is_full():
    # Prepare / Execute / Assert
    assert agent_batch_sizes(np.array([5, 12, 40]), 16).tolist() == [5, 12, 16]
    assert agent_batch_sizes(np.array([5, 12, 40]), 0).tolist() == [5, 12, 40]


@pytest.mark.parametrize(
    "kw",
    [
        dict(batch_size=16),  # per-agent min(B, |D_i|): padded in the batched backend
        dict(batch_size=0, local_steps=2),  # full batch (Reza et al.)
        dict(optimizer="adam", lr=1e-3, weight_decay=1e-4),  # PSFL (hyperparameters)
        dict(batch_size=0, momentum=0.9, weight_decay=5e-4, lr=0.3, local_steps=1),
    ],
)
def test_loop_and_batched_agree_on_uneven_batches(ds, kw):
    # Prepare
    loop, batched = make(ds, "loop", **kw), make(ds, "batched", **kw)
    # Execute: a full round, then a masked one (Adam step counts then differ per agent)
    for e in (loop, batched):
        e.train()
        e.train(mask=np.array([True, False, True, True]))
    # Assert: two float32 summation orders of the same steps (Higham's worst case is far
    # looser); spread measured over make test-cpu-matrix's 8 dispatches: <= 9.3e-7 with Adam
    # (its m / sqrt(v) amplifies small gradients), <= 2.4e-7 otherwise: 1e-5 is 11 x that.
    # And training moved the models by >= 6.0e-3 (measured), 60 x the 1e-4 floor
    assert max_diff(loop, batched) < 1e-5
    assert max_diff(loop, make(ds, "loop", **kw)) > 1e-4  # moved: >= 6.0e-3 measured


def test_full_batch_step_is_gradient_descent_on_all_the_agents_data(ds):
    # Prepare: one agent, one full-batch step of plain GD
    part = np.arange(30)
    e = make_engine(
        "loop",
        TrainingSettings(net="mlp", lr=0.5, batch_size=0, local_steps=1, seed=0),
        dataset=ds,
        parts=[part],
    )
    start = [p[0].clone().requires_grad_() for p in e.params]
    loss = F.cross_entropy(e.logits(start, ds.x_train[part]), ds.y_train[part])
    grads = torch.autograd.grad(loss, start)
    # Execute
    e.train()
    # Assert: x1 = x0 - lr * grad of the mean CE over all 30 samples. The same float32 ops in
    # the same order: bit-equal on all of make test-cpu-matrix's 8 dispatches; 1e-6 (|x| <= 0.2)
    # leaves room for another order of the 30-sample mean, 0.5 x 2 gamma_30 |g| sums
    for p, s, g in zip(e.params, start, grads, strict=True):  # (bound: comment above)
        assert torch.allclose(p[0], s.detach() - 0.5 * g, rtol=0, atol=1e-6)


def test_adam_update_matches_torch_optim_adam():
    # Prepare
    torch.manual_seed(0)
    x = torch.randn(5, 3)
    ref = x.clone().requires_grad_()
    opt = torch.optim.Adam([ref], lr=0.01)
    mine, m, v = x.clone(), torch.zeros_like(x), torch.zeros_like(x)
    # Execute: three steps on the same gradients
    for t in range(1, 4):
        g = torch.sin(t * x)
        ref.grad = g.clone()
        opt.step()
        adam_update([mine], [g.clone()], [m], [v], t=float(t), lr=0.01)
    # Assert: the same element-wise float32 formula as torch.optim.Adam, bit-equal on all of
    # make test-cpu-matrix's 8 dispatches; atol 1e-7 plus allclose's rtol 1e-5 |x|
    # (|x| <= 2.5) leaves torch room to reorder it (~80 ulp of x)
    assert torch.allclose(mine, ref.detach(), atol=1e-7)


def test_adam_with_per_agent_step_counts_equals_one_agent_at_a_time():
    # Prepare: two agents stacked, at step counts 1 and 4
    torch.manual_seed(1)
    x, g = torch.randn(2, 4), torch.randn(2, 4)
    m, v = torch.rand(2, 4), torch.rand(2, 4)
    singles = [(x[i].clone(), m[i].clone(), v[i].clone()) for i in range(2)]
    stacked = (x.clone(), m.clone(), v.clone())
    # Execute
    adam_update([stacked[0]], [g], [stacked[1]], [stacked[2]], t=torch.tensor([1, 4]), lr=0.1)
    for i, (xi, mi, vi) in enumerate(singles):
        adam_update([xi], [g[i]], [mi], [vi], t=float([1, 4][i]), lr=0.1)
    # Assert: element-wise ops, but 1 - beta**t from a float32 tensor t vs a Python float
    # differs by ~u, which the update lr m^ / (sqrt(v^) + eps) carries (|update| up to ~1 with
    # these random m, v): measured 3.0e-7 on all of make test-cpu-matrix's 8 dispatches; 1e-6
    # (+ allclose's rtol 1e-5 |x|) is ~17 u of a unit update
    for i, (xi, _, _) in enumerate(singles):  # (bound: comment above)
        assert torch.allclose(stacked[0][i], xi, atol=1e-6)


def test_plateau_step_follows_torch_reduce_lr_on_plateau():
    # Prepare: the same metric sequence through torch's scheduler and ours
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85]
    param = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([param], lr=0.1)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2)
    state = PlateauState(lr=0.1)
    # Execute / Assert: identical lr after every step
    for metric in metrics:
        sched.step(metric)
        state = plateau_step(state, metric, factor=0.5, patience=2)
        assert math.isclose(state.lr, opt.param_groups[0]["lr"])
    assert state.lr < 0.1  # the sequence did trigger reductions
    assert plateau_step(state, float("nan"), factor=0.5, patience=2) == state


def test_early_stop_after_patience_steps_without_increase():
    # Prepare
    state = EarlyStopState()
    accs = [0.5, 0.6, 0.6, 0.59, 0.6]
    # Execute
    stops = []
    for step, acc in enumerate(accs, start=1):
        state, stop = early_stop_step(state, acc, step=step, patience=3)
        stops.append(stop)
    # Assert: best at step 2, no increase at 3, 4, 5 -> stop at step 5
    assert stops == [False, False, False, False, True]


@pytest.mark.parametrize(("n", "p", "expected"), [(48, 0.05, 3), (48, 0.2, 10), (45, 0.2, 9),
                                                  (48, 0.0, 0), (48, 1.0, 48)])
def test_high_mobility_count_is_ceil_pn(n, p, expected):
    assert high_mobility_count(n, p) == expected


@pytest.mark.parametrize("backend", ["loop", "batched"])
def test_reset_optimizer_state_with_one_step_rounds_is_plain_gradient_descent(ds, backend):
    # Prepare: Reza et al.'s set-up (full batch, one local step per round, momentum 0.9,
    # weight decay); a round = train, then models replaced as eq. 2 would (here: shuffled)
    opts = dict(batch_size=0, local_steps=1, lr=0.3, weight_decay=5e-4)
    reset = make(ds, backend, momentum=0.9, optimizer_state="reset", **opts)
    plain = make(ds, backend, momentum=0.0, **opts)
    keep = make(ds, backend, momentum=0.9, **opts)
    perm = np.array([1, 2, 3, 0])
    # Execute: three rounds each
    for engine in (reset, plain, keep):
        for _ in range(3):
            engine.train()
            engine.mix(torch.eye(4)[perm])
    # Assert: reset = no momentum at all (the paper's Sec. III update); keep is not
    assert max_diff(reset, plain) < 1e-6
    assert max_diff(keep, plain) > 1e-3


def test_reset_optimizer_state_zeroes_adam_moments_and_step_counts(ds):
    # Prepare
    engine = make(ds, "loop", optimizer="adam", lr=1e-3, optimizer_state="reset")
    engine.train()
    # Execute
    engine.reset_optimizer_state(np.array([0, 2]))
    # Assert: agents 0 and 2 start afresh, 1 and 3 keep theirs
    assert engine.adam_steps.tolist() == [0, 3, 0, 3]
    for buf in engine.adam_buffers:
        assert float(buf[[0, 2]].abs().max()) == 0.0
        assert float(buf[[1, 3]].abs().max()) > 0.0


def test_optimizer_state_is_checked_with_one_line():
    with pytest.raises(ConfigError, match="optimizer_state"):
        Config().with_overrides(["optimizer_state=forget"])
