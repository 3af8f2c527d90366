"""MobiDFL's public entry point: ``import mobidfl`` gives everything a user or a plug-in needs.

One stable, namespaced door in front of the implementation folders (``model``, ``agents``,
``maps``, ``analysis``), so a script or a plug-in does not depend on where a class lives
today. Those folders still install as top-level packages of the same names, so a user's own
``model.py`` or ``maps/`` package beside a script shadows them (moving them under
``mobidfl.`` is planned)::

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
from ``maps/`` runs this file without importing the Mesa model (tests/test_layers.py checks
both floors).
"""

from __future__ import annotations

from typing import Any

from mobidfl.exports import resolve

_EXPORTS: dict[str, str] = {
    # the model and its settings
    "MobiDFLModel": "model.world",
    "Config": "model.config",
    "ConfigError": "mobidfl.errors",
    "load_preset": "model.presets",
    "preset_names": "model.presets",
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
    "ExchangePolicy": "model.policies.base",
    "ExchangeContext": "model.policies.base",
    "Exchange": "model.policies.base",
    "Messages": "model.policies.base",
    "register_policy": "model.policies.base",
    "MobilityModel": "agents.mobility.base",
    "MobilityContext": "agents.mobility.base",
    "register_mobility": "agents.mobility.base",
    "LinkModel": "model.links",
    "RateLink": "model.links",
    "MapFormat": "maps.formats.base",
    "MAP_FORMATS": "maps.formats.base",
    "register_map_format": "maps.formats.base",
    "LinkPlan": "model.links",
    "LinkSettings": "model.links",
    "WorldView": "agents.views",
    "GroupView": "agents.views",
    "RouteView": "agents.views",
    "WalkerView": "agents.views",
    "dpsgd_weights": "model.maths.mixing",
    "fedavg_weights": "model.maths.mixing",
    "mobility_aware_weights": "model.maths.mixing",
    "check_row_stochastic": "model.maths.mixing",
    "Dataset": "model.learning.data",
    "load_dataset": "model.learning.data",
    # sweeps and reports
    "Sweep": "analysis.sweep",
    "run_sweep": "analysis.sweep",
    "open_sweep": "analysis.sweep",
    "read_manifest": "analysis.sweep",
    "load_runs": "analysis.sweep",
    "load_results": "analysis.report",
    "make_report": "analysis.report",
    "mean_std": "analysis.stats",
}
"""Public name -> the module that implements it."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return resolve(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
