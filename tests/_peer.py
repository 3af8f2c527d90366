"""The Cached-DFL authors' code, read unmodified from a cache folder (never vendored).

``liemak363/Cached-DFL`` at commit :data:`COMMIT`, every file checked against its SHA-256 by
:func:`validation.refcache.ensure` (the cache the validation suite uses: seeded from a local copy
of the same commit, fetched with git otherwise; a one-line refusal when neither works).

:func:`import_cached_dfl` imports the modules a training round needs under private names
(``cached_dfl.model`` etc.: the authors' ``model.py`` would otherwise shadow MobiDFL's
``model`` package, and their ``aggregation.py`` this folder's ``aggregation.py``). Shims for
library drift, each listed in :data:`SHIMS` (empty today: torch 2.14, torchvision 0.29 and
numpy 2 run the imported functions as they are; ``cache_algorithm.py``, the only module that
imports ``cvxpy``, is not imported because the timed phases do not use it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mobidfl.errors import ConfigError
from validation.refcache import REFERENCES, ensure

REPO = REFERENCES["cached_dfl"].repo
COMMIT = next(iter(REFERENCES["cached_dfl"].files.values()))[0]
SHIMS: list[str] = []
"""Shims applied to the authors' code (library drift only); printed by the benchmark."""


class PeerUnavailable(RuntimeError):
    """The authors' code could not be had at its pinned commit (message: why, in one line)."""


def peer_dir(dest: Path | None = None) -> Path:
    """A folder holding ``cached_dfl/``: ``dest`` when given, else the verified cache."""
    if dest is not None:
        if not (Path(dest) / "cached_dfl" / "utils_cnn.py").is_file():
            raise PeerUnavailable(f"{dest} holds no cached_dfl/utils_cnn.py")
        return Path(dest)
    try:
        return ensure("cached_dfl")
    except ConfigError as exc:
        raise PeerUnavailable(str(exc)) from None


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
