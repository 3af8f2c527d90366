"""A config as a TOML file and back, and the paper presets (one TOML file per paper).

A config is written whole (every setting, :func:`_to_toml`) and read back to an equal one;
a preset (``model/presets/*.toml``) fills what the user did not give when a config is
resolved, and an ``auto:`` data set is decided by what is installed (:func:`dataset_present`).
"""

from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError, DatasetDamaged, DatasetUnavailable
from mobidfl.model.config.fields import ConfigFields, KindSettings, PluginValues, _setting_fields
from mobidfl.model.config.names import flatten, warn_old_names
from mobidfl.plugins import DATASET_CHECKS, DATASETS
from mobidfl.toml_text import toml_value


def read_toml(path: str | Path, *, source: str) -> dict[str, Any]:
    """Parse a TOML file; any unreadable file is one :class:`ConfigError` naming ``source``."""
    try:
        with Path(path).open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(source, str(path), "an existing TOML file") from None
    except IsADirectoryError:
        raise ConfigError(source, str(path), "a TOML file (this is a folder)") from None
    except UnicodeDecodeError:
        raise ConfigError(source, str(path), "a UTF-8 TOML text file (this is binary)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, str(path), f"valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(source, str(path), f"a readable TOML file ({exc.strerror})") from None


def _to_dict(config: ConfigFields) -> dict[str, Any]:
    """Nested dict of every setting (kinds and plug-in namespaces as tables).

    ``None`` values are left out.
    """
    out: dict[str, Any] = {}
    for f in _setting_fields():
        value = getattr(config, f.name)
        if isinstance(value, PluginValues):
            for namespace, own in value.items():
                out[namespace] = {
                    k: v for k, v in dataclasses.asdict(own).items() if v is not None
                }
        elif isinstance(value, KindSettings):
            out[f.name] = {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
        elif value is not None:
            out[f.name] = value
    return out


def _to_toml(config: ConfigFields) -> str:
    """Every setting as TOML text: the scalars first, then one table per kind and namespace."""
    scalars, tables = [], []
    for key, value in _to_dict(config).items():
        if isinstance(value, dict):
            tables.append(f"\n[{key}]")
            tables.extend(f"{k} = {toml_value(v)}" for k, v in value.items())
        else:
            scalars.append(f"{key} = {toml_value(value)}")
    return "\n".join(scalars + tables) + "\n"


_PRESETS = resources.files("mobidfl.model").joinpath("presets")
"""The shipped presets (package data of :mod:`mobidfl.model`)."""


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
    files = _PRESETS.iterdir()
    return sorted(f.name[: -len(".toml")] for f in files if f.name.endswith(".toml"))


@functools.cache
def load_preset(name: str) -> Preset:
    """Read one preset.

    Its names are checked, as every setting's, when a config applies it
    (the resolution step, :func:`_updated`).

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
    text = _PRESETS.joinpath(f"{name}.toml").read_text()
    data = tomllib.loads(text)
    about = data.pop("about", {})
    flat = dict(flatten(data))
    warn_old_names(flat)
    if "preset" in flat:
        raise ConfigError("preset", name, "a preset file without a `preset` key")
    return Preset(
        name=name,
        description=str(about.get("description", "")),
        paper=str(about.get("paper", "")),
        substitutes=str(about.get("substitutes", "")),
        settings=flat,
    )


def _preset_settings(name: str) -> dict[str, Any]:
    """The preset's settings by the names its file uses (a copy)."""
    return dict(load_preset(name).settings)


def _resolve_auto_dataset(spec: str, data_root: str | None) -> str:
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
