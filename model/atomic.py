"""Kept for existing imports: the implementation is :mod:`mobidfl.atomic` (the ground floor).

``maps/`` and ``agents/`` write through ``mobidfl.atomic``; this name stays for code written
against it.
"""

from mobidfl.atomic import (
    TEMP_PREFIX,
    atomic_path,
    dir_mode,
    file_mode,
    fsync_dir,
    fsync_file,
    open_atomic,
    publish,
    remove_temporaries,
    staging_dir,
    write_bytes_atomic,
    write_csv,
    write_figure,
    write_npz,
    write_parquet,
    write_text_atomic,
)

__all__ = [
    "TEMP_PREFIX",
    "atomic_path",
    "dir_mode",
    "file_mode",
    "fsync_dir",
    "fsync_file",
    "open_atomic",
    "publish",
    "remove_temporaries",
    "staging_dir",
    "write_bytes_atomic",
    "write_csv",
    "write_figure",
    "write_npz",
    "write_parquet",
    "write_text_atomic",
]
