"""Datasets (model/learning/data.py): offline mnist5k, idx reading, clear missing-data errors."""

from __future__ import annotations

import builtins
import gzip
import hashlib
import struct
import sys

import numpy as np
import pytest
import torch

from mobidfl.errors import ConfigError, DatasetUnavailable
from mobidfl.model.learning import data as data_mod
from mobidfl.model.learning.data import load_dataset, read_idx


def write_idx(path, array: np.ndarray) -> None:
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_mnist5k_split_shapes_and_normalisation():
    # Execute
    ds = load_dataset("mnist5k", root=None, test_size=1000, seed=0)
    # Assert: 4,000 / 1,000 stratified, standardised float32 images, int64 labels
    assert ds.x_train.shape == (4000, 1, 28, 28) and ds.x_train.dtype == torch.float32
    assert ds.x_test.shape == (1000, 1, 28, 28) and ds.y_test.dtype == torch.int64
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert torch.bincount(ds.y_train).tolist() == [400] * 10
    assert torch.bincount(ds.y_test).tolist() == [100] * 10
    assert abs(float(ds.x_train.mean())) < 0.05 and abs(float(ds.x_train.std()) - 1) < 0.05


def test_mnist5k_seeded_split_and_test_cap():
    # Execute
    a = load_dataset("mnist5k", root=None, test_size=300, seed=1)
    b = load_dataset("mnist5k", root=None, test_size=300, seed=1)
    c = load_dataset("mnist5k", root=None, test_size=300, seed=2)
    full = load_dataset("mnist5k", root=None, test_size=1000, seed=1)
    # Assert: same seed same data, other seed other split; cap is a subset of the test split
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train)
    assert a.x_test.shape[0] == 300
    flat_full = full.x_test.reshape(1000, -1)
    for img in a.x_test[:20].reshape(20, -1):
        assert (flat_full == img).all(1).any()


def test_digits_smoke_dataset():
    ds = load_dataset("digits", root=None, test_size=100, seed=0)
    assert ds.input_shape == (1, 8, 8) and ds.x_test.shape[0] == 100
    assert 1400 < ds.x_train.shape[0] < 1500  # 80 % of 1,797, stratified
    assert torch.unique(ds.y_train).tolist() == list(range(10))


def test_digits_are_scikit_learns_images_read_without_importing_it(monkeypatch):
    # Prepare: importing scikit-learn fails (seconds of imports for a 1,797-row table); the
    # table is read again
    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.partition(".")[0] == "sklearn":
            raise ImportError(f"import of {name} (the digits loader must not import it)")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    data_mod._read_digits.cache_clear()
    # Execute
    x, y = data_mod._read_digits(str(data_mod._sklearn_digits_csv()))
    # Assert: the images of sklearn.datasets.load_digits(), (images * 255 / 16).round() as
    # uint8 (sha256 taken from scikit-learn 1.x), and its labels
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.uint8 and y.dtype == np.int64
    assert hashlib.sha256(x.tobytes()).hexdigest() == (
        "b41ca9fd335466eee997366c2e6f6bbe0a1b4582afe091fc4eba35f4a254182f")
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert load_dataset("digits", root=None, test_size=10, seed=0).x_train.shape[1:] == (1, 8, 8)


_ROW = b"0," * 63 + b"16,3\n"  # one good row: 64 pixels (0-16) and its digit


@pytest.mark.parametrize(("damage", "says"), [
    (lambda raw: gzip.compress(_ROW * 4 + _ROW.replace(b"16,", b"17,")), "64 pixels"),
    (lambda raw: gzip.compress(_ROW * 4 + _ROW.replace(b"16,", b"nan,")), "64 pixels"),
    (lambda raw: gzip.compress(_ROW * 4 + _ROW.replace(b"16,", b"1.5,")), "64 pixels"),
    (lambda raw: gzip.compress(_ROW * 4 + _ROW.replace(b"16,", b"x,")), "no number"),
    (lambda raw: gzip.compress(_ROW * 4 + _ROW[4:]), "64 pixels"),  # a row cut short
    (lambda raw: raw[: len(raw) // 2], "cannot be read"),  # the file cut in half
    (lambda raw: raw[:10] + bytes(range(256)) + raw[266:], "cannot be read"),  # corrupt bytes
])
def test_a_damaged_digits_table_is_refused_in_one_line(tmp_path, monkeypatch, damage, says):
    # Prepare: a damaged copy of the real table where the loader looks for it
    path = tmp_path / "digits.csv.gz"
    path.write_bytes(damage(data_mod._sklearn_digits_csv().read_bytes()))
    monkeypatch.setattr(data_mod, "_sklearn_digits_csv", lambda: path)
    data_mod._read_digits.cache_clear()
    try:
        # Execute / Assert: refused whole, one line naming the file and what is wrong
        with pytest.raises(data_mod.DatasetDamaged, match=says) as refused:
            load_dataset("digits", root=None, test_size=10, seed=0)
        assert str(path) in str(refused.value) and "\n" not in str(refused.value)
    finally:
        data_mod._read_digits.cache_clear()


def test_a_missing_cifar10_is_told_without_torchvision(tmp_path, monkeypatch):
    # torchvision (seconds of imports) only once the CIFAR-10 folder is there: an
    # ``auto:cifar10|mnist5k`` preset on a machine without it must not pay for it
    # every torchvision module blocked, not only the package: an earlier test in the same
    # process may have imported torchvision.datasets, which an import finds by its own name
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torchvision", None)
    with pytest.raises(DatasetUnavailable, match="cifar-10-batches-py"):
        load_dataset("cifar10", root=tmp_path, test_size=10, seed=0)
    (tmp_path / "cifar-10-batches-py").mkdir()
    with pytest.raises(ImportError):  # the folder is there: now torchvision reads it
        load_dataset("cifar10", root=tmp_path, test_size=10, seed=0)


def test_fashion_mnist_from_torchvision_layout(tmp_path, monkeypatch):
    # Prepare: a tiny idx set in ROOT/FashionMNIST/raw/
    monkeypatch.setattr(data_mod, "FASHION_SYSTEM_DIR", tmp_path / "none")
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    xtr, xte = rng.integers(0, 256, (30, 28, 28)), rng.integers(0, 256, (12, 28, 28))
    write_idx(raw / "train-images-idx3-ubyte.gz", xtr)
    write_idx(raw / "train-labels-idx1-ubyte.gz", np.arange(30) % 10)
    write_idx(raw / "t10k-images-idx3-ubyte.gz", xte)
    write_idx(raw / "t10k-labels-idx1-ubyte.gz", np.arange(12) % 10)
    # Execute
    ds = load_dataset("fashion_mnist", root=tmp_path, test_size=5, seed=0)
    # Assert: pixels standardised with Fashion-MNIST's mean/std, labels kept
    assert ds.x_train.shape == (30, 1, 28, 28) and ds.x_test.shape == (5, 1, 28, 28)
    expected = (xtr[3] / 255.0 - 0.2860) / 0.3530
    # float32 (t/255 - m)/s with m, s rounded to float32 vs the float64 formula: at most
    # (2/s + 2 max|v|) u = (5.7 + 4.1) u = 5.8e-7 (u = 2**-24, elementwise IEEE ops, the same
    # on every CPU): 1e-6 (was 1e-5)
    np.testing.assert_allclose(ds.x_train[3, 0].numpy(), expected, rtol=0, atol=1e-6)
    assert ds.y_train.tolist() == (np.arange(30) % 10).tolist()


def test_missing_fashion_mnist_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(data_mod, "FASHION_SYSTEM_DIR", tmp_path / "none")
    with pytest.raises(DatasetUnavailable, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion_mnist", root=tmp_path, test_size=10, seed=0)


@pytest.mark.parametrize(
    ("name", "hint"),
    [("cifar10", "cifar-10-batches-py"), ("mnist", "MNIST/raw"), ("emnist_letters", "EMNIST")],
)
def test_missing_torchvision_sets_name_the_layout(tmp_path, name, hint):
    with pytest.raises(DatasetUnavailable, match=hint):
        load_dataset(name, root=tmp_path, test_size=10, seed=0)
    with pytest.raises(DatasetUnavailable, match="data_root"):
        load_dataset(name, root=None, test_size=10, seed=0)


def test_bad_names_and_sizes():
    with pytest.raises(ConfigError, match="dataset"):
        load_dataset("imagenet", root=None, test_size=10, seed=0)
    with pytest.raises(ConfigError, match="test_size"):
        load_dataset("mnist5k", root=None, test_size=0, seed=0)


def test_read_idx_rejects_bad_magic(tmp_path):
    path = tmp_path / "bad"
    path.write_bytes(b"\x00\x00\x09\x01\x00\x00\x00\x01\x05")
    with pytest.raises(DatasetUnavailable, match="magic"):
        read_idx(path)
