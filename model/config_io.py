"""A config as a TOML file and back: read a file whole, write every setting.

The written file (``config.toml`` beside a run's outputs) holds every setting by its public
name, kinds and plug-in namespaces as tables, so reading it back gives an equal config.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config_fields import ConfigFields, KindSettings, PluginValues, setting_fields
from mobidfl.toml_text import toml_value

__all__ = ["read_toml", "to_dict", "to_toml", "toml_value"]


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


def to_dict(config: ConfigFields) -> dict[str, Any]:
    """Nested dict of every setting (kinds and plug-in namespaces as tables).

    ``None`` values are left out.
    """
    out: dict[str, Any] = {}
    for f in setting_fields():
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


def to_toml(config: ConfigFields) -> str:
    """Every setting as TOML text: the scalars first, then one table per kind and namespace."""
    scalars, tables = [], []
    for key, value in to_dict(config).items():
        if isinstance(value, dict):
            tables.append(f"\n[{key}]")
            tables.extend(f"{k} = {toml_value(v)}" for k, v in value.items())
        else:
            scalars.append(f"{key} = {toml_value(value)}")
    return "\n".join(scalars + tables) + "\n"
