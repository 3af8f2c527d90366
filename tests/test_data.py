"""Datasets (model/learning/data.py): offline mnist5k, idx reading, clear missing-data errors."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from model.errors import ConfigError
from model.learning import data as data_mod
from model.learning.data import DatasetUnavailable, load_dataset, read_idx


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
    np.testing.assert_allclose(ds.x_train[3, 0].numpy(), expected, atol=1e-5)
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
