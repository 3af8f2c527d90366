"""Checkpoints that cannot execute code: ``torch.load(..., weights_only=True)`` reads them.

State dicts may hold numpy arrays (mobility, contacts, records); the weights-only
unpickler accepts tensors and plain Python values only, so arrays are wrapped as tagged
tensors (numbers) or lists (strings) on save and unwrapped on load. Files are written by
:mod:`mobidfl.atomic`, so a crash or a full disk never leaves a half-written checkpoint.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mobidfl.atomic import open_atomic
from mobidfl.errors import ConfigError

_ARRAY, _STRINGS = "__ndarray__", "__strarray__"


def encode(obj: Any) -> Any:
    """Turn numpy arrays into tagged tensors/lists, recursively (tensors, scalars pass through)."""
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
    """Undo :func:`encode`: tagged tensors/lists back to numpy arrays, recursively."""
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
    """Write ``state`` to ``path`` atomically: the previous file stays until this one is whole.

    A full disk or a kill while writing leaves the previous checkpoint in place (the
    temporary file is removed, or is a hidden ``.mobidfl-*`` name the next run clears).
    """
    with open_atomic(path, "wb") as fh:
        torch.save(encode(state), fh)
    return Path(path)


def load(path: str | Path, *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """Read a checkpoint; a file that is not one raises one-line :class:`ConfigError`.

    Empty, truncated, foreign and malicious files (anything the weights-only unpickler
    refuses) are all reported as the file, never with torch's advice to drop weights_only.
    ``required``: top-level keys the file must hold (e.g. a run's ``steps``).
    """
    path = Path(path)
    allowed = "a complete state.pt written by `mobidfl run --checkpoint-every`"
    if not path.is_file():
        raise ConfigError("checkpoint file", str(path), f"{allowed} (it is missing)")
    if path.stat().st_size == 0:
        raise ConfigError("checkpoint file", str(path), f"{allowed} (this one is empty)")
    try:
        raw = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError:
        raise ConfigError(
            "checkpoint file", str(path), f"{allowed} (this one holds objects other than "
            "tensors and plain values; it was refused unread)"
        ) from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, AttributeError):
        raise ConfigError(
            "checkpoint file", str(path), f"{allowed} (this one is truncated or not a checkpoint)"
        ) from None
    if not isinstance(raw, dict) or any(key not in raw for key in required):
        raise ConfigError(
            "checkpoint file", str(path), f"{allowed} (this one is some other torch file)"
        )
    return decode(raw)


def config_unchanged(saved_sha: str, path: str | Path, rendered: str) -> bool:
    """Whether the config file at ``path`` is the one a checkpoint recorded as ``saved_sha``.

    ``saved_sha`` is the sha-256 of the text written next to the checkpoint.

    Either its bytes are those written (whatever MobiDFL version wrote them: a newer
    version renders the same settings as a different text, which is no edit), or the
    settings read from it, rendered by this version (``rendered``), are: a file re-saved
    with the same settings is no edit either. Anything else was edited after.
    """
    on_disk = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return saved_sha in (on_disk, hashlib.sha256(rendered.encode()).hexdigest())


def _plain(key: Any) -> Any:
    return key.item() if isinstance(key, np.generic) else key
