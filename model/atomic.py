"""The one atomic writer: a crash or a full disk never leaves a half-written result.

Every output goes to a hidden temporary name *in the folder of its final name* (so the
rename never crosses filesystems: ``--out`` may be a mounted volume), is flushed and
fsync'ed, gets the permissions the umask gives ordinary files (``mkstemp`` would leave 0600),
and is then renamed over the old file; the folder is fsync'ed so the rename survives a power
cut. A failed write removes its temporary file and leaves the previous file untouched.
No torch import here: the CLI's checks import this module before torch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

TEMP_PREFIX = ".mobidfl-"
"""Prefix of every temporary file and staging folder (cleared by the next run in that folder)."""


def file_mode() -> int:
    """Permissions of a new ordinary file under the current umask (0o644 under umask 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def dir_mode() -> int:
    """Permissions of a new folder under the current umask (0o755 under umask 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


@contextlib.contextmanager
def open_atomic(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Yield a file handle whose content replaces ``path`` only if the block completes."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}-", dir=path.parent)
    try:
        with os.fdopen(handle, mode) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see the module docstring)."""
    with open_atomic(path, "w") as fh:
        fh.write(text)
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with open_atomic(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def fsync_dir(folder: str | Path) -> None:
    """Make renames in ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def staging_dir(out: str | Path) -> Path:
    """A fresh hidden folder *inside* ``out`` (same filesystem as the final names)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}staging-", dir=out))
    os.chmod(staging, dir_mode())
    return staging


def publish(staging: str | Path, out: str | Path) -> list[Path]:
    """Rename every entry of ``staging`` into ``out`` (replacing), then remove ``staging``."""
    staging, out = Path(staging), Path(out)
    moved = []
    for item in sorted(staging.iterdir()):
        target = out / item.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(item, target)
        moved.append(target)
    fsync_dir(out)
    shutil.rmtree(staging, ignore_errors=True)
    return moved


def remove_temporaries(folder: str | Path) -> list[Path]:
    """Delete leftovers of killed writers (``.mobidfl-*``) directly inside ``folder``."""
    folder = Path(folder)
    removed = []
    if not folder.is_dir():
        return removed
    for item in folder.glob(f"{TEMP_PREFIX}*"):
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                item.unlink()
        removed.append(item)
    return removed
