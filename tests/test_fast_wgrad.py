"""``precision = "fp32_fast"``: the first convolution's weight gradient as one convolution
over the batch. Same forward values and loss as fp32, gradients equal to ~1e-6 relative (not
bit for bit), the MLP unchanged, and a few steps of training land where fp32 lands."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from model.learning.backends import Functional, conv2d_fast_wgrad
from model.learning.engine import make_engine
from model.learning.nets import build_net
from model.learning.partition import partition_shards


@pytest.mark.parametrize("net", ["cached_cnn", "lenet5", "cnn"])
def test_gradients_equal_fp32_to_float_rounding_and_the_loss_exactly(net):
    # Prepare: each seed paper's conv net on a batch of 32 (a third of it blank, like
    # Fashion-MNIST's background, so many windows tie)
    torch.manual_seed(0)
    template = build_net(net, (1, 28, 28), 10)
    x, y = torch.rand(32, 1, 28, 28), torch.randint(0, 10, (32,))
    x[:, :, :9] = 0.0
    exact, fast = Functional(template), Functional(template, precision="fp32_fast")
    leaves = [p.detach().clone().requires_grad_() for p in template.parameters()]
    # Execute
    g32, loss32 = exact.autograd_step(leaves, x, y)
    gfast, loss_fast = fast.autograd_step(leaves, x, y)
    # Assert: the forward is oneDNN's in both; only the first conv's dW and db differ
    assert torch.equal(loss32, loss_fast)
    rel = [float((a - b).abs().max() / a.abs().max()) for a, b in zip(g32, gfast, strict=True)]
    assert max(rel) < 2e-5
    assert max(rel[:2]) > 0.0 or net == "cnn"  # another summation order (cnn: may tie)
    assert all(r == 0.0 for r in rel[2:])  # every later layer bit-identical


@pytest.mark.parametrize("padding", [0, 2, (1, 3)])
@pytest.mark.parametrize("channels", [1, 3])
def test_weight_and_bias_gradients_match_torch_for_paddings_and_channels(padding, channels):
    # Prepare
    torch.manual_seed(1)
    conv = nn.Conv2d(channels, 6, 5, padding=padding)
    x = torch.randn(8, channels, 20, 17)
    w, b = (conv.weight.detach().clone().requires_grad_(),
            conv.bias.detach().clone().requires_grad_())  # fmt: skip
    g = torch.randn_like(F.conv2d(x, w, b, padding=padding))
    # Execute
    ref = torch.autograd.grad(F.conv2d(x, w, b, padding=padding), (w, b), g)
    out = conv2d_fast_wgrad(x, w, b, conv)
    got = torch.autograd.grad(out, (w, b), g)
    # Assert: sums of ~1,500 products, so float rounding relative to the largest entry
    for r, o in zip(ref, got, strict=True):
        assert o.shape == r.shape
        assert float((o - r).abs().max()) <= 1e-5 * float(r.abs().max())


def test_layers_it_does_not_cover_fall_back_to_torch():
    # Prepare
    strided, grouped = nn.Conv2d(4, 4, 3, stride=2), nn.Conv2d(4, 4, 3, groups=2)
    x = torch.randn(2, 4, 9, 9)
    needs_grad = x.clone().requires_grad_()
    # Execute / Assert: None = "use F.conv2d"
    assert conv2d_fast_wgrad(x, strided.weight, strided.bias, strided) is None
    assert conv2d_fast_wgrad(x, grouped.weight, grouped.bias, grouped) is None
    plain = nn.Conv2d(4, 4, 3)
    assert conv2d_fast_wgrad(needs_grad, plain.weight, plain.bias, plain) is None


def test_mlp_steps_are_bit_identical_under_fp32_fast():
    # Prepare
    torch.manual_seed(0)
    template = build_net("mlp", (1, 28, 28), 10)
    x, y = torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))
    leaves = [p.detach().clone().requires_grad_() for p in template.parameters()]
    # Execute
    a = Functional(template).autograd_step(leaves, x, y)
    b = Functional(template, precision="fp32_fast").autograd_step(leaves, x, y)
    # Assert
    assert torch.equal(a[1], b[1])
    assert all(torch.equal(p, q) for p, q in zip(a[0], b[0], strict=True))


@pytest.mark.parametrize("seed", [0, 1])
def test_training_lands_where_fp32_lands(ds, seed):
    # Prepare: two seeds, 3 agents, 6 local steps of Cached-DFL's CNN on MNIST
    parts = partition_shards(ds.train_labels, 3, rng=np.random.default_rng(seed))

    def engine(precision: str):
        return make_engine("loop", net="cached_cnn", dataset=ds, parts=parts, lr=0.05,
                           batch_size=16, local_steps=6, seed=seed,
                           precision=precision)  # fmt: skip

    exact, fast = engine("fp32"), engine("fp32_fast")
    # Execute
    for e in (exact, fast):
        e.train()
    (acc32, loss32), (acc_f, loss_f) = exact.evaluate(), fast.evaluate()
    # Assert: float-rounding apart after 6 steps, not bit-identical
    diff = max(float((a - b).abs().max()) for a, b in zip(exact.params, fast.params, strict=True))
    assert 0.0 < diff < 1e-4
    assert np.allclose(loss32, loss_f, rtol=1e-4) and np.abs(acc32 - acc_f).max() <= 0.01
