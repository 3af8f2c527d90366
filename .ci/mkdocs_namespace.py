"""MkDocs hook: the API reference reads the package as it installs (``mobidfl.model`` <- model/).

WHY: mkdocstrings (griffe) finds a package's modules by walking its folder, and ``model/``,
``agents/``, ``maps/`` and ``analysis/`` install as ``mobidfl.model`` ... (pyproject.toml,
``package-dir``): no folder of the repository shows that layout. Before the pages are built,
this builds it from symbolic links under ``.griffe/mobidfl/`` (the files of ``mobidfl/`` and
the four folders), which is where mkdocs.yml points the handler.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("model", "agents", "maps", "analysis")
STAGE = ROOT / ".griffe" / "mobidfl"


def stage() -> Path:
    """``.griffe/mobidfl``: a copy of ``mobidfl/__init__.py`` (griffe walks the folder of a
    package's ``__init__``, so it must be this one, not a link) and a link per other module of
    ``mobidfl/`` and per subpackage folder; stale entries are removed. Safe when two builds
    run at once (a link made by the other build is the same link, the copy is replaced
    atomically)."""
    wanted = {p.name: p for p in (ROOT / "mobidfl").glob("*.py") if p.name != "__init__.py"}
    wanted |= {name: ROOT / name for name in SUBPACKAGES}
    STAGE.mkdir(parents=True, exist_ok=True)
    for entry in STAGE.iterdir():
        if entry.name == "__init__.py" or entry.name.startswith(".__init__"):
            continue
        if entry.name not in wanted or entry.resolve() != wanted[entry.name]:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
    for name, target in wanted.items():
        with contextlib.suppress(FileExistsError):
            (STAGE / name).symlink_to(target)
    init = (ROOT / "mobidfl" / "__init__.py").read_bytes()
    if not (STAGE / "__init__.py").is_file() or (STAGE / "__init__.py").read_bytes() != init:
        part = STAGE / f".__init__.{os.getpid()}"
        part.write_bytes(init)
        part.replace(STAGE / "__init__.py")
    return STAGE


@event_priority(100)  # before mkdocstrings' on_config, which reads the handler's paths
def on_config(config: Any, **_: Any) -> Any:
    stage()
    return config
