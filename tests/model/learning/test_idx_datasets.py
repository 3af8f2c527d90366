"""Every idx data set (MNIST, Fashion-MNIST, EMNIST-letters) goes through one checked reader.

A table of damages x data sets: each damaged copy is refused with one line naming the file
(:class:`DatasetDamaged`, exit 2 from the CLI), a missing file says what provides it
(:class:`DatasetUnavailable`, never "damaged"), and the intact copy loads the exact images
and labels written (the control that makes every row able to fail). A property-based round
flips or cuts any of the four files of each set: the outcome is the same data or one line.
Tiny sets (6 training, 4 test images), so the file runs in seconds.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobidfl.errors import DatasetDamaged, DatasetUnavailable
from mobidfl.model.learning import data as data_mod
from mobidfl.model.learning.data import load_dataset, read_idx

# name -> (folder under ROOT, the four file stems, number of classes, first label)
SETS = {
    "mnist": ("MNIST/raw", data_mod._IDX_NAMES, 10, 0),
    "fashion_mnist": ("FashionMNIST/raw", data_mod._IDX_NAMES, 10, 0),
    "emnist_letters": ("EMNIST/raw", data_mod._EMNIST_LETTERS_NAMES, 26, 1),
}
N_TRAIN, N_TEST = 6, 4
SYSTEM_FASHION = Path("/usr/share/datasets/fashion-mnist")
"""Debian's copy (``data.FASHION_SYSTEM_DIR``, which tests/conftest.py hides from the others)."""


def idx_bytes(array: np.ndarray, dims: list[int] | None = None) -> bytes:
    """The idx encoding of ``array`` (its header may claim other ``dims``)."""
    dims = list(array.shape) if dims is None else dims
    return (bytes([0, 0, 8, len(dims)]) + struct.pack(f">{len(dims)}I", *dims)
            + array.astype(np.uint8).tobytes())


def arrays(name: str) -> dict[str, np.ndarray]:
    _, _, classes, first = SETS[name]
    rng = np.random.default_rng(len(name))
    return {
        "train_x": rng.integers(0, 256, (N_TRAIN, 28, 28)),
        "train_y": first + np.arange(N_TRAIN) % classes,
        "test_x": rng.integers(0, 256, (N_TEST, 28, 28)),
        "test_y": first + (np.arange(N_TEST) + 3) % classes,
    }


def write_set(root: Path, name: str, files: dict[str, bytes] | None = None, *,
              gz: bool = True) -> Path:
    """The set's four files under ROOT/<folder>/ (``files`` replaces some of them)."""
    folder, stems, _, _ = SETS[name]
    raw = root / folder
    raw.mkdir(parents=True, exist_ok=True)
    content = {key: idx_bytes(a) for key, a in arrays(name).items()} | (files or {})
    for key, stem in stems.items():
        if content[key] is None:
            continue
        if gz:
            (raw / f"{stem}.gz").write_bytes(gzip.compress(content[key], mtime=0))
        else:
            (raw / stem).write_bytes(content[key])
    return raw


def load(name: str, root: Path):
    data_mod._read_idx_cached.cache_clear()
    return load_dataset(name, root=root, test_size=N_TEST, seed=0)


@pytest.fixture(autouse=True)
def no_system_copy(monkeypatch, tmp_path):
    monkeypatch.setattr(data_mod, "FASHION_SYSTEM_DIR", tmp_path / "no-system-copy")


def _random_bytes(a: dict[str, np.ndarray]) -> dict[str, bytes]:
    rng = np.random.default_rng(7)
    return {k: rng.integers(0, 256, 5000, dtype=np.uint8).tobytes() for k in a}


def _claims_2gib(a: dict[str, np.ndarray]) -> dict[str, bytes]:
    return {"train_x": idx_bytes(a["train_x"], [2**31 // 784 + 1, 28, 28])}


DAMAGES: dict[str, tuple[Callable[[dict[str, np.ndarray]], dict[str, bytes]], str]] = {
    # every file random bytes (the held-out round's MNIST folder)
    "random_bytes": (_random_bytes, "bad magic number"),
    # an idx header claiming 2 GiB over a small file: what is wrong, not "not found"
    "header_claims_2_gib": (_claims_2gib, "GiB of data"),
    "data_cut_short": (lambda a: {"test_x": idx_bytes(a["test_x"])[:-100]}, "cut short"),
    "header_cut_short": (lambda a: {"train_y": idx_bytes(a["train_y"])[:6]}, "cut short"),
    "trailing_bytes": (lambda a: {"train_x": idx_bytes(a["train_x"]) + b"\x00"}, "more than"),
    "fewer_labels_than_images": (
        lambda a: {"train_y": idx_bytes(a["train_y"][:-1])}, "labels for the 6 images"),
    "label_out_of_range": (
        lambda a: {"test_y": idx_bytes(np.r_[a["test_y"][:-1], 200])}, "label 200 is outside"),
    "no_images": (lambda a: {"train_x": idx_bytes(np.zeros((0, 28, 28))),
                             "train_y": idx_bytes(np.zeros(0))}, "non-empty stack"),
    "images_not_2d": (lambda a: {"test_x": idx_bytes(a["test_x"].reshape(-1))}, "2-D images"),
    "train_test_sizes_differ": (
        lambda a: {"test_x": idx_bytes(np.zeros((N_TEST, 14, 14)))}, "training images are"),
}


@pytest.mark.parametrize("name", list(SETS))
@pytest.mark.parametrize("gz", [True, False], ids=["gz", "plain"])
def test_an_intact_set_loads_exactly_what_was_written(tmp_path, name, gz):
    # Prepare
    write_set(tmp_path, name, gz=gz)
    a = arrays(name)
    # Execute
    ds = load(name, tmp_path)
    # Assert: labels shifted to 0.., EMNIST's transposed images made upright, test kept whole
    first = SETS[name][3]
    assert ds.y_train.tolist() == (a["train_y"] - first).tolist()
    assert ds.y_test.tolist() == (a["test_y"] - first).tolist()
    mean, std = data_mod._NORM[name]
    image = a["train_x"][2].T if name == "emnist_letters" else a["train_x"][2]
    # float32 (t/255 - m)/s, m and s rounded to float32, vs float64: <= (2/s + 2 max|v|) u,
    # largest for MNIST (s = 0.3081, |v| <= 2.82): 12.1 u = 7.2e-7 (elementwise IEEE ops,
    # the same on every CPU): 1e-6 (was 1e-5)
    np.testing.assert_allclose(ds.x_train[2, 0].numpy(), (image / 255 - mean[0]) / std[0],
                               rtol=0, atol=1e-6)
    assert ds.num_classes == SETS[name][2] and ds.input_shape == (1, 28, 28)


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("name", list(SETS))
def test_every_damage_of_every_idx_set_is_one_line_naming_it(tmp_path, name, damage):
    # Prepare
    make, fragment = DAMAGES[damage]
    write_set(tmp_path, name, make(arrays(name)))
    # Execute
    with pytest.raises(DatasetDamaged) as info:
        load(name, tmp_path)
    # Assert: one line, says what is wrong, names the set's folder, never "not found"
    message = str(info.value)
    assert "\n" not in message and fragment in message, message
    assert str(tmp_path / SETS[name][0]) in message, message
    assert "not found" not in message


@pytest.mark.parametrize("name", list(SETS))
def test_a_missing_file_says_what_provides_the_set_not_damaged(tmp_path, name):
    # Prepare: three of the four files
    write_set(tmp_path, name, {"test_y": None})
    # Execute
    with pytest.raises(DatasetUnavailable) as info:
        load(name, tmp_path)
    # Assert
    assert not isinstance(info.value, DatasetDamaged)
    assert "not found" in str(info.value) and SETS[name][0].split("/")[0] in str(info.value)


def test_a_header_over_the_cap_is_refused_before_the_data_is_read(tmp_path):
    # Prepare: 64 MiB of zeros (64 kB gzipped) behind a header that claims 100 bytes, and
    # a header claiming more than the cap over an empty body
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(idx_bytes(np.zeros(100)) + bytes(64 << 20), compresslevel=1))
    forged = tmp_path / "forged"
    forged.write_bytes(bytes([0, 0, 8, 1]) + struct.pack(">I", 4096))
    # Execute / Assert: the bomb is inflated to 101 bytes only, then refused
    with pytest.raises(DatasetDamaged, match="more than 100"):
        read_idx(bomb)
    with pytest.raises(DatasetDamaged, match="cap"):
        read_idx(forged, max_bytes=4095)
    with pytest.raises(DatasetDamaged, match="cut short"):
        read_idx(forged, max_bytes=4096)


@pytest.mark.skipif(not (SYSTEM_FASHION / "t10k-labels-idx1-ubyte.gz").is_file(),
                    reason="Debian's dataset-fashion-mnist is not installed (make fashion-mnist)")
def test_the_default_dataset_is_the_full_fashion_mnist_where_installed(monkeypatch):
    from mobidfl.model.config import Config, dataset_present

    # Prepare: the system copy visible (conftest hides it from the other tests)
    monkeypatch.setattr(data_mod, "FASHION_SYSTEM_DIR", SYSTEM_FASHION)
    dataset_present.cache_clear()
    try:
        # Execute
        config = Config.from_settings({})
        ds = load_dataset("fashion_mnist", test_size=10_000, seed=0)
    finally:
        dataset_present.cache_clear()
    # Assert: the full 60k / 10k set, 6,000 / 1,000 images per class
    assert config.dataset == "fashion_mnist"
    assert ds.x_train.shape == (60_000, 1, 28, 28) and ds.x_test.shape == (10_000, 1, 28, 28)
    assert torch.bincount(ds.y_train).tolist() == [6000] * 10
    assert torch.bincount(ds.y_test).tolist() == [1000] * 10


def test_the_cli_refuses_a_random_bytes_mnist_folder_in_one_line_exit_2(tmp_path, capsys):
    from mobidfl.analysis.cli import main

    # Prepare: the held-out round's case (dataset=mnist over random bytes)
    write_set(tmp_path / "data", "mnist", _random_bytes(arrays("mnist")), gz=False)
    out = tmp_path / "out"
    # Execute
    code = main(["run", "--out", str(out), "--set", "map=grid:3x3", "--set", "steps=1",
                 "--set", "vehicles=3", "--set", "pedestrians=0", "--set", "sensors=0",
                 "--set", "uavs=0", "--set", "dataset=mnist",
                 "--set", f"data_root={tmp_path / 'data'}", "--quiet"])
    # Assert
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "bad magic number" in err and "Traceback" not in err, err
    assert not out.exists()


def test_a_damaged_first_choice_of_an_auto_dataset_is_refused_not_replaced(tmp_path):
    from mobidfl.model.config import Config, dataset_present

    # Prepare: a damaged Fashion-MNIST under data_root
    write_set(tmp_path, "fashion_mnist", {"train_y": b"not an idx file"}, gz=False)
    dataset_present.cache_clear()
    # Execute / Assert: the auto choice does not fall back silently to mnist5k
    with pytest.raises(DatasetDamaged, match="train-labels"):
        Config.from_settings({"dataset": "auto:fashion_mnist|mnist5k",
                              "data_root": str(tmp_path)})
    dataset_present.cache_clear()


FUZZ = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(name=st.sampled_from(list(SETS)), key=st.sampled_from(list(data_mod._IDX_NAMES)),
       gz=st.booleans(), cut=st.one_of(st.none(), st.integers(0, 900)),
       flip=st.tuples(st.integers(0, 40), st.integers(1, 255)))
def test_any_cut_or_flip_of_any_file_is_the_same_data_or_one_line(
        tmp_path_factory, name, key, gz, cut, flip):
    # Prepare: one file of one set cut, or one of its first bytes flipped
    root = tmp_path_factory.mktemp("fuzz")
    raw = bytearray(idx_bytes(arrays(name)[key]))
    if cut is not None:
        raw = raw[:cut]
    else:
        raw[flip[0] % len(raw)] ^= flip[1]
    write_set(root, name, {key: bytes(raw)}, gz=gz)
    # Execute
    try:
        ds = load(name, root)
    except DatasetDamaged as exc:
        assert "\n" not in str(exc)
        return
    # Assert: what was read is what was written (a flip inside pixel or label values is a
    # different valid file; it must then be read as written, not differently)
    a = arrays(name)
    got = np.frombuffer(bytes(raw[-len(a[key].ravel()):]), dtype=np.uint8)
    first = SETS[name][3]
    if key.endswith("_y"):
        labels = (ds.y_train if key == "train_y" else ds.y_test).numpy()
        assert np.array_equal(labels + first, got), (key, labels)
    else:
        assert (ds.x_train if key == "train_x" else ds.x_test).shape[0] == a[key].shape[0]
