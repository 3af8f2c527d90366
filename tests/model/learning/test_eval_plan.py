"""The NHWC evaluation plan gives the template's logits (issue 22: faster evaluation, same
numbers), and leaves templates it does not know to ``functional_call``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mobidfl.model.learning.backends import (
    Functional,
    max_pool2_nchw,
    max_pool2_nchw_to_nhwc,
    max_pool2_nhwc,
    nhwc_plan,
)
from mobidfl.model.learning.nets import build_net


@pytest.mark.parametrize(("net", "shape"), [("cached_cnn", (1, 28, 28)), ("cnn", (1, 28, 28)),
                                            ("lenet5", (3, 32, 32))])  # fmt: skip
def test_plan_logits_equal_the_templates(net, shape):
    # Prepare
    torch.manual_seed(0)
    template = build_net(net, shape, 10)
    fn = Functional(template, channels_last=True)
    params = [p.detach() + 0.01 * torch.randn_like(p) for p in template.parameters()]
    x = torch.randn(37, *shape)
    # Execute
    with torch.no_grad():
        fast = fn.eval_logits([fn.layout(p) for p in params], fn.prep(x))
        ref = fn.logits(params, x)
    # Assert
    assert fn.plan is not None and fast.shape == (37, 10)
    # NHWC plan vs NCHW autograd forward, two summation orders per conv / linear. Spread
    # measured over make test-cpu-matrix's 8 dispatches: <= 4.0e-7 for logits <= 0.61
    # (bit-equal where oneDNN runs AVX-512, nonzero under AVX2), so 1e-5 + 1e-5 |ref| is
    # 25 x that
    assert torch.allclose(fast, ref, atol=1e-5, rtol=1e-5)


def test_max_pool_of_nhwc_equals_torch_including_odd_sizes():
    # Prepare
    h = torch.randn(3, 9, 7, 5)
    # Execute
    mine = max_pool2_nhwc(h)
    ref = F.max_pool2d(h.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    # Assert
    assert mine.shape == (3, 4, 3, 5) and torch.equal(mine, ref)


@pytest.mark.parametrize("shape", [(3, 16, 28, 28), (2, 5, 9, 7)])
def test_pool_of_nchw_into_nhwc_equals_torch_including_odd_sizes(shape):
    # Prepare
    h = torch.randn(*shape)
    h[0, :2] = 0.0
    # Execute
    mine = max_pool2_nchw_to_nhwc(h)
    ref = F.max_pool2d(h, 2).permute(0, 2, 3, 1)
    # Assert
    assert mine.is_contiguous() and torch.equal(mine, ref)


def test_unknown_layers_fall_back_to_functional_call():
    # Prepare
    odd = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 26 * 26, 10))
    names = [n for n, _ in odd.named_parameters()]
    # Execute / Assert
    assert nhwc_plan(odd, names) is None
    assert Functional(odd, channels_last=True).plan is None


@pytest.mark.parametrize(("net", "shape"), [("cached_cnn", (1, 28, 28)), ("lenet5", (3, 32, 32))])
def test_training_through_the_plan_gives_bit_identical_gradients(net, shape):
    # Prepare: ReLU-then-pool of the template vs the plan's pool-then-ReLU
    torch.manual_seed(1)
    template = build_net(net, shape, 10)
    fn = Functional(template)
    leaves = [p.detach().clone().requires_grad_() for p in template.parameters()]
    x, y = torch.randn(64, *shape), torch.randint(0, 10, (64,))
    x[:8] = 0.0  # flat inputs: tied pooling windows
    # Execute
    grads, loss = fn.autograd_step(leaves, x, y)
    ref = torch.autograd.grad(fn.ce(leaves, x, y), leaves)
    # Assert
    assert fn.plan is not None and fn.plan[1][0] in ("pool_relu", "relu")
    assert all(torch.equal(a, b) for a, b in zip(grads, ref, strict=True))


@pytest.mark.parametrize("shape", [(5, 3, 28, 28), (4, 2, 9, 7)])
def test_training_max_pool_equals_torchs_values_and_gradients_with_ties(shape):
    # Prepare: ties (flat and rounded inputs), odd sizes (floor mode)
    torch.manual_seed(2)
    h = torch.randn(*shape)
    h[0] = 0.0
    h[1] = h[1].round()
    mine = h.clone().requires_grad_()
    ref = h.clone().requires_grad_()
    g = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2)
    # Execute
    out = max_pool2_nchw(mine)
    out.backward(g)
    want = F.max_pool2d(ref, 2)
    want.backward(g)
    # Assert: same values, gradient routed to the same (first maximal) element
    assert out.is_contiguous() and torch.equal(out, want)
    assert torch.equal(mine.grad, ref.grad) and int((mine.grad != 0).sum()) > 0
