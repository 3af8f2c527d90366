"""The Python 3.13 environment the PSFL reference runs in, built from its own lock file.

``davidedomini/PSFL`` needs Python ^3.13 with ``phyelds`` 2.6.0 and ``profed`` 0.6.5 (its
``pyproject.toml``), which MobiDFL's own interpreter does not have. :func:`ensure_venv` creates a
virtual environment under ``~/.cache/mobidfl/psfl-venv-<hash>`` (``$MOBIDFL_PSFL_VENV`` overrides
the folder) and installs every package of the reference's ``poetry.lock`` at its locked version
(torch 2.7.1, torchvision 0.22.1, numpy 2.3.0, ...), binaries only, from the package registry or
the local wheel cache pip is configured with. The folder name hashes the lock, so a different
lock never reuses a stale environment. A Python 3.13 is looked up in ``$MOBIDFL_PYTHON313``,
``python3.13`` on the path and pyenv's versions; :func:`find_python313` returns None without one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

from mobidfl.errors import ConfigError

__all__ = ["find_python313", "locked_requirements", "ensure_venv", "venv_python"]


def find_python313() -> str | None:
    """A Python 3.13 interpreter, or None when this machine has none."""
    cands = [os.environ.get("MOBIDFL_PYTHON313", ""), shutil.which("python3.13") or ""]
    cands += sorted(str(p) for p in (Path.home() / ".pyenv/versions").glob("3.13*/bin/python3.13"))
    for c in cands:
        if c and Path(c).is_file():
            try:
                out = subprocess.run(
                    [c, "-c", "import sys, venv; print(sys.version_info[:2])"],
                    check=False, capture_output=True, text=True, timeout=60,
                ).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                continue
            if out == "(3, 13)":
                return c
    return None


def locked_requirements(ref_folder: Path) -> list[str]:
    """``name==version`` for every package of the reference's ``poetry.lock``."""
    lock = tomllib.loads((ref_folder / "poetry.lock").read_text())
    return sorted(f"{p['name']}=={p['version']}" for p in lock["package"])


def _venv_dir(ref_folder: Path) -> Path:
    env = os.environ.get("MOBIDFL_PSFL_VENV")
    if env:
        return Path(env)
    digest = hashlib.sha256((ref_folder / "poetry.lock").read_bytes()).hexdigest()[:10]
    return Path.home() / ".cache" / "mobidfl" / f"psfl-venv-{digest}"


def venv_python(ref_folder: Path) -> Path:
    """The interpreter of the reference's environment (may not exist yet)."""
    return _venv_dir(ref_folder) / "bin" / "python"


def ensure_venv(ref_folder: Path, *, python: str | None = None) -> Path:
    """The reference environment's interpreter, creating the environment when missing.

    A finished environment holds a ``.complete`` marker listing what was installed; anything
    else (an interrupted build) is removed and rebuilt. Raises :class:`ConfigError` (one line)
    without a Python 3.13 or when the install fails.
    """
    folder = _venv_dir(ref_folder)
    reqs = locked_requirements(ref_folder)
    marker = folder / ".complete"
    if marker.is_file() and marker.read_text().split() == reqs:
        return folder / "bin" / "python"
    py = python or find_python313()
    if py is None:
        raise ConfigError(
            "psfl reference", "no Python 3.13", "python3.13 on the path, under pyenv, or "
            "$MOBIDFL_PYTHON313 (the reference's pyproject needs ^3.13)"
        )
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    log = folder.with_name(folder.name + ".log")
    with log.open("w") as out:
        steps = [
            [py, "-m", "venv", str(folder)],
            [str(folder / "bin/python"), "-m", "pip", "install", "--quiet", "--no-deps",
             "--only-binary", ":all:", *reqs],
        ]
        for cmd in steps:
            done = subprocess.run(cmd, check=False, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=3600)
            if done.returncode != 0:
                raise ConfigError(
                    "psfl reference environment", f"{cmd[2]} failed", f"a clean install (see {log})"
                )
    marker.write_text("\n".join(reqs) + "\n")
    return folder / "bin" / "python"
