"""The benchmark's cache of the Cached-DFL authors' code (benchmarks/_peer.py, issue 22):
seeded by copying a local reference folder, else one line saying how to fetch it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _peer  # noqa: E402


def fake_reference(root: Path) -> Path:
    pkg = root / "cached_dfl"
    pkg.mkdir(parents=True)
    (pkg / "utils_cnn.py").write_text("def test(model, loader):\n    return 1.0, None\n")
    (root / "LICENSE").write_text("MIT")
    return root


def test_cache_is_seeded_from_a_local_reference_copy(tmp_path, monkeypatch):
    # Prepare
    seed = fake_reference(tmp_path / "shared" / "cached-dfl")
    monkeypatch.setattr(_peer, "_SEEDS", (tmp_path / "missing", seed))
    dest = tmp_path / "cache" / _peer.FOLDER
    dest.parent.mkdir()
    # Execute
    got = _peer.peer_dir(dest)
    # Assert: a copy (not a link), and a second call reuses it
    assert got == dest and (dest / "cached_dfl" / "utils_cnn.py").is_file()
    assert not (dest / "cached_dfl").is_symlink()
    (seed / "cached_dfl" / "utils_cnn.py").unlink()
    assert _peer.peer_dir(dest) == dest


def test_missing_reference_says_how_to_fetch_it_at_the_pinned_commit(tmp_path, monkeypatch):
    # Prepare
    monkeypatch.setattr(_peer, "_SEEDS", ())
    dest = tmp_path / "nowhere"
    # Execute / Assert
    with pytest.raises(_peer.PeerUnavailable) as info:
        _peer.peer_dir(dest)
    message = str(info.value)
    assert "\n" not in message and "git clone" in message and _peer.COMMIT in message
    assert str(dest) in message
