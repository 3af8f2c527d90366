"""The checks of a whole config.

Every field by its own check, then what settings must agree on (at least one agent, workers within
the cores, mobility models that fit their kinds, a link the policies send over).

A bad value fails at once with :class:`mobidfl.errors.ConfigError`, whose one-line message
names the setting (as it was written, :func:`mobidfl.model.config_names.display_name`), the value
and what is allowed.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.kinds import COUNT_SETTING, KINDS
from mobidfl.model import config_names as names
from mobidfl.model.config_fields import ConfigFields, KindSettings, PluginValues, setting_fields
from mobidfl.model.config_values import mobility_fit, run_check, usable_cores
from mobidfl.plugins import POLICIES
from mobidfl.settings import check_value

__all__ = ["check_setting", "validated"]


def validated[C: ConfigFields](config: C) -> C:
    """``config`` itself when every setting passes its check and the settings agree.

    Else one :class:`ConfigError` for the first problem.
    """
    shown = names.display_name
    for f in setting_fields():
        value = getattr(config, f.name)
        if isinstance(value, KindSettings):
            for kf in fields(value):
                run_check(shown(config, f"{f.name}.{kf.name}"), kf, getattr(value, kf.name))
        elif not isinstance(value, PluginValues):
            run_check(shown(config, f.name), f, value)
    for namespace, own in config.plugins.items():
        for pf in fields(own):
            check_value(shown(config, f"{namespace}.{pf.name}"), pf, getattr(own, pf.name))
        problem = own.joint_check()
        if problem is not None:
            attrs, value, allowed = problem
            joined = "+".join(shown(config, f"{namespace}.{n}") for n in attrs)
            raise ConfigError(joined, value, allowed)
    _check_joint(config)
    return config


def check_setting(name: str, value: Any) -> None:
    """Check ``value`` by setting ``name``'s own declared check, the one :func:`validated` runs.

    Code that takes a setting's value as an argument (the learning engine) checks it here, so each
    rule is written once.
    """
    owner, attr = names.split_name(name)
    declared = next(f for f in fields(names.owner_type(owner)) if f.name == attr)
    run_check(name, declared, value)


def _check_joint(config: ConfigFields) -> None:
    if config.n_agents < 1:
        raise ConfigError("+".join(COUNT_SETTING.values()), 0, "at least one agent")
    _check_link(config)
    cores = usable_cores()
    on_this_machine = config.worker_backend == "processes" or config.ray_address is None
    if on_this_machine and config.workers > cores:
        raise ConfigError(
            names.display_name(config, "workers"), config.workers,
            f"at most the {cores} cores this process may use (os.sched_getaffinity; "
            "0 = auto); more workers only on a Ray cluster (ray_address)",
        )
    for kind in KINDS:
        name = config.kind(kind).mobility
        fit = mobility_fit(kind, name)
        if fit is not None:
            raise ConfigError(f"{kind}.mobility", name, fit)


def _check_link(config: ConfigFields) -> None:
    """A link other than ``ideal`` needs contact times and policies that send over it.

    A policy that ignores the link would make it a silent no-op.
    """
    plugins = config.plugins
    if "link" not in plugins or plugins["link"].model == "ideal":
        return
    shown, model = names.display_name(config, "link.model"), plugins["link"].model
    if config.contact != "during":
        raise ConfigError(
            names.display_name(config, "contact"), config.contact,
            f"during (link {model} needs when each contact starts and ends)",
        )
    passes = plugins["cached"].passes if "cached" in plugins else 1
    if passes != 1:
        raise ConfigError(
            names.display_name(config, "cached.passes"), passes,
            f"1 with link {model} (replaying a step's meetings is the authors' Table 2 "
            "statistic, not bytes a radio sends again)",
        )
    for kind in KINDS:
        if config.count(kind) == 0:
            continue
        policy = config.policy_of(kind)
        if not getattr(POLICIES[policy], "honours_link", False):
            honour = sorted(n for n, c in POLICIES.items() if getattr(c, "honours_link", False))
            raise ConfigError(
                shown, model,
                f"ideal, because the {kind} policy {policy} ignores the link (policies "
                f"that honour it: {', '.join(honour)})",
            )

    policies = [config.policy_of(k) for k in KINDS if config.count(k) > 0]
    if plugins["link"].resume and policies and not any(
        getattr(POLICIES[p], "resumes_transfers", False) for p in policies
    ):  # a silent no-op otherwise: resume is for ordered message lists
        resumers = sorted(
            n for n, c in POLICIES.items() if getattr(c, "resumes_transfers", False)
        )
        raise ConfigError(
            names.display_name(config, "link.resume"), True,
            f"false, because no policy of this world resumes a cut message ({policies[0]} "
            f"sends whole models each contact; policies that resume: {', '.join(resumers)})",
        )
