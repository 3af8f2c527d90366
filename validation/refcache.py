"""The seed papers' own code, pinned by commit and content, in a cache folder outside the project.

A differential validation runs the authors' code *unmodified* beside MobiDFL. That code is never
copied into this repository: :func:`ensure` puts it in a cache folder (``$MOBIDFL_REF_CACHE`` or
``~/.cache/mobidfl/references``), seeded from a local copy of the same commit when one exists
(``$MOBIDFL_REF_SEED``, else ``../shared/references`` beside the checkout), fetched with ``git`` at
the pinned commit otherwise. Every file is checked against its SHA-256 before use, so a cache that
drifted (an edit, another commit, a truncated download) is refused in one line, never run.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["REFERENCES", "Reference", "cache_root", "ensure"]


@dataclass(frozen=True)
class Reference:
    """One reference implementation: where it lives upstream and what its files must hash to.

    ``files`` maps a path inside the cache folder to ``(commit, upstream path, sha256)``; a path
    may come from another commit of the same repository (de Heredia's fork pins two).
    ``seed`` maps a cache path to its path under the seed folder (``.gz`` is decompressed).
    """

    name: str
    repo: str
    licence: str
    files: dict[str, tuple[str, str, str]]
    seed: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        commits = sorted({c[:7] for c, _, _ in self.files.values()})
        return f"{self.repo.replace('/', '-')}@{'+'.join(commits)}"


_CDFL = "b116fea0268aa155a1f65b1f9e3cb6d534a1829a"
_HER_GRAPH = "fb8a5b195a5dd741847cb0858f47fa6d6ecef64b"
_HER_SHARE = "aebcdf34d1861e07fc708ec6004de1e577d75c5e"
_PSFL = "6f125feeb8e743edc243aa542d8c9348fb69666d"

_PSFL_FILES = {
    "README.md": "ccea5ef224329c5066abde4aba536ddf786352cf0e2f41200fc63c22e63ecca6",
    "poetry.lock": "2ec50f5f972b8e646ff42ca145763f2424aa21f9644f9493b758e9064fa4a592",
    "pyproject.toml": "f80e32fce8a0a4a6311f9f9f1b095e55b68efe9b5e80759a01f58922e64d40e2",
    "src/PSFLClient.py": "a371b9e31437182e457ea562336e7b25a0fe1e1040969e3b23868c278a328191",
    "src/TestSetEvalMonitor.py": "ac45bbd9cd8d04214ccb9838acdee66e4b966912c4dd9a742265543cf1b5087a",
    "src/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "src/custom_exporter.py": "bbcaaea1709b57feb7c96fcd6ed9240cb04e5df22788d0e6b512c4a284ddd701",
    "src/dummy_client.py": "da0168f5562870cf9aa7c2dfbcd264c810975887c1925451aeae48bafbb95635",
    "src/learning/__init__.py": "81babfc39155b2285d132180c1745b5ed6ef489462de6590a9ff1eb7810912a3",
    "src/learning/model.py": "ee0a153dd89c662502065629c92593fb4d86b6279e24b184bc82610019a5db82",
    "src/simulation.py": "84a910220f4e1edd1d3fd66d5edd44e71eed8c2609884eb6cbb955bffd4393ff",
    "src/utils.py": "8100d1ed33dff5659ad9444cc7db05d9450eebfac8778c7114ef736c618d7e0e",
}

_CDFL_FILES = {
    "aggregation.py": "5c26b161e183b8cd39484abe4073b94589e090e70c4798816a77592cf7dd0873",
    "cache_algorithm.py": "e2668c812bc088e9edfbd67e53a53972556bf4b60e7782f6d20035be71805b96",
    "config.yaml": "c210b0de56d478c2e2f24964aeaac16d98d1b2a58e79d0f6daf7e1e6033d7196",
    "data_loader.py": "8334e0603c320068e33396d95ea82911141e3ffe92996c5e8531b1ee8348825f",
    "model.py": "ed34f246600f12e17e9a73869f3500cd478b5b769e33fa340e5e8de6a1865608",
    "road_sim.py": "c6323b6cff2ec71ae10f73242f52405db101650400b1b89fef5bbb367e139817",
    "seed_setter.py": "07aa4f953ac9539e23d466835ebbe389ebbae52084c298b9ac034c13aac3e979",
    "trainer_mpi.py": "b1de52054be866895701ee3765e3dfab1d415b09be9a7262b09545e332310129",
    "trainer_single.py": "47667afdde33689d072a6271381fc605327a41809e03f57492d74fd6f37fe20d",
    "utils.py": "738406ac9a0104aadff21d37a09acbc68f93f6ff49c6db8334abe8bf19d064a4",
    "utils_cnn.py": "bbcc743fde8fe61935290de6624cbf1e2cb46dd5babf19b4c8fec53af2662767",
}

REFERENCES: dict[str, Reference] = {
    "cached_dfl": Reference(
        name="cached_dfl",
        repo="liemak363/Cached-DFL",
        licence="MIT, Xiaoyu Wang (LICENSE in the cache folder)",
        files={
            **{
                f"cached_dfl/{f}": (_CDFL, f"cached_dfl/{f}", h)
                for f, h in _CDFL_FILES.items()
            },
            "LICENSE": (
                _CDFL, "LICENSE",
                "27279ec43d52f1f169461f9ef13bba0ecd65772138bb21117906bf5f0d2b569d",
            ),
            # road_sim.py reads "../NY_Data/NewYork.csv" relative to its working directory.
            "NY_Data/NewYork.csv": (
                _CDFL, "NY_Data/NewYork.csv",
                "8a7269d450bd2f24a4892041940fe5c6d77e2e9c3fdf4a251c8d89280195474d",
            ),
        },
        seed={
            **{f"cached_dfl/{f}": f"references/cached-dfl/cached_dfl/{f}" for f in _CDFL_FILES},
            "LICENSE": "references/cached-dfl/LICENSE",
            "NY_Data/NewYork.csv": "data/cached-dfl-manhattan/NewYork.csv.gz",
        },
    ),
    "heredia": Reference(
        name="heredia",
        repo="asturnox/decentralizepy",
        licence="MIT, DecentralizePy (LICENSE in the cache folder)",
        files={
            "generate_graph.py": (
                _HER_GRAPH, "generate_graph.py",
                "e3b7e7b56077c15665798cf3584cfc6d679e9b65f6dd50e88f8be81d22b313b1",
            ),
            "decentralizepy/graphs/MobilityGraph.py": (
                _HER_GRAPH, "src/decentralizepy/graphs/MobilityGraph.py",
                "cfa328108f31dd7169f7124310db835deb7833ae2f4306694ee42b1581589668",
            ),
            "decentralizepy/graphs/MobilityNode.py": (
                _HER_GRAPH, "src/decentralizepy/graphs/MobilityNode.py",
                "2cb8024a28b4cdb9b4bd6077bf7ebdbc6b340aedf2d59a76a587eb2116fd7af8",
            ),
            "decentralizepy/sharing/MobilityAwareSharing.py": (
                _HER_SHARE, "src/decentralizepy/sharing/MobilityAwareSharing.py",
                "d05edff912f1dcb6a22d1b1fd1b679c8c1241af0b3f0ff46c57a4c4faea6df9b",
            ),
            "LICENSE": (
                _HER_GRAPH, "LICENSE",
                "56ada9bf86a50ada69c922f163f841525f63c6fadc67f3ba6b869b066a5f3233",
            ),
        },
        seed={
            p: f"references/heredia-decentralizepy/{p}"
            for p in (
                "generate_graph.py",
                "decentralizepy/graphs/MobilityGraph.py",
                "decentralizepy/graphs/MobilityNode.py",
                "decentralizepy/sharing/MobilityAwareSharing.py",
                "LICENSE",
            )
        },
    ),
    # No licence file upstream: read from the cache only, never copied into the project.
    "psfl": Reference(
        name="psfl",
        repo="davidedomini/PSFL",
        licence="none (the repository has no licence file): not redistributable",
        files={f: (_PSFL, f, h) for f, h in _PSFL_FILES.items()},
        seed={f: f"references/psfl/{f}" for f in _PSFL_FILES},
    ),
}


def cache_root() -> Path:
    """``$MOBIDFL_REF_CACHE`` or ``~/.cache/mobidfl/references``."""
    env = os.environ.get("MOBIDFL_REF_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "mobidfl" / "references"


def _seed_root() -> Path | None:
    env = os.environ.get("MOBIDFL_REF_SEED")
    for cand in ([Path(env)] if env else []) + [ROOT.parent / "shared"]:
        if cand.is_dir():
            return cand
    return None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _verified(ref: Reference, folder: Path) -> list[str]:
    """Paths in ``folder`` that are missing or hash differently from the pin."""
    bad = []
    for rel, (_, _, digest) in ref.files.items():
        p = folder / rel
        if not p.is_file() or _sha256(p) != digest:
            bad.append(rel)
    return bad


def _copy_seed(ref: Reference, seed: Path, dest: Path) -> None:
    for rel, src_rel in ref.seed.items():
        src, out = seed / src_rel, dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".gz":
            with gzip.open(src, "rb") as fin, out.open("wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copyfile(src, out)


def _fetch_git(ref: Reference, dest: Path) -> None:
    """Fetch each pinned commit shallowly and check out only the pinned paths."""
    url = f"https://github.com/{ref.repo}.git"
    by_commit: dict[str, list[tuple[str, str]]] = {}
    for rel, (commit, upstream, _) in ref.files.items():
        by_commit.setdefault(commit, []).append((rel, upstream))
    with tempfile.TemporaryDirectory() as tmp:
        git = ["git", "-C", tmp, "-c", "advice.detachedHead=false"]
        subprocess.run(["git", "init", "-q", tmp], check=True, capture_output=True)
        subprocess.run([*git, "remote", "add", "origin", url], check=True, capture_output=True)
        for commit, paths in by_commit.items():
            subprocess.run(
                [*git, "fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", commit],
                check=True, capture_output=True, timeout=600,
            )
            for rel, upstream in paths:
                blob = subprocess.run(
                    [*git, "show", f"{commit}:{upstream}"], check=True, capture_output=True
                ).stdout
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(blob)


def ensure(name: str, *, fetch: bool = True) -> Path:
    """The cache folder holding reference ``name`` at its pinned commit, every file verified.

    Seeds it from a local copy when there is one, else fetches it with git (online only).
    Raises :class:`ConfigError` (one line) when neither works or a file does not match its pin.
    """
    if name not in REFERENCES:
        raise ConfigError("reference", name, f"one of {', '.join(sorted(REFERENCES))}")
    ref = REFERENCES[name]
    folder = cache_root() / ref.folder
    if folder.is_dir() and not _verified(ref, folder):
        return folder
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    seed = _seed_root()
    how = ""
    try:
        if seed is not None and all((seed / s).is_file() for s in ref.seed.values()):
            _copy_seed(ref, seed, tmp)
            how = f"seeded from {seed}"
        elif fetch:
            _fetch_git(ref, tmp)
            how = f"fetched from github.com/{ref.repo}"
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ConfigError("reference", name, "a local seed copy (fetching is off)")
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConfigError(
            "reference",
            name,
            f"a copy of {ref.repo} at its pinned commit: no seed folder and git fetch failed "
            f"({type(exc).__name__}); set MOBIDFL_REF_SEED or go online",
        ) from None
    bad = _verified(ref, tmp)
    if bad:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConfigError(
            "reference", name, f"files matching their pinned SHA-256 ({how}; differ: {bad[0]})"
        )
    (tmp / "PROVENANCE.txt").write_text(
        f"{ref.repo}\n"
        + "".join(f"{rel}\t{c}\t{u}\t{d}\n" for rel, (c, u, d) in ref.files.items())
        + f"licence: {ref.licence}\n{how}\n"
    )
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder
