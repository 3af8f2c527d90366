"""The app's inputs.

SolaraViz parameter widgets from :class:`mobidfl.model.config.Config`, and settings from the
environment (``MOBIDFL_APP_SETTINGS``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.maps.sources import BUNDLED
from mobidfl.model.config import (
    COUNT_SETTING,
    KINDS,
    Config,
    canonical_name,
    mobility_fit,
    parse_value,
)


def _choices(registry: str) -> list[str]:
    try:
        if registry == "mobility":
            from mobidfl.agents.mobility import MOBILITY_MODELS as names
        elif registry == "policy":
            from mobidfl.model.policies import POLICIES as names
        elif registry == "dataset":
            from mobidfl.model.learning.data import DATASETS as names
        elif registry == "partition":
            from mobidfl.model.learning.partition import PARTITIONS as names
        else:
            from mobidfl.model.learning.nets import NETS as names
    except ImportError:
        return []
    return list(names)


def _link_choices() -> tuple[list[str], list[str]]:
    """Link model names and ``distance_rate`` radio profiles."""
    from mobidfl.model.links import PROFILES
    from mobidfl.plugins import LINKS

    return list(LINKS.names()), list(PROFILES)


LINK_RATES_BPS = (1e6, 3e6, 6e6, 12e6, 27e6)
"""``fixed_rate`` choices: 802.11p's 10 MHz rates from 3 to 27 Mbit/s (6 Mbit/s is ITS-G5's
default) and a slow 1 Mbit/s link."""


def _preset_names() -> list[str]:
    from mobidfl.model.config import preset_names

    return preset_names()


def model_params(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """SolaraViz inputs (the app's controls), defaults from :class:`Config` and ``overrides``.

    Settings in ``overrides`` that have no input become fixed parameters, so e.g.
    ``test_size`` or ``batch_size`` can be set from the environment (see :func:`env_settings`).
    """
    defaults = Config()
    overrides = dict(overrides or {})
    params: dict[str, Any] = {
        "preset": {"type": "Select", "value": "", "values": ["", *_preset_names()],
                   "label": "Paper preset (fills untouched inputs)"},
        "map": {"type": "Select", "value": defaults.map, "values": list(BUNDLED), "label": "Map"},
        "map_file": {"type": "InputText", "value": "", "label": "Map file / spec (overrides Map)"},
    }
    # the app starts on the default world (docs/concepts/world.md, "The default world")
    for kind in KINDS:
        name = COUNT_SETTING[kind]
        params[name] = {"type": "SliderInt", "value": defaults.count(kind), "label": name.title(),
                        "min": 0, "max": 200, "step": 1}
    mobility = _choices("mobility")
    policies = _choices("policy")
    link = defaults.plugin_settings("link")
    fixed = defaults.plugin_settings("link.fixed_rate")
    link_names, profiles = _link_choices()
    for kind in KINDS:
        fits = [name for name in mobility if mobility_fit(kind, name) is None]  # per kind
        params[f"{kind}_mobility"] = {"type": "Select", "value": defaults.kind(kind).mobility,
                                      "values": fits, "label": f"{kind} mobility"}
        if policies:
            params[f"{kind}_policy"] = {"type": "Select", "value": defaults.policy_of(kind),
                                        "values": policies, "label": f"{kind} exchange policy"}
    params |= {
        "radius_m": {"type": "SliderFloat", "value": defaults.radius_m, "label": "Radius (m)",
                     "min": 10.0, "max": 500.0, "step": 10.0},
        "contact": {"type": "Select", "value": defaults.contact, "values": ["during", "end"],
                    "label": "Contact mode"},
        # a link model: ideal = none; the others draw transfer progress and add
        # the energy and bytes plots
        "link.model": {"type": "Select", "value": link.model, "values": link_names,
                       "label": "Link model (ideal = no radio)"},
        "link.profile": {"type": "Select", "value": link.profile, "values": profiles,
                         "label": "Radio profile (distance_rate, ns3)"},
        "link.fixed_rate.rate_bps": {"type": "Select", "value": fixed.rate_bps,
                                     "values": sorted({*LINK_RATES_BPS, fixed.rate_bps}),
                                     "label": "Rate, bit/s (fixed_rate)"},
        "learning": {"type": "Checkbox", "value": bool(policies), "label": "Learning"},
        "dataset": {"type": "Select", "value": defaults.dataset, "values": _choices("dataset"),
                    "label": "Dataset"},
        "partition": {"type": "Select", "value": defaults.partition,
                      "values": _choices("partition"), "label": "Partition"},
        "model": {"type": "Select", "value": defaults.model, "values": _choices("net"),
                  "label": "Model"},
        "local_steps": {"type": "SliderInt", "value": defaults.local_steps,
                        "label": "Local steps K", "min": 1, "max": 20, "step": 1},
        "lr": {"type": "SliderFloat", "value": defaults.lr, "label": "Learning rate",
               "min": 0.005, "max": 0.5, "step": 0.005},
        "seed": {"type": "SliderInt", "value": defaults.seed, "label": "Seed",
                 "min": 0, "max": 99, "step": 1},
    }
    # an override under any of its setting's names fills the input of that setting
    inputs = {_public(key): key for key in params}
    for name, value in overrides.items():
        if name == "map" and value not in BUNDLED:
            name = "map_file"
        name = inputs.get(_public(name), name)
        if name in params:
            entry = params[name]
            entry["value"] = value
            if "max" in entry and value > entry["max"]:
                entry["max"] = value
            if "values" in entry and value not in entry["values"]:
                entry["values"] = [*entry["values"], value]
        else:
            params[name] = value  # fixed: passed to the model, no input shown
    return params


def initial_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments SolaraViz passes on Reset, for building the first model."""
    return {
        name: entry["value"] if isinstance(entry, Mapping) and "type" in entry else entry
        for name, entry in params.items()
    }


def env_settings(text: str) -> dict[str, Any]:
    """Parse ``name=value`` words (shell quoting allowed) into typed settings.

    The app reads them from ``MOBIDFL_APP_SETTINGS`` (e.g. ``"vehicles=200 model=mlp"``);
    names are the public setting names (``mobidfl settings``) plus ``map_file``.
    """
    settings: dict[str, Any] = {}
    for word in shlex.split(text):
        name, sep, raw = word.partition("=")
        if not sep or not name:
            msg = f"MOBIDFL_APP_SETTINGS word {word!r} is invalid; allowed: name=value"
            raise ValueError(msg)
        settings[name] = raw if name in ("map", "map_file") else parse_value(name, raw)
    checked = {k: v for k, v in settings.items() if k not in ("map", "map_file")}
    Config().updated(checked)  # fail at start with the setting's own message
    return settings


def _public(name: str) -> str:
    """The public name of setting ``name``; an input that is no setting keeps its own."""
    try:
        return canonical_name(name)
    except ConfigError:
        return name
