"""MobiDFL's public entry point: ``import mobidfl`` gives everything a user or a plug-in needs.

One stable door in front of the implementation, so a script or a plug-in does not depend
on where a class lives today. Everything installs under this one name: the repository's
folders ``model/``, ``agents/``, ``maps/`` and ``analysis/`` are the subpackages
:mod:`mobidfl.model`, :mod:`mobidfl.agents`, :mod:`mobidfl.maps` and :mod:`mobidfl.analysis`
(``package-dir`` in pyproject.toml), so a user's own ``model.py``, ``maps/`` or
``analysis/`` beside a script shadows nothing (tests/project/test_namespace.py)::

    import mobidfl

    world = mobidfl.MobiDFLModel(policy="cached_lru", vehicles=20, steps=5, seed=0)
    world.run_model()
    world.model_table()

    @mobidfl.register_policy
    class MyPolicy(mobidfl.ExchangePolicy): ...

Two floors in one package: the modules beside this file (:mod:`mobidfl.errors`,
:mod:`mobidfl.settings`, :mod:`mobidfl.registry`, :mod:`mobidfl.plugins`,
:mod:`mobidfl.atomic`) are the ground floor that every other package builds on; this file
is the top floor. Its names are resolved on first use (PEP 562), so ``import mobidfl.errors``
from :mod:`mobidfl.maps` runs this file without importing the Mesa model
(tests/project/test_layers.py checks both floors).
"""

from __future__ import annotations

from typing import Any

from mobidfl.exports import resolve

_EXPORTS: dict[str, str] = {
    # the model and its settings
    "MobiDFLModel": "mobidfl.model.world",
    "Config": "mobidfl.model.config",
    "ConfigError": "mobidfl.errors",
    "load_preset": "mobidfl.model.config",
    "preset_names": "mobidfl.model.config",
    # declaring a plug-in's settings
    "PluginSettings": "mobidfl.settings",
    "setting": "mobidfl.settings",
    "at_least_one": "mobidfl.settings",
    "non_negative": "mobidfl.settings",
    "one_of": "mobidfl.settings",
    "positive": "mobidfl.settings",
    "unit_interval": "mobidfl.settings",
    # the registries (name -> plug-in)
    "Registry": "mobidfl.registry",
    "POLICIES": "mobidfl.plugins",
    "MOBILITY_MODELS": "mobidfl.plugins",
    "DATASETS": "mobidfl.plugins",
    "PARTITIONS": "mobidfl.plugins",
    "NETS": "mobidfl.plugins",
    "LINKS": "mobidfl.plugins",
    # base classes and what plug-ins receive
    "ExchangePolicy": "mobidfl.model.policies.base",
    "ExchangeContext": "mobidfl.model.policies.base",
    "Exchange": "mobidfl.model.policies.base",
    "Messages": "mobidfl.model.policies.base",
    "register_policy": "mobidfl.model.policies.base",
    "MobilityModel": "mobidfl.agents.mobility.base",
    "MobilityContext": "mobidfl.agents.mobility.base",
    "register_mobility": "mobidfl.agents.mobility.base",
    "LinkModel": "mobidfl.model.links",
    "RateLink": "mobidfl.model.links",
    "MapFormat": "mobidfl.maps.formats.base",
    "MAP_FORMATS": "mobidfl.maps.formats.base",
    "register_map_format": "mobidfl.maps.formats.base",
    "LinkPlan": "mobidfl.model.links",
    "LinkSettings": "mobidfl.model.links",
    "WorldView": "mobidfl.agents.views",
    "GroupView": "mobidfl.agents.views",
    "RouteView": "mobidfl.agents.views",
    "WalkerView": "mobidfl.agents.views",
    "dpsgd_weights": "mobidfl.model.maths.mixing",
    "fedavg_weights": "mobidfl.model.maths.mixing",
    "mobility_aware_weights": "mobidfl.model.maths.mixing",
    "check_row_stochastic": "mobidfl.model.maths.mixing",
    "Dataset": "mobidfl.model.learning.data",
    "load_dataset": "mobidfl.model.learning.data",
    # sweeps and reports
    "Sweep": "mobidfl.analysis.sweep",
    "run_sweep": "mobidfl.analysis.sweep",
    "open_sweep": "mobidfl.analysis.sweep",
    "read_manifest": "mobidfl.analysis.sweep",
    "load_runs": "mobidfl.analysis.sweep",
    "load_results": "mobidfl.analysis.report",
    "make_report": "mobidfl.analysis.report",
    "mean_std": "mobidfl.analysis.stats",
}
"""Public name -> the module that implements it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return resolve(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
