"""The one typed, validated run configuration.

:class:`Config` is plain data (the fields of :class:`mobidfl.model.config_fields.ConfigFields`, one
per public setting) plus the entry points that build it: :meth:`Config.from_settings`,
:meth:`Config.from_toml`, :meth:`Config.updated`. Each passes what was given through one
explicit resolution step (:func:`mobidfl.model.config_resolve.updated`): names, preset, auto data
set, what the mobility models declare, what the policies require, then every check.

The same names work as ``--set name=value`` on the command line, as keys in a TOML file, as
keyword arguments of :class:`mobidfl.model.world.MobiDFLModel` (so ``mesa.batch_run`` can sweep
them) and as rows of the settings reference (docs/reference/settings.md). Per-kind settings
are dotted (``vehicle.mobility``); each policy, mobility model and link model owns its
settings (``psfl.sigma``); old flat names (``psfl_sigma``) stay accepted through one table
(:func:`mobidfl.model.config_names.old_names`).

The parts, one job each: :mod:`mobidfl.model.config_fields` (the fields),
:mod:`mobidfl.model.config_values` (one value: type and check), :mod:`mobidfl.model.config_names`
(names and parsing),
:mod:`mobidfl.model.config_checks` (the whole-config checks), :mod:`mobidfl.model.config_resolve`
(the resolution step), :mod:`mobidfl.model.config_io` (TOML). Their public names are re-exported
here.

A bad value fails at once with :class:`mobidfl.errors.ConfigError`, whose one-line message
names the setting (as it was written), the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from mobidfl.kinds import AGENT_KINDS, COUNT_SETTING, KIND_POLICY, KINDS, AgentKind
from mobidfl.model import config_checks, config_io, config_names, config_resolve
from mobidfl.model.config_checks import check_setting
from mobidfl.model.config_fields import (
    ConfigFields,
    KindSettings,
    PluginValues,
    Provenance,
    plugin_namespaces,
)
from mobidfl.model.config_io import read_toml
from mobidfl.model.config_names import (
    PAPER_WORDS,
    UnknownSetting,
    check_one_name_each,
    old_names,
    parse_assignments,
    parse_value,
    public_names,
    settings_table,
)
from mobidfl.model.config_resolve import SOURCE_USER, declared_settings, policy_requirements
from mobidfl.model.config_values import (
    CONTACT_OUTPUTS,
    SEED_MAX,
    existing_folder,
    mobility_fit,
    seed_range,
    usable_cores,
)

__all__ = [
    "AGENT_KINDS",
    "CONTACT_OUTPUTS",
    "COUNT_SETTING",
    "KINDS",
    "KIND_POLICY",
    "PAPER_WORDS",
    "SEED_MAX",
    "SOURCE_USER",
    "AgentKind",
    "Config",
    "KindSettings",
    "PluginValues",
    "Provenance",
    "UnknownSetting",
    "canonical_name",
    "check_one_name_each",
    "check_setting",
    "declared_settings",
    "existing_folder",
    "mobility_fit",
    "old_names",
    "parse_assignments",
    "parse_value",
    "plugin_namespaces",
    "policy_requirements",
    "public_names",
    "read_toml",
    "seed_range",
    "settings_table",
    "usable_cores",
]

_INIT_FIELDS = frozenset(f.name for f in fields(ConfigFields))


class Config(ConfigFields):
    """All settings of one run (the fields of :class:`~mobidfl.model.config_fields.ConfigFields`).

    ``Config(...)`` builds one directly: it also takes plug-in settings (old flat or
    namespaced names, ``Config(rm_cells=2.0)``) and underscored per-kind names, coerced but,
    like every field given directly, neither resolved nor validated. A run's config comes
    from :meth:`from_settings`, :meth:`from_toml` or :meth:`updated`, which resolve and
    validate.

    Parameters
    ----------
    settings
        Setting values by name: fields, per-kind tables, plug-in settings (namespaced or
        their old flat names).

    Raises
    ------
    ConfigError
        A name that is no setting (with the closest names) or a value of the wrong type.
    """

    def __init__(self, **settings: Any) -> None:
        own = {k: v for k, v in settings.items() if k in _INIT_FIELDS}
        other = {k: v for k, v in settings.items() if k not in _INIT_FIELDS}
        if other:
            built = config_resolve.replaced(ConfigFields(**own), other)
            own = {f.name: getattr(built, f.name) for f in fields(built)}
        super().__init__(**own)

    def __getattr__(self, name: str) -> Any:
        """A plug-in namespace or a plug-in setting by its old flat name.

        ``config.psfl.sigma`` reads the namespace, ``config.psfl_sigma`` the old flat name.
        """
        plugins = self.__dict__.get("plugins")
        if name.startswith("_") or plugins is None:
            raise AttributeError(name)
        if name in plugins:
            return plugins[name]
        namespace, _, attr = old_names().get(name, "").rpartition(".")
        if namespace in plugins:
            return getattr(plugins[namespace], attr)
        raise AttributeError(f"'Config' object has no attribute {name!r}")

    # --- construction: the resolution step --------------------------------------------
    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Build a validated config from public names (dotted, nested tables or kwargs)."""
        return cls().updated(settings, **kw)

    @classmethod
    def from_toml(
        cls, path: str | Path, overrides: Iterable[str] = (), *, source: str = "--config"
    ) -> Config:
        """Read a TOML file; ``source`` is how errors name the file (``--config``, ...)."""
        data = read_toml(path, source=source)
        return cls.from_settings(data).with_overrides(overrides)

    def with_overrides(self, assignments: Iterable[str]) -> Config:
        """Apply ``name=value`` strings (as typed on the command line)."""
        return self.updated(parse_assignments(assignments))

    def updated(self, settings: Mapping[str, Any] | None = None, /, **kw: Any) -> Config:
        """Return a copy with public settings replaced, resolved, then validated.

        The settings given here and in earlier ``updated`` calls are *explicit*; every other
        setting is filled by the resolution step (:mod:`mobidfl.model.config_resolve`: preset, auto
        data set, mobility declarations; a policy fills nothing). ``explicit_settings()``,
        ``derived_settings()`` and ``setting_origins()`` tell which is which.
        """
        given = [*config_names.flatten(settings or {}), *config_names.flatten(kw)]
        return config_resolve.updated(self, given)

    def validated(self) -> Config:
        """The config itself when every setting passes its check and the settings agree."""
        return config_checks.validated(self)

    # --- provenance -------------------------------------------------------------------
    def explicit_settings(self) -> dict[str, Any]:
        """Settings given explicitly (``--set``, TOML, keyword arguments), by public name."""
        return dict(self.provenance.explicit)

    def derived_settings(self) -> frozenset[str]:
        """Settings filled by the preset, an ``auto:`` data set or a mobility model."""
        return frozenset(self.provenance.origin)

    def setting_origins(self) -> dict[str, str]:
        """Every setting not at its default -> where its value came from.

        ``user`` (given explicitly), ``preset NAME``, an ``auto:`` data set's choice, or the
        mobility model that declared it (``uav.mobility = NAME``), in the settings reference's
        order.

        WHY: a run's first line names what differs from the defaults and who chose it, so a
        changed world is never silent (a policy never changes it, see
        :func:`policy_requirements`).
        """
        return config_resolve.origins(self)

    def display_name(self, name: str) -> str:
        """How messages name setting ``name``: as the user wrote it (an old flat name too)."""
        return config_names.display_name(self, name)

    def setting(self, name: str) -> Any:
        """The value of one public setting by name.

        The name may be ``vehicle.mobility``, ``psfl.sigma``, ``lr`` or an old flat name such as
        ``psfl_sigma``.
        """
        return config_resolve.get_setting(self, config_names.canonical(name))

    # --- output -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested dict of every setting (kinds and plug-in namespaces as tables).

        ``None`` values are left out.
        """
        return config_io.to_dict(self)

    def to_toml(self) -> str:
        """Every setting as TOML text; :meth:`from_toml` reads it back to an equal config."""
        return config_io.to_toml(self)


def canonical_name(name: str) -> str:
    """The public name of setting ``name``; unknown names raise :class:`ConfigError`.

    E.g. ``psfl_sigma`` -> ``psfl.sigma``, ``vehicle_mobility`` -> ``vehicle.mobility``.
    """
    return config_names.canonical(name)
