"""The resolution step: from the settings a user gave to the config a run uses.

The settings given (``--set``, a TOML file, keyword arguments) are *explicit*. Every other
setting is filled, in this order, from the ``preset`` (:mod:`mobidfl.model.presets`), from an
``auto:A|B`` dataset (the first one present), and from what the chosen mobility models
declare (``requires`` / ``defaults`` class attributes). A policy fills nothing (it never
changes the world): what it ``requires`` is checked, and a world without it is refused with
one line naming the setting. The result records what was explicit, how each name was
written and who filled the rest (:class:`mobidfl.model.config_fields.Provenance`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.kinds import KINDS
from mobidfl.model import config_names as names
from mobidfl.model.config_checks import validated
from mobidfl.model.config_fields import (
    ConfigFields,
    KindSettings,
    PluginValues,
    Provenance,
    plugin_namespaces,
    registered_plugins,
)
from mobidfl.model.config_values import coerce
from mobidfl.model.inert import warn_inert
from mobidfl.plugins import MOBILITY_MODELS, POLICIES

__all__ = [
    "SOURCE_USER",
    "declared_settings",
    "get_setting",
    "origins",
    "policy_requirements",
    "replaced",
    "resolve",
    "updated",
]

SOURCE_USER = "user"
"""Origin of an explicit setting (``--set``, a TOML file, a keyword argument)."""


def get_setting(config: ConfigFields, name: str) -> Any:
    """The value of the setting with public name ``name``."""
    owner, _, attr = name.rpartition(".")
    if not owner:
        return getattr(config, attr)
    holder = getattr(config, owner) if owner in KINDS else config.plugins[owner]
    return getattr(holder, attr)


def replaced[C: ConfigFields](config: C, flat: Mapping[str, Any]) -> C:
    """Copy of ``config`` with settings replaced by any of their names.

    The values are coerced, not validated; the provenance is kept.
    """
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        owner, attr = names.split_name(name)
        if owner is None:
            top[attr] = coerce(attr, names.field_type(ConfigFields, attr), value)
        else:
            owner_type = KindSettings if owner in KINDS else plugin_namespaces()[owner]
            nested.setdefault(owner, {})[attr] = coerce(
                name, names.field_type(owner_type, attr), value
            )
    plugins = registered_plugins(config)
    for owner, changes in nested.items():
        if owner in KINDS:
            top[owner] = replace(getattr(config, owner), **changes)
        else:
            plugins[owner] = replace(plugins[owner], **changes)
    if any(o not in KINDS for o in nested) or list(plugins) != list(config.plugins):
        top["plugins"] = PluginValues(tuple(plugins.items()))
    return replace(config, **top)


def updated[C: ConfigFields](config: C, given: Iterable[tuple[str, Any]]) -> C:
    """``config`` with the settings ``given`` made explicit, then resolved and checked.

    ``given`` is ``(name, value)`` pairs under any names, put on top of the ones ``config`` was
    given before; the result is resolved, validated and checked for inert settings
    (:func:`mobidfl.model.inert.warn_inert`).
    """
    given = list(given)
    names.check_one_name_each(given)
    flat = {names.canonical(n): v for n, v in given}
    before = config.provenance
    spelling = {**before.spelling, **{names.canonical(n): n for n, _ in given}}
    explicit = {**before.explicit, **flat}
    stale = {n for n in before.origin if n not in explicit}
    defaults = type(config)()
    reset = {n: get_setting(defaults, n) for n in stale}
    config = replaced(replaced(config, reset), flat)
    config = replace(config, provenance=Provenance(spelling=spelling))
    return warn_inert(validated(resolve(config, explicit)))


def resolve[C: ConfigFields](config: C, explicit: Mapping[str, Any]) -> C:
    """Fill non-explicit settings from the preset, auto datasets and mobility declarations.

    Then check what the policies require (never filled: a policy never changes the world).
    """
    origin: dict[str, str] = {}
    if config.preset:
        from mobidfl.model.presets import preset_settings

        preset = {names.canonical(n): v for n, v in preset_settings(config.preset).items()}
        fill = {n: v for n, v in preset.items() if n not in explicit}
        config = replaced(config, fill)
        origin.update(dict.fromkeys(fill, f"preset {config.preset}"))
    if config.dataset.startswith("auto:"):
        from mobidfl.model.presets import resolve_auto_dataset

        choice = config.dataset
        config = replaced(config, {"dataset": resolve_auto_dataset(choice, config.data_root)})
        if "dataset" not in explicit:
            origin["dataset"] = f"default {choice} (the first one installed)"
    for _ in range(8):  # a declaration may bring a mobility model that declares more
        changed = False
        for name, value, why, strict in _mobility_declarations(config):
            current = get_setting(config, name)
            if current == value:
                continue
            if name in explicit:
                if strict:
                    raise ConfigError(
                        names.display_name(config, name), current,
                        f"{value!r} (required by {why})",
                    )
                continue
            config = replaced(config, {name: value})
            origin[name] = why
            changed = True
        if not changed:
            break
    for name, value, why in policy_requirements(config):
        current = get_setting(config, name)
        if current != value:
            raise ConfigError(
                names.display_name(config, name), current,
                f"{value!r}, which {why} needs (a policy never changes the world: set it, "
                "or use the preset that does)",
            )
    provenance = Provenance(
        explicit=dict(explicit), spelling=config.provenance.spelling, origin=origin
    )
    return replace(config, provenance=provenance)


def origins(config: ConfigFields) -> dict[str, str]:
    """Every setting not at its default -> where its value came from.

    ``user`` (given explicitly), ``preset NAME``, ``default auto:...`` (an ``auto:`` dataset
    resolved to the first one present) or the mobility model that declared it (``uav.mobility =
    NAME``), in the settings reference's order. Never a policy: a policy never changes the world.
    """
    explicit, origin = config.provenance.explicit, config.provenance.origin
    defaults = type(config)()
    out: dict[str, str] = {}
    for name in names.public_names():
        if get_setting(config, name) == get_setting(defaults, name):
            continue
        out[name] = SOURCE_USER if name in explicit else origin.get(name, SOURCE_USER)
    return out


def declared_settings(config: ConfigFields) -> list[tuple[str, Any, str, bool]]:
    """The requirements and defaults of the mobility models and policies in use.

    ``(setting, value, why, strict)`` declared by the mobility models in use, then the requirements
    of the policies in use (``strict``, never applied).

    A mobility model (``mobidfl.agents.mobility``) is part of the world and may set ``requires``
    (strict: an explicit contrary value is an error) and ``defaults`` (applied only where
    the user said nothing). A policy (``mobidfl.model.policies``) may only set ``requires``: what it
    cannot run without, which :func:`resolve` checks but never applies, because a policy
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
                    out.append((names.canonical(name.format(kind=kind)), resolved, why, strict))
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
                out.append((names.canonical(name.format(kind=kind)), resolved, why))
    return out
