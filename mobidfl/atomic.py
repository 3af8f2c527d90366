"""The one atomic writer: a crash or a full disk never leaves a half-written result.

Every output goes to a hidden temporary name *in the folder of its final name* (so the
rename never crosses filesystems: ``--out`` may be a mounted volume), is flushed and
fsync'ed, gets the permissions the umask gives ordinary files (``mkstemp`` would leave 0600),
and is then renamed over the old file; the folder is fsync'ed so the rename survives a power
cut. A failed write removes its temporary file and leaves the previous file untouched, and
its ``OSError`` names the final path (not the temporary one), so the CLI's one line says
which output failed.

Writers that take a file handle use :func:`open_atomic` (or the typed helpers
:func:`write_text_atomic`, :func:`write_bytes_atomic`, :func:`write_csv`,
:func:`write_parquet`, :func:`write_figure`, :func:`write_npz`); writers that want a file
*name* (GDAL, an external converter such as SUMO's ``netconvert``) write to the name
:func:`atomic_path` yields. No torch, pandas or matplotlib import here: the CLI's checks
import this module before torch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

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
def _naming(path: Path, *temporaries: str) -> Iterator[None]:
    """Let an ``OSError`` about a temporary name (or about no name) name ``path`` instead."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None or str(exc.filename) in temporaries:
            exc.filename = str(path)
        raise


@contextlib.contextmanager
def open_atomic(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Yield a file handle whose content replaces ``path`` only if the block completes."""
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}-", dir=path.parent)
    tmp = Path(name)
    try:
        with _naming(path, name):
            with os.fdopen(handle, mode) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            tmp.chmod(file_mode())
            tmp.replace(path)
            fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary name for ``path``.

    What is written there replaces ``path`` only if the block completes.

    For writers that want a file name rather than a handle (GDAL's GeoPackage, an external
    converter). The name is ``path``'s own name inside a hidden folder beside it, so a
    writer that picks its format by suffix, or leaves side files (a journal), still works;
    the folder and anything left in it are removed whatever happens.
    """
    path = Path(path)
    with _naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{path.name}-", dir=path.parent))
    tmp = folder / path.name
    try:
        with _naming(path, str(tmp), str(folder)):
            yield tmp
            fsync_file(tmp)
            tmp.chmod(file_mode())
            tmp.replace(path)
            fsync_dir(path.parent)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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


def write_csv(frame: Any, path: str | Path, **options: Any) -> Path:
    """Write a pandas ``frame`` as CSV to ``path`` atomically (``options``: ``to_csv``'s)."""
    with open_atomic(path, "w") as fh:
        frame.to_csv(fh, **options)
    return Path(path)


def write_parquet(frame: Any, path: str | Path, **options: Any) -> Path:
    """Write a pandas ``frame`` as Parquet to ``path`` atomically (``to_parquet``'s ``options``)."""
    with open_atomic(path, "wb") as fh:
        frame.to_parquet(fh, **options)
    return Path(path)


def write_figure(fig: Any, path: str | Path, **options: Any) -> Path:
    """Save a matplotlib ``fig`` to ``path`` atomically, in the format its suffix names."""
    path = Path(path)
    with open_atomic(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or None, **options)
    return path


def write_npz(path: str | Path, **arrays: Any) -> Path:
    """Save numpy ``arrays`` as an uncompressed ``.npz`` to ``path`` atomically."""
    import numpy as np

    with open_atomic(path, "wb") as fh:
        np.savez(fh, **arrays)
    return Path(path)


def fsync_file(path: str | Path) -> None:
    """Flush a file another writer closed (a library that wanted a name) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    staging.chmod(dir_mode())
    return staging


def publish(staging: str | Path, out: str | Path) -> list[Path]:
    """Rename every entry of ``staging`` into ``out`` (replacing), then remove ``staging``.

    Each file is fsync'ed first (whoever wrote it), so a renamed name never points at data
    still in the page cache.
    """
    staging, out = Path(staging), Path(out)
    moved = []
    for item in sorted(staging.iterdir()):
        if item.is_file() and not item.is_symlink():
            with _naming(out / item.name, str(item)):
                fsync_file(item)
        target = out / item.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        item.replace(target)
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
