"""The resolution step and :class:`Config`: from the settings a user gave to the config a run uses.

:func:`_updated` makes the given settings explicit, then fills the rest (preset, ``auto:``
data set, what the mobility models declare), checks what the policies require, validates
(:func:`~mobidfl.model.config.checks.validated`) and warns about inert settings. :class:`Config`
is :class:`~mobidfl.model.config.fields.ConfigFields` with the entry points that do this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config.checks import validated
from mobidfl.model.config.fields import (
    ConfigFields,
    KindSettings,
    PluginValues,
    Provenance,
    _plugin_namespaces,
    _registered_plugins,
)
from mobidfl.model.config.inert import _warn_inert
from mobidfl.model.config.names import (
    _canonical,
    _display_name,
    _field_type,
    _is_old_name,
    _split_name,
    _warn_old_name,
    check_one_name_each,
    flatten,
    old_names,
    parse_assignments,
    public_names,
)
from mobidfl.model.config.toml_files import (
    _preset_settings,
    _resolve_auto_dataset,
    _to_dict,
    _to_toml,
    read_toml,
)
from mobidfl.model.config.value import _coerce
from mobidfl.plugins import MOBILITY_MODELS, POLICIES
from mobidfl.settings import KINDS

_SOURCE_USER = "user"
"""Origin of an explicit setting (``--set``, a TOML file, a keyword argument)."""


def _get_setting(config: ConfigFields, name: str) -> Any:
    """The value of the setting with public name ``name``."""
    owner, _, attr = name.rpartition(".")
    if not owner:
        return getattr(config, attr)
    holder = getattr(config, owner) if owner in KINDS else config.plugins[owner]
    return getattr(holder, attr)


def _replaced[C: ConfigFields](config: C, flat: Mapping[str, Any]) -> C:
    """Copy of ``config`` with settings replaced by any of their names.

    The values are coerced, not validated; the provenance is kept.
    """
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        owner, attr = _split_name(name)
        if owner is None:
            top[attr] = _coerce(attr, _field_type(ConfigFields, attr), value)
        else:
            holder = KindSettings if owner in KINDS else _plugin_namespaces()[owner]
            nested.setdefault(owner, {})[attr] = _coerce(
                name, _field_type(holder, attr), value
            )
    plugins = _registered_plugins(config)
    for owner, changes in nested.items():
        if owner in KINDS:
            top[owner] = replace(getattr(config, owner), **changes)
        else:
            plugins[owner] = replace(plugins[owner], **changes)
    if any(o not in KINDS for o in nested) or list(plugins) != list(config.plugins):
        top["plugins"] = PluginValues(tuple(plugins.items()))
    return replace(config, **top)


def _updated[C: ConfigFields](config: C, given: Iterable[tuple[str, Any]]) -> C:
    """``config`` with the settings ``given`` made explicit, then resolved and checked.

    ``given`` is ``(name, value)`` pairs under any names, put on top of the ones ``config`` was
    given before; the result is resolved, validated and checked for inert settings
    (:func:`_warn_inert`).
    """
    given = list(given)
    check_one_name_each(given)
    flat = {_canonical(n): v for n, v in given}
    for name in dict.fromkeys(n for n, _ in given if _is_old_name(n)):
        _warn_old_name(name)
    before = config.provenance
    spelling = {**before.spelling, **{_canonical(n): n for n, _ in given}}
    explicit = {**before.explicit, **flat}
    stale = {n for n in before.origin if n not in explicit}
    defaults = type(config)()
    reset = {n: _get_setting(defaults, n) for n in stale}
    config = _replaced(_replaced(config, reset), flat)
    config = replace(config, provenance=Provenance(spelling=spelling))
    return _warn_inert(validated(_resolve(config, explicit)))


def _resolve[C: ConfigFields](config: C, explicit: Mapping[str, Any]) -> C:
    """Fill non-explicit settings from the preset, auto datasets and mobility declarations.

    Then check what the policies require (never filled: a policy never changes the world).
    """
    origin: dict[str, str] = {}
    if config.preset:
        preset = {_canonical(n): v for n, v in _preset_settings(config.preset).items()}
        fill = {n: v for n, v in preset.items() if n not in explicit}
        config = _replaced(config, fill)
        origin.update(dict.fromkeys(fill, f"preset {config.preset}"))
    if config.dataset.startswith("auto:"):
        choice = config.dataset
        config = _replaced(config, {"dataset": _resolve_auto_dataset(choice, config.data_root)})
        if "dataset" not in explicit:
            origin["dataset"] = f"default {choice} (the first one installed)"
    for _ in range(8):  # a declaration may bring a mobility model that declares more
        changed = False
        for name, value, why, strict in _mobility_declarations(config):
            current = _get_setting(config, name)
            if current == value:
                continue
            if name in explicit:
                if strict:
                    raise ConfigError(
                        _display_name(config, name), current,
                        f"{value!r} (required by {why})",
                    )
                continue
            config = _replaced(config, {name: value})
            origin[name] = why
            changed = True
        if not changed:
            break
    for name, value, why in policy_requirements(config):
        current = _get_setting(config, name)
        if current != value:
            raise ConfigError(
                _display_name(config, name), current,
                f"{value!r}, which {why} needs (a policy never changes the world: set it, "
                "or use the preset that does)",
            )
    provenance = Provenance(
        explicit=dict(explicit), spelling=config.provenance.spelling, origin=origin
    )
    return replace(config, provenance=provenance)


def _origins(config: ConfigFields) -> dict[str, str]:
    """Every setting not at its default -> where its value came from.

    ``user`` (given explicitly), ``preset NAME``, ``default auto:...`` (an ``auto:`` dataset
    resolved to the first one present) or the mobility model that declared it (``uav.mobility =
    NAME``), in the settings reference's order. Never a policy: a policy never changes the world.
    """
    explicit, origin = config.provenance.explicit, config.provenance.origin
    defaults = type(config)()
    out: dict[str, str] = {}
    for name in public_names():
        if _get_setting(config, name) == _get_setting(defaults, name):
            continue
        out[name] = _SOURCE_USER if name in explicit else origin.get(name, _SOURCE_USER)
    return out


def declared_settings(config: ConfigFields) -> list[tuple[str, Any, str, bool]]:
    """The requirements and defaults of the mobility models and policies in use.

    ``(setting, value, why, strict)`` declared by the mobility models in use, then the requirements
    of the policies in use (``strict``, never applied).

    A mobility model (``mobidfl.agents.mobility``) is part of the world and may set ``requires``
    (strict: an explicit contrary value is an error) and ``defaults`` (applied only where
    the user said nothing). A policy (``mobidfl.model.policies``) may only set ``requires``: what it
    cannot run without, which :func:`_resolve` checks but never applies, because a policy
    never changes the world (swapping it leaves map, mobility, radius, data and model as they
    were; what a paper pairs with its system lives in that paper's preset). Keys are setting
    names (namespaced or old flat names), ``{kind}`` standing for the agent kind; values are a
    value or a function ``f(config, kind)`` (``None`` = nothing to declare). Kinds with no
    agents declare nothing.
    """
    return [*_mobility_declarations(config), *(
        (name, value, why, True) for name, value, why in policy_requirements(config)
    )]


def _mobility_declarations(config: ConfigFields) -> list[tuple[str, Any, str, bool]]:
    out: list[tuple[str, Any, str, bool]] = []
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        mobility = config.kind(kind).mobility
        cls = MOBILITY_MODELS.get(mobility)
        for strict, attr in ((True, "requires"), (False, "defaults")):
            for name, value in (getattr(cls, attr, None) or {}).items():
                resolved = value(config, kind) if callable(value) else value
                if resolved is not None:
                    why = f"{kind}.mobility = {mobility}"
                    out.append((_canonical(name.format(kind=kind)), resolved, why, strict))
    return out


def policy_requirements(config: ConfigFields) -> list[tuple[str, Any, str]]:
    """``(setting, value, why)``: what the policies in use cannot run without (their ``requires``).

    A policy class that declares ``defaults`` is refused: a policy never changes the world, so the
    settings its paper pairs with it belong in that paper's preset (``model/presets``).
    """
    out: list[tuple[str, Any, str]] = []
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        policy = config.policy_of(kind)
        cls = POLICIES.get(policy)
        if getattr(cls, "defaults", None):
            raise ConfigError(
                f"policy {policy}.defaults", dict(cls.defaults),  # type: ignore[union-attr]
                "none: a policy never changes the world (put what its paper pairs with it "
                "in that paper's preset; keep in `requires` only what it cannot run without)",
            )
        for name, value in (getattr(cls, "requires", None) or {}).items():
            resolved = value(config, kind) if callable(value) else value
            if resolved is not None:
                why = f"the {kind} policy {policy}"
                out.append((_canonical(name.format(kind=kind)), resolved, why))
    return out


_INIT_FIELDS = frozenset(f.name for f in fields(ConfigFields))


class Config(ConfigFields):
    """All settings of one run (the fields of :class:`~mobidfl.model.config.ConfigFields`).

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
            for name in filter(_is_old_name, other):
                _warn_old_name(name)
            built = _replaced(ConfigFields(**own), other)
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
            _warn_old_name(name)
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
        setting is filled by the resolution step (:func:`_updated`: preset, auto
        data set, mobility declarations; a policy fills nothing). ``explicit_settings()``,
        ``derived_settings()`` and ``setting_origins()`` tell which is which.
        """
        given = [*flatten(settings or {}), *flatten(kw)]
        return _updated(self, given)

    def validated(self) -> Config:
        """The config itself when every setting passes its check and the settings agree."""
        return validated(self)

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
        return _origins(self)

    def display_name(self, name: str) -> str:
        """How messages name setting ``name``: as the user wrote it (an old flat name too)."""
        return _display_name(self, name)

    def setting(self, name: str) -> Any:
        """The value of one public setting by name.

        The name may be ``vehicle.mobility``, ``psfl.sigma``, ``lr`` or an old flat name such as
        ``psfl_sigma``.
        """
        return _get_setting(self, _canonical(name))

    # --- output -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Nested dict of every setting (kinds and plug-in namespaces as tables).

        ``None`` values are left out.
        """
        return _to_dict(self)

    def to_toml(self) -> str:
        """Every setting as TOML text; :meth:`from_toml` reads it back to an equal config."""
        return _to_toml(self)


def canonical_name(name: str) -> str:
    """The public name of setting ``name``; unknown names raise :class:`ConfigError`.

    E.g. ``psfl_sigma`` -> ``psfl.sigma``, ``vehicle_mobility`` -> ``vehicle.mobility``.
    """
    return _canonical(name)
