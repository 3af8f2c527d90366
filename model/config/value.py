"""One value of one setting: its type (coercion) and its check.

A value given as text (``--set``), TOML or a keyword becomes the field's type here
(:func:`_coerce`), and the checks that a field's declaration names but that need the
plug-in registries or the file system (a registered name, an existing folder) live here too.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.plugins import DATASETS, MOBILITY_MODELS
from mobidfl.registry import Registry
from mobidfl.settings import Check, check_value

CONTACT_OUTPUTS: tuple[str, ...] = ("csv", "parquet", "one")
"""Formats of ``contacts_out``: ``contacts.csv``, ``contacts.parquet`` (the contact table,
:data:`model.contacts.CONTACT_COLUMNS`) and ``contacts_one.txt`` (The ONE's connection
events, :func:`mobidfl.model.contacts.one_connection_events`)."""


SEED_MAX = 2**63 - 1
"""Seeds are stored as int64 (manifests, Parquet) and seed numpy and torch."""


def _contact_outputs(value: str) -> str | None:
    """``contacts_out``: auto, none, or a comma list of :data:`CONTACT_OUTPUTS`."""
    parts = [v.strip() for v in value.split(",")]
    if value.strip() in ("auto", "none") or all(p in CONTACT_OUTPUTS for p in parts):
        return None
    return "auto, none, or a comma list of " + ", ".join(CONTACT_OUTPUTS)


def _registered(registry: Registry[Any], *, allow_auto: bool = False) -> Check:
    """Check a name against a plug-in registry (loaded on first use)."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        names = registry.names()
        if allow_auto:
            names = ["auto", *names]
        return None if value in names else registry.choices(names)

    return check


def _dataset_check(value: str | None) -> str | None:
    """A registered data set, or ``auto:A|B|...`` naming registered ones.

    With ``auto:``, the first one present is taken when the config is resolved.
    """
    plain = _registered(DATASETS)
    if value is not None and value.startswith("auto:"):
        bad = [name for name in value[len("auto:") :].split("|") if plain(name) is not None]
        if not value[len("auto:") :] or bad:
            return "auto:A|B with each of " + ", ".join(DATASETS.names())
        return None
    return plain(value)


def _seed_range(value: int) -> str | None:
    """``None`` for a seed in ``[0, SEED_MAX]``, else what is allowed."""
    return None if 0 <= value <= SEED_MAX else f"an integer in [0, {SEED_MAX}] (2**63 - 1)"


def _existing_folder(value: str | None) -> str | None:
    """``None`` for no folder or an existing one, else what is allowed."""
    if value is None or Path(value).expanduser().is_dir():
        return None
    return "an existing folder (or empty for none)"


_EXTRA_CHECKS: dict[str, Check] = {"seed": _seed_range, "data_root": _existing_folder}
"""Checks of settings declared without one (kept here so field declarations stay as they are)."""


def _run_check(name: str, f: dataclasses.Field, value: Any) -> None:
    """Raise one :class:`ConfigError` naming ``name`` when ``value`` breaks ``f``'s check."""
    check_value(name, f, value, extra=_EXTRA_CHECKS.get(name))


def mobility_fit(kind: str, name: str) -> str | None:
    """``None`` when mobility ``name`` declares that it fits ``kind``, else what is allowed."""
    model = MOBILITY_MODELS.get(name)
    if model is None or kind in model.kinds:
        return None
    fits = sorted(n for n, m in MOBILITY_MODELS.items() if kind in m.kinds)
    return f"a mobility model for {kind}s: one of {', '.join(fits)}"


def _is_optional(target: Any) -> bool:
    """Whether ``target`` is a ``X | None`` union."""
    return isinstance(target, types.UnionType) and type(None) in typing.get_args(target)


def _coerce(name: str, target: Any, value: Any) -> Any:
    """``value`` as type ``target``; a value that is not one raises :class:`ConfigError`.

    ``target`` is ``bool``, ``int``, ``float``, ``str``, or one of them ``| None``; the error names
    ``name``.
    """
    if value is None:
        if _is_optional(target):
            return None
        raise ConfigError(name, value, "a value (this setting cannot be empty)")
    if _is_optional(target):
        target = next(t for t in typing.get_args(target) if t is not type(None))
    try:
        if target is bool:
            if isinstance(value, str):
                lowered = value.lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return lowered in ("true", "1", "yes")
            if isinstance(value, bool | int):
                return bool(value)
            raise ValueError(value)
        if target is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            if not isinstance(value, int | float | str) and not hasattr(value, "__index__"):
                raise TypeError(value)
            return int(value)
        if target is float:
            numeric = isinstance(value, str) or hasattr(value, "__float__")
            if isinstance(value, bool) or not numeric:
                raise TypeError(value)
            return float(value)
        if target is str:
            if isinstance(value, os.PathLike):
                return os.fspath(value)
            if not isinstance(value, str):
                raise TypeError(value)
            return value
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(name, value, f"a value of type {target.__name__}") from None
    raise ConfigError(name, value, "a supported value")
