"""``precision = "fp32_fast"``: the first convolution's weight gradient as one convolution
over the batch. Same forward values and loss as fp32, gradients equal to float rounding (not
bit for bit), the MLP unchanged, and a few steps of training land where fp32 lands.

Every bound here comes from the arithmetic, not from one CPU: oneDNN and MKL pick another
summation order per instruction set (AVX2, AVX-512, AMX; Intel or AMD), so the two weight
gradients are two orders of the same N-term sum. Whatever the order, a float32 sum of N
products is within ``gamma_N * sum |x_i g_i|`` of the exact one (Higham, *Accuracy and
Stability of Numerical Algorithms*, eq. 3.5, with ``gamma_N = N u / (1 - N u)``, ``u = 2**-24``),
so the two are within twice that of each other, element by element. ``make test-cpu-matrix``
runs these tests under each dispatch this machine can emulate.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.grad import conv2d_weight

from mobidfl.model.learning.backends import Functional, conv2d_fast_wgrad
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.nets import build_net
from mobidfl.model.learning.partition import partition_shards

U = 2.0**-24
"""float32's unit roundoff."""


def two_orders_apart(n_terms: int) -> float:
    """How far apart two float32 summation orders of ``n_terms`` products can be, relative
    to the sum of the products' magnitudes: ``2 gamma_N`` (Higham eq. 3.5, for each order)."""
    gamma = n_terms * U / (1 - n_terms * U)
    return 2 * gamma


def wgrad_bounds(x: torch.Tensor, g: torch.Tensor, conv: nn.Conv2d):
    """Element-wise bounds on two summation orders of ``conv``'s weight and bias gradients
    for input ``x`` and upstream gradient ``g``: each element sums batch x H_out x W_out
    products, bounded by the same convolution of ``|x|`` and ``|g|``."""
    n_terms = g.shape[0] * g.shape[2] * g.shape[3]
    magnitude_w = conv2d_weight(x.abs(), conv.weight.shape, g.abs(), padding=conv.padding)
    magnitude_b = g.abs().sum(dim=(0, 2, 3))
    return two_orders_apart(n_terms) * magnitude_w, two_orders_apart(n_terms) * magnitude_b


def _first_conv_input_and_grad(template: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """The first convolution's input and the loss's gradient at its output (plain autograd
    on the template: the same forward as both precisions)."""
    conv = next(m for m in template.modules() if isinstance(m, nn.Conv2d))
    seen = {}

    def keep(module, inputs, output):
        output.retain_grad()
        seen["x"], seen["out"] = inputs[0].detach(), output

    handle = conv.register_forward_hook(keep)
    try:
        F.cross_entropy(template(x), y).backward()
    finally:
        handle.remove()
    template.zero_grad()
    return conv, seen["x"], seen["out"].grad.detach()


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
    conv, x_in, g_out = _first_conv_input_and_grad(template, x, y)
    bound_w, bound_b = wgrad_bounds(x_in, g_out, conv)
    # Assert: the forward is oneDNN's in both; only the first conv's dW and db differ, each
    # element by no more than two summation orders can (module docstring)
    assert torch.equal(loss32, loss_fast)
    assert bool(((g32[0] - gfast[0]).abs() <= bound_w).all())
    assert bool(((g32[1] - gfast[1]).abs() <= bound_b).all())
    rel = [float((a - b).abs().max() / a.abs().max()) for a, b in zip(g32, gfast, strict=True)]
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
    # Assert: each element within two summation orders of torch's (module docstring)
    for r, o, bound in zip(ref, got, wgrad_bounds(x, g, conv), strict=True):
        assert o.shape == r.shape
        assert bool(((o - r).abs() <= bound).all())


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
        training = TrainingSettings(net="cached_cnn", lr=0.05, batch_size=16, local_steps=6,
                                    seed=seed, precision=precision)
        return make_engine("loop", training, dataset=ds, parts=parts)

    exact, fast = engine("fp32"), engine("fp32_fast")
    start = [p.clone() for p in exact.params]
    # Execute
    for e in (exact, fast):
        e.train()
    (acc32, loss32), (acc_f, loss_f) = exact.evaluate(), fast.evaluate()
    # Assert: apart (another summation order), but by far less than the training moved the
    # weights. Rounding alone keeps them ~1e-6 of the movement apart; a max-pool or ReLU
    # tie that the two orders break differently in one step routes one sample's gradient
    # elsewhere, at most 1 of the batch's 16 samples of one step's update: a bound of 1/16
    # of the movement. Measured diff / movement (seeds 0-3): 5.6e-7 to 1.2e-6 on Intel
    # AVX-512, AMX and AVX512_CORE; 3.6e-3 on seed 0 under ONEDNN_MAX_CPU_ISA=AVX2 (a tie
    # broken differently); about 5.7e-3 on an AMD Zen 5 (2.19e-4 apart)
    moved = max(float((a - b).abs().max()) for a, b in zip(exact.params, start, strict=True))
    diff = max(float((a - b).abs().max()) for a, b in zip(exact.params, fast.params, strict=True))
    assert 0.0 < diff <= moved / 16
    # the same evaluation to within two of the 200 test images per agent; test loss apart
    # by at most 1e-3 relative (measured: at most 1.4e-7 without a tie, 4.5e-5 with the AVX2
    # tie above: 20x margin over the worst seen)
    assert np.abs(acc32 - acc_f).max() <= 2 / 200
    assert np.allclose(loss32, loss_f, rtol=1e-3, atol=0.0)
