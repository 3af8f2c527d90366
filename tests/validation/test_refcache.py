"""The reference cache (validation/refcache.py): the authors' code at its pinned commit, every
file checked by SHA-256, seeded from a local copy; drift or absence is one line, never a run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mobidfl.errors import ConfigError
from tests import _peer
from validation import refcache

SHARED = Path(__file__).resolve().parents[3] / "shared"
needs_seed = pytest.mark.skipif(
    not (SHARED / "references" / "cached-dfl").is_dir(),
    reason="no local copy of the references (../shared/references) to seed the cache from",
)


@needs_seed
def test_cache_is_seeded_verified_and_reused(tmp_path, monkeypatch):
    # Prepare
    monkeypatch.setenv("MOBIDFL_REF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MOBIDFL_REF_SEED", str(SHARED))
    # Execute
    folder = refcache.ensure("cached_dfl", fetch=False)
    # Assert: every pinned file, the CSV decompressed, provenance written; the peer benchmark
    # reads the same folder
    assert (folder / "cached_dfl" / "road_sim.py").is_file()
    assert (folder / "NY_Data" / "NewYork.csv").read_bytes().startswith(b"StartLat,")
    assert "b116fea0268aa155a1f65b1f9e3cb6d534a1829a" in (folder / "PROVENANCE.txt").read_text()
    assert _peer.peer_dir() == folder
    assert refcache.ensure("cached_dfl", fetch=False) == folder


@needs_seed
def test_a_drifted_file_is_replaced_from_the_seed_and_a_drifted_seed_is_refused(
    tmp_path, monkeypatch
):
    # Prepare: a cache with one edited file
    monkeypatch.setenv("MOBIDFL_REF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MOBIDFL_REF_SEED", str(SHARED))
    folder = refcache.ensure("heredia", fetch=False)
    (folder / "generate_graph.py").write_text("# edited\n")
    # Execute / Assert: the edit is not run, the pinned file comes back
    again = refcache.ensure("heredia", fetch=False)
    assert "edited" not in (again / "generate_graph.py").read_text()
    # A seed at another commit (one file differs) is refused in one line, naming the file
    seed = tmp_path / "seed"
    shutil.copytree(SHARED / "references", seed / "references")
    (seed / "references" / "heredia-decentralizepy" / "generate_graph.py").chmod(0o644)
    (seed / "references" / "heredia-decentralizepy" / "generate_graph.py").write_text("x = 1\n")
    monkeypatch.setenv("MOBIDFL_REF_SEED", str(seed))
    shutil.rmtree(folder)
    with pytest.raises(ConfigError, match="generate_graph.py") as info:
        refcache.ensure("heredia", fetch=False)
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "cache").glob("*.partial"))


def test_no_seed_and_no_fetch_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MOBIDFL_REF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MOBIDFL_REF_SEED", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(refcache, "ROOT", tmp_path / "a" / "b")  # no ../shared beside it
    with pytest.raises(ConfigError, match="fetching is off") as info:
        refcache.ensure("cached_dfl", fetch=False)
    assert "\n" not in str(info.value)
    assert not list((tmp_path / "cache").glob("*"))
    with pytest.raises(ConfigError, match="one of"):
        refcache.ensure("nobody")
