"""Checkpoints that cannot execute code: ``torch.load(..., weights_only=True)`` reads them.

State dicts may hold numpy arrays (mobility, contacts, records); the weights-only
unpickler accepts tensors and plain Python values only, so arrays are wrapped as tagged
tensors (numbers) or lists (strings) on save and unwrapped on load. Files are written to a
temporary name and renamed, so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

_ARRAY, _STRINGS = "__ndarray__", "__strarray__"


def encode(obj: Any) -> Any:
    """numpy arrays -> tagged tensors/lists, recursively (tensors and scalars pass through)."""
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "US":
            return {_STRINGS: obj.tolist()}
        if obj.dtype == object:
            return {_STRINGS: [str(v) for v in obj.tolist()]}
        return {_ARRAY: torch.from_numpy(np.ascontiguousarray(obj))}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {_plain(key): encode(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(encode(value) for value in obj)
    return obj


def decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if _ARRAY in obj and len(obj) == 1:
            return obj[_ARRAY].numpy()
        if _STRINGS in obj and len(obj) == 1:
            return np.array(obj[_STRINGS], dtype=str)
        return {key: decode(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(decode(value) for value in obj)
    return obj


def save_atomic(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` via a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".pt", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as fh:
            torch.save(encode(state), fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load(path: str | Path) -> dict[str, Any]:
    return decode(torch.load(path, weights_only=True, map_location="cpu"))


def _plain(key: Any) -> Any:
    return key.item() if isinstance(key, np.generic) else key
