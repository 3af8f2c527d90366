"""Paper presets: one TOML file per seed paper's headline experiment (``mobidfl presets``).

A preset fills every setting the user did not give explicitly (``--preset NAME``,
``preset = "NAME"`` in a TOML config, or the ``preset`` keyword). Each file has an
``[about]`` table (``description``, ``paper``, ``substitutes``) and the settings, each
commented with its source (paper section / table or the authors' code as described in
``shared/notes/stack.md``). Datasets that cannot be had offline are written
``auto:REAL|SUBSTITUTE``: the real one is used when its files are under ``data_root``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError, DatasetDamaged, DatasetUnavailable
from mobidfl.plugins import DATASET_CHECKS, DATASETS

__all__ = ["Preset", "preset_names", "load_preset", "preset_settings", "resolve_auto_dataset"]


@dataclass(frozen=True)
class Preset:
    """A paper preset: its name, one-line description, paper and flat settings."""

    name: str
    description: str
    paper: str
    substitutes: str
    settings: dict[str, Any]


def preset_names() -> list[str]:
    """Names of the presets shipped in this package, sorted.

    Returns
    -------
    list[str]
        The names ``load_preset`` and ``--preset`` accept.
    """
    files = resources.files(__package__).iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


@functools.cache
def load_preset(name: str) -> Preset:
    """Read one preset.

    Its names are checked, as every setting's, when a config applies it
    (:class:`mobidfl.model.config.Config`, which imports this module, not the reverse).

    Parameters
    ----------
    name
        One of :func:`preset_names` (``cached_dfl_003``).

    Returns
    -------
    Preset
        Its description, paper, stand-ins and flat settings (public names).

    Raises
    ------
    ConfigError
        ``name`` is not a shipped preset, or the file sets ``preset`` itself.
    """
    if name not in preset_names():
        raise ConfigError("preset", name, "one of " + ", ".join(preset_names()))
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text()
    data = tomllib.loads(text)
    about = data.pop("about", {})
    flat = dict(_flatten(data))
    if "preset" in flat:
        raise ConfigError("preset", name, "a preset file without a `preset` key")
    return Preset(
        name=name,
        description=str(about.get("description", "")),
        paper=str(about.get("paper", "")),
        substitutes=str(about.get("substitutes", "")),
        settings=flat,
    )


def preset_settings(name: str) -> dict[str, Any]:
    """The preset's settings by the names its file uses (a copy)."""
    return dict(load_preset(name).settings)


def resolve_auto_dataset(spec: str, data_root: str | None) -> str:
    """``auto:A|B|C`` -> the first dataset whose files are present (the last one otherwise).

    The last name should be an offline dataset (``mnist5k``), the paper's substitute.
    """
    names = [n.strip() for n in spec.removeprefix("auto:").split("|") if n.strip()]
    if not names or any(n not in DATASETS for n in names):
        allowed = "auto:NAME|NAME|... with names in " + ", ".join(DATASETS)
        raise ConfigError("dataset", spec, allowed)
    for name in names[:-1]:
        if dataset_present(name, data_root):
            return name
    return names[-1]


@functools.cache
def dataset_present(name: str, data_root: str | None) -> bool:
    """Whether ``name`` loads from ``data_root`` (or the system) on this machine.

    Files that are there but damaged raise :class:`DatasetDamaged` (one line): an ``auto:``
    dataset never falls back silently past a broken copy of the set it asked for first.
    """
    root = None if data_root is None else Path(data_root).expanduser()
    try:
        if name in DATASET_CHECKS:  # the files alone: a world without learning needs no torch
            DATASET_CHECKS.lookup(name)(root)
        else:
            DATASETS.lookup(name)(root, 1, 0)  # the registered loader: (root, test_size, seed)
    except DatasetDamaged:
        raise
    except (DatasetUnavailable, ConfigError, OSError, RuntimeError):
        return False
    return True


def _flatten(data: Mapping[str, Any], prefix: str = ""):
    for key, value in data.items():
        if isinstance(value, Mapping):
            yield from _flatten(value, prefix=f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
