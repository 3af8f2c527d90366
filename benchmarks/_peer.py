"""The Cached-DFL authors' code, read unmodified from a cache folder (never vendored).

``liemak363/Cached-DFL`` at commit :data:`COMMIT` (the authors' history plus one fix-up commit
of the fork's maintainer; ../shared/references/README.md). The package folder ``cached_dfl/``
lives in ``~/.cache/mobidfl/references/liemak363-Cached-DFL-b116fea/`` (``MOBIDFL_CACHE``
moves the root); when missing it is seeded by copying ``/work/shared/references/cached-dfl``
(or ``../shared/references/cached-dfl`` beside the checkout), else the caller gets a one-line
message with the git commands that fetch it. A local stand-in for the shared
``validation/refcache.py`` written on another branch (same behaviour; to be unified).

:func:`import_cached_dfl` imports the modules a training round needs under private names
(``cached_dfl.model`` etc.: the authors' ``model.py`` would otherwise shadow MobiDFL's
``model`` package, and their ``aggregation.py`` this folder's ``aggregation.py``). Shims for
library drift, each listed in :data:`SHIMS` (empty today: torch 2.14, torchvision 0.29 and
numpy 2 run the imported functions as they are; ``cache_algorithm.py``, the only module that
imports ``cvxpy``, is not imported because the timed phases do not use it).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType

REPO = "liemak363/Cached-DFL"
COMMIT = "b116fea0268aa155a1f65b1f9e3cb6d534a1829a"
FOLDER = f"liemak363-Cached-DFL-{COMMIT[:7]}"
SHIMS: list[str] = []
"""Shims applied to the authors' code (library drift only); printed by the benchmark."""

_SEEDS = (
    Path("/work/shared/references/cached-dfl"),
    Path(__file__).resolve().parents[2] / "shared" / "references" / "cached-dfl",
)


class PeerUnavailable(RuntimeError):
    """The authors' code is not in the cache and no seed folder exists (message: how to fetch)."""


def cache_root() -> Path:
    return Path(os.environ.get("MOBIDFL_CACHE", "~/.cache/mobidfl")).expanduser() / "references"


def fetch_hint(dest: Path) -> str:
    return (
        f"Cached-DFL's code is not in {dest}; fetch it with: git clone "
        f"https://github.com/{REPO} {dest} && git -C {dest} checkout {COMMIT}"
    )


def peer_dir(dest: Path | None = None) -> Path:
    """The cached checkout (a folder holding ``cached_dfl/``), seeded from a local copy."""
    dest = Path(dest) if dest is not None else cache_root() / FOLDER
    if (dest / "cached_dfl" / "utils_cnn.py").is_file():
        return dest
    for seed in _SEEDS:
        if (seed / "cached_dfl" / "utils_cnn.py").is_file():
            tmp = dest.with_name(dest.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(seed, tmp)
            if dest.exists():  # another process seeded it meanwhile
                shutil.rmtree(tmp)
            else:
                tmp.replace(dest)
            return dest
    raise PeerUnavailable(fetch_hint(dest))


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_cached_dfl(dest: Path | None = None) -> dict[str, ModuleType]:
    """The authors' ``utils_cnn``, ``aggregation``, ``model`` and ``data_loader`` modules.

    Their own imports (``from utils_cnn import ...``, ``import seed_setter``) resolve in
    their folder, put first on ``sys.path`` for the duration of the import only.
    """
    pkg = peer_dir(dest) / "cached_dfl"
    sys.path.insert(0, str(pkg))
    try:
        out = {"utils_cnn": _load("utils_cnn", pkg / "utils_cnn.py")}
        out["seed_setter"] = _load("seed_setter", pkg / "seed_setter.py")
        for name in ("aggregation", "model", "data_loader"):
            out[name] = _load(f"cached_dfl_{name}", pkg / f"{name}.py")
    finally:
        sys.path.remove(str(pkg))
    return out
