"""The checks of a whole config: every setting's own check, then the rules that join settings.

A bad combination is one :class:`~mobidfl.errors.ConfigError` line, here only: the engine,
the links and the policies trust a config that passed :func:`validated`.
"""

from __future__ import annotations

import functools
from dataclasses import fields

from mobidfl.cores import usable_cores
from mobidfl.errors import ConfigError
from mobidfl.model.config.fields import ConfigFields, KindSettings, PluginValues, _setting_fields
from mobidfl.model.config.names import _display_name
from mobidfl.model.config.value import _run_check, mobility_fit
from mobidfl.plugins import POLICIES
from mobidfl.settings import COUNT_SETTING, KINDS, check_value


def validated[C: ConfigFields](config: C) -> C:
    """``config`` itself when every setting passes its check and the settings agree.

    Else one :class:`ConfigError` for the first problem.
    """
    shown = _display_name
    for f in _setting_fields():
        value = getattr(config, f.name)
        if isinstance(value, KindSettings):
            for kf in fields(value):
                _run_check(shown(config, f"{f.name}.{kf.name}"), kf, getattr(value, kf.name))
        elif not isinstance(value, PluginValues):
            _run_check(shown(config, f.name), f, value)
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


def _check_joint(config: ConfigFields) -> None:
    if config.n_agents < 1:
        raise ConfigError("+".join(COUNT_SETTING.values()), 0, "at least one agent")
    _check_link(config)
    if config.learning:
        _check_training(config)
    cores = usable_cores()
    on_this_machine = config.worker_backend == "processes" or config.ray_address is None
    if on_this_machine and config.workers > cores:
        raise ConfigError(
            _display_name(config, "workers"), config.workers,
            f"at most the {cores} cores this process may use (os.sched_getaffinity; "
            "0 = auto); more workers only on a Ray cluster (ray_address)",
        )
    for kind in KINDS:
        name = config.kind(kind).mobility
        fit = mobility_fit(kind, name)
        if fit is not None:
            raise ConfigError(f"{kind}.mobility", name, fit)


def _check_training(config: ConfigFields) -> None:
    """The learning settings' combination rules, checked here only (the engine trusts them).

    Adam keeps per-agent moments in this process, so its training is never spread over worker
    processes or Ray actors; workers are the loop backend's, on the CPU.
    """
    shown = functools.partial(_display_name, config)
    adam = config.optimizer == "adam"
    if adam and config.momentum:
        raise ConfigError(
            shown("momentum"), config.momentum, "0 with optimizer = adam (Adam has its own)"
        )
    if adam and config.workers > 1:
        raise ConfigError(shown("workers"), config.workers, "1 with optimizer = adam")
    if adam and config.worker_backend == "ray":
        raise ConfigError(
            shown("worker_backend"), config.worker_backend,
            "processes with optimizer = adam (Ray actors hold no Adam moments)",
        )
    if config.worker_backend == "ray" and config.backend != "loop":
        raise ConfigError(
            shown("worker_backend"), config.worker_backend, "processes unless backend = loop"
        )
    if config.workers > 1 and (config.backend != "loop" or config.device != "cpu"):
        raise ConfigError(shown("workers"), config.workers, "1 unless backend = loop on the CPU")


def _check_link(config: ConfigFields) -> None:
    """A link other than ``ideal`` needs contact times and policies that send over it.

    A policy that ignores the link would make it a silent no-op.
    """
    plugins = config.plugins
    if "link" not in plugins or plugins["link"].model == "ideal":
        return
    shown, model = _display_name(config, "link.model"), plugins["link"].model
    if config.contact != "during":
        raise ConfigError(
            _display_name(config, "contact"), config.contact,
            f"during (link {model} needs when each contact starts and ends)",
        )
    passes = plugins["cached"].passes if "cached" in plugins else 1
    if passes != 1:
        raise ConfigError(
            _display_name(config, "cached.passes"), passes,
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
            _display_name(config, "link.resume"), True,
            f"false, because no policy of this world resumes a cut message ({policies[0]} "
            f"sends whole models each contact; policies that resume: {', '.join(resumers)})",
        )
