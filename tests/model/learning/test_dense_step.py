"""The MLP's written-out gradient (``dense_step``) is bit-identical to autograd's, for every
layer, batch size and input shape the loop backend trains with."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mobidfl.model.learning.backends import Functional, is_dense_plan
from mobidfl.model.learning.nets import build_net


def _pair(net: nn.Module) -> tuple[Functional, Functional]:
    fast = Functional(net)
    slow = Functional(net)
    slow.dense = None  # the autograd path
    return fast, slow


@pytest.mark.parametrize(("shape", "batch"), [((1, 28, 28), 16), ((1, 28, 28), 1),
                                              ((1, 8, 8), 7), ((3, 32, 32), 64)])
def test_mlp_gradient_and_loss_equal_autograd_bit_for_bit(
    shape: tuple[int, ...], batch: int
) -> None:
    torch.manual_seed(batch)
    net = build_net("mlp", shape, 10)
    fast, slow = _pair(net)
    assert fast.dense is not None
    ps = [p.detach().clone().requires_grad_() for p in net.parameters()]
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        x = torch.randn(batch, *shape, generator=gen)
        y = torch.randint(0, 10, (batch,), generator=gen)
        g_fast, loss_fast = fast.autograd_step(ps, x, y)
        g_slow, loss_slow = slow.autograd_step(ps, x, y)
        assert torch.equal(loss_fast, loss_slow)
        for a, b in zip(g_fast, g_slow, strict=True):
            assert a.shape == b.shape and torch.equal(a, b)
        with torch.no_grad():  # move on, so later steps see other weights and ReLU masks
            for p, g in zip(ps, g_fast, strict=True):
                p -= 0.5 * g


def test_a_deeper_mlp_is_dense_too() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 12),
                        nn.ReLU(), nn.Linear(12, 5))
    fast, slow = _pair(net)
    ps = [p.detach().clone().requires_grad_() for p in net.parameters()]
    x, y = torch.randn(9, 20), torch.randint(0, 5, (9,))
    (g1, l1), (g2, l2) = fast.autograd_step(ps, x, y), slow.autograd_step(ps, x, y)
    assert torch.equal(l1, l2) and all(torch.equal(a, b) for a, b in zip(g1, g2, strict=True))


def test_only_fp32_dense_nets_take_the_written_out_gradient() -> None:
    assert Functional(build_net("cnn", (1, 28, 28), 10)).dense is None
    assert Functional(build_net("mlp", (1, 28, 28), 10), precision="bf16").dense is None
    no_bias = nn.Sequential(nn.Flatten(), nn.Linear(4, 3, bias=False))
    assert Functional(no_bias).dense is None
    assert not is_dense_plan(None) and not is_dense_plan([])
