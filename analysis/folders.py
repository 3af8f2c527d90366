"""Output folders every command checks the same way (``run``, ``sweep``, ``bench``, ``reproduce``).

One module below the commands, so each command's module imports it without importing the others
(``tests/project/test_layers.py`` refuses a cycle).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from mobidfl.atomic import TEMP_PREFIX
from mobidfl.errors import ConfigError

__all__ = ["OutputFailed", "check_output_folder", "mib"]


class OutputFailed(Exception):
    """An output could not be written mid-run (e.g. a full disk): what is kept, how to go on."""


def mib(n: float) -> str:
    """``n`` bytes in MiB, one decimal (the unit of every free-space message)."""
    return f"{n / 1024**2:.1f} MiB"


def check_output_folder(out: Path, *, need_bytes: int = 0, option: str = "--out") -> None:
    """Refuse before step 1 an output folder that cannot take the outputs.

    ``out`` (or, when it does not exist yet, its nearest existing parent) must be a folder
    where a file can be created, with about ``need_bytes`` free. Nothing is left behind: the
    probe file is removed, ``out`` itself is not created.
    """
    probe = out
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        where = "this is a file" if probe == out else f"{probe} is a file"
        raise ConfigError(option, str(out), f"a folder ({where})")
    try:
        handle, name = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}probe-", dir=probe)
        os.close(handle)
        Path(name).unlink()
    except OSError as exc:
        raise ConfigError(
            option, str(out), f"a writable folder ({probe}: {exc.strerror or exc})"
        ) from None
    free = shutil.disk_usage(probe).free
    if need_bytes > free:
        raise ConfigError(
            option,
            str(out),
            f"a folder with about {mib(need_bytes)} free for the outputs "
            f"({mib(free)} free on {probe})",
        )
