"""Network templates.

Agents never own a module: the engine keeps per-layer parameter stacks and calls the one template
functionally (``torch.func.functional_call``).

No BatchNorm (its running buffers would have to be stacked and vmapped too) and no dropout
(needs per-agent randomness under vmap): every net is a pure function of its parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import TYPE_CHECKING

from mobidfl.errors import ConfigError
from mobidfl.plugins import NETS

if TYPE_CHECKING:  # imported by each builder: registering the names (config checks) skips torch
    import torch
    from torch import nn

__all__ = ["NETS", "build_net", "flops_per_sample", "num_params"]


def _flat_size(body: nn.Module, input_shape: tuple[int, ...]) -> int:
    import torch

    with torch.no_grad():
        return int(body(torch.zeros(1, *input_shape)).numel())


def mlp(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """784-128-10 MLP with ReLU (PSFL: "a simple MLP with 128 neurons in the hidden layer").

    Flattens any input shape.
    """
    from torch import nn

    return nn.Sequential(
        nn.Flatten(), nn.Linear(prod(input_shape), 128), nn.ReLU(), nn.Linear(128, num_classes)
    )


def cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Two 5x5 conv layers + two fully connected layers (Reza et al.'s MNIST model shape).

    Reza et al. give only "two convolution layers followed by two fully connected layers".
    Sizes are those of the classic PyTorch MNIST example: conv 10@5x5, pool 2, conv 20@5x5,
    pool 2, FC 50, FC classes (21,840 parameters, ~1 MFLOP forward per 28x28 sample), chosen
    so that hundreds of agents train on two CPU cores. The FedAvg paper's 32/64-channel,
    512-unit variant costs ~25 MFLOP and 1.66M parameters per agent.

    Pooling is 2x2 *average* pooling. With max pooling, MNIST's flat background makes
    mathematically tied pooling windows whose float values differ by an ulp depending on
    the conv kernel, so the plain (loop) and grouped (vmap) convolutions route some
    gradients to different elements and the two backends drift apart (~1e-5 after a few
    steps, data-dependent). Average pooling has no such switch, so they agree to ~1e-7.
    """
    from torch import nn

    c = input_shape[0]
    body = nn.Sequential(
        nn.Conv2d(c, 10, 5),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Conv2d(10, 20, 5),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Flatten(),
    )
    flat = _flat_size(body, input_shape)
    return nn.Sequential(*body, nn.Linear(flat, 50), nn.ReLU(), nn.Linear(50, num_classes))


def cached_cnn(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Cached-DFL's released Fashion-MNIST CNN without its BatchNorm layers.

    conv 16@5x5 pad 2, max-pool 2, conv 32@5x5 pad 2, max-pool 2, FC classes (28,938
    parameters at 28x28; ~5.7 MFLOP forward per sample, ~6x the ``cnn``): for faithful
    Cached-DFL reproductions. It keeps Cached-DFL's max pooling, so its loop and batched
    backends agree only up to rare near-tie switches (see :func:`cnn`).
    """
    from torch import nn

    c = input_shape[0]
    body = nn.Sequential(
        nn.Conv2d(c, 16, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
    )
    flat = _flat_size(body, input_shape)
    return nn.Sequential(*body, nn.Linear(flat, num_classes))


def lenet5(input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LeNet-5 (MoFeL; de Heredia's CIFAR-10 model).

    Conv 6@5x5, pool, conv 16@5x5, pool, FC 120, FC 84, FC classes, with ReLU and LeCun's average
    pooling ("subsampling"; see :func:`cnn` for why not max pooling).

    28x28 inputs get padding 2 on the first conv so both 28x28 and 3x32x32 reach 16x5x5.
    """
    from torch import nn

    c, h = input_shape[0], input_shape[1]
    pad = 2 if h < 32 else 0
    # The conv/pool stack of the CNN above, LeNet-5's widths: each net reads as its paper draws it.
    body = nn.Sequential(
        nn.Conv2d(c, 6, 5, padding=pad),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Flatten(),
    )
    flat = _flat_size(body, input_shape)
    return nn.Sequential(
        *body,
        nn.Linear(flat, 120),
        nn.ReLU(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, num_classes),
    )


_BUILDERS: dict[str, Callable[[tuple[int, ...], int], nn.Module]] = {
    "mlp": mlp,
    "cnn": cnn,
    "cached_cnn": cached_cnn,
    "lenet5": lenet5,
}
for _name, _builder in _BUILDERS.items():
    NETS.register(_name)(_builder)  # the registry by name (setting ``model``): mobidfl.plugins


def build_net(name: str, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Build the template module (its own parameters are only used for initialisation)."""
    if name not in NETS:
        raise ConfigError("model", name, "one of " + ", ".join(NETS))
    shape = tuple(int(d) for d in input_shape)
    if name != "mlp" and (len(shape) != 3 or min(shape[1:]) < 8):
        raise ConfigError("model", name, f"an image input of at least 8x8 (got {shape})")
    try:
        return NETS[name](shape, int(num_classes))
    except RuntimeError as exc:  # e.g. an image too small for two pooling stages
        raise ConfigError("model", name, f"a net that fits input {shape} ({exc})") from None


def num_params(net: nn.Module) -> int:
    """Number of parameters of ``net``."""
    return sum(p.numel() for p in net.parameters())


def flops_per_sample(
    net: nn.Module, input_shape: tuple[int, ...], *, backward: bool = True
) -> float:
    """FLOPs of one sample through ``net`` (2 per multiply-add of Conv2d / Linear layers).

    ``backward=True`` returns forward + backward, estimated as 3x the forward (the backward
    computes gradients w.r.t. both inputs and weights); element-wise ops are ignored.
    """
    import torch
    from torch import nn

    macs = 0

    def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        nonlocal macs
        if isinstance(module, nn.Linear):
            macs += module.in_features * module.out_features
        elif isinstance(module, nn.Conv2d):
            k = prod(module.kernel_size) * module.in_channels // module.groups
            macs += output[0].numel() * k

    handles = [
        m.register_forward_hook(hook) for m in net.modules() if isinstance(m, nn.Linear | nn.Conv2d)
    ]
    try:
        with torch.no_grad():  # the probe goes where the net is (a net moved to CUDA too)
            device = next((p.device for p in net.parameters()), torch.device("cpu"))
            net(torch.zeros(1, *input_shape, device=device))
    finally:
        for h in handles:
            h.remove()
    return 2.0 * macs * (3.0 if backward else 1.0)
