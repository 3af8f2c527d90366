"""MobiDFL interactive exploration: ``solara run app.py --host 127.0.0.1``.

The page is Mesa's ``SolaraViz`` sidebar (parameter inputs) with our own Step / Play / Reset
(``AppPage``, ``QueuedController``: a click during a step is queued, never lost); the map fills
the main area and fits the world on load, the plots sit below it, and an agent's panel appears
beside them once one is picked; with a link model (input "Link model") contacts are drawn
with their transfer progress and two more plots show bytes, aborted transfers and energy.
They come from :mod:`mobidfl.analysis.app` (its modules say why they are our own components).
All that is the "City" tab; the "Compare policies" tab runs the City tab's world and seed
under two or more policies, stepped together, with their accuracy and bytes, and shows where
the world sits on the published regime map (:mod:`mobidfl.analysis.app.compare`).
Everything works offline: the streets are drawn from the map's own geometry and OSM web
tiles are an opt-in checkbox.

Settings without an input (or different starting values) come from the environment, e.g.
``MOBIDFL_APP_SETTINGS="vehicles=150 model=mlp local_steps=1 test_size=200" solara run app.py``
(names as in ``mobidfl settings``; ``map=PATH`` or ``map_file=PATH`` for a map file).

Map data © OpenStreetMap contributors (ODbL).
"""

from __future__ import annotations

import os

import torch

from mobidfl.analysis.app import (
    AccuracyPlot,
    AgentInfo,
    AppModel,
    AppPage,
    CompareView,
    ContactsPlot,
    EnergyPlot,
    LinkPlot,
    MapView,
    NeighboursPlot,
    env_settings,
    initial_settings,
    model_params,
)

torch.set_num_threads(1)  # one thread per process (docs/performance/measurements.md)

params = model_params(env_settings(os.environ.get("MOBIDFL_APP_SETTINGS", "")))
start = initial_settings(params)
params["fallback"] = start  # a rejected input on Reset falls back to the starting scenario
model = AppModel(**start)
page = AppPage(
    model,
    map_view=MapView,
    plots=[AccuracyPlot, ContactsPlot, NeighboursPlot, LinkPlot, EnergyPlot],
    side=AgentInfo,
    compare=CompareView,
    model_params=params,
    name="MobiDFL: mobility-aware decentralized federated learning",
)
