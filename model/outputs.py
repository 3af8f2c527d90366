"""A run's tables, as the CLI, sweeps and the app write or show them.

``model.csv`` (one row per step, the named reporters of :mod:`model.reporters`),
``agents.parquet`` (one row per agent per recorded step) and ``contacts.csv`` (every stay in
range). The model keeps the raw records; these functions turn them into tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from model.contacts import CONTACT_COLUMNS

World = Any
"""The running :class:`model.world.MobiDFLModel` (not imported: that module imports this one)."""


def agent_record(model: World) -> dict[str, np.ndarray]:
    """This step's ``agents.parquet`` rows as columns (copies: the model moves on)."""
    lonlat = model.world_map.to_wgs84(model.position)
    return {
        "step": np.full(model.n_agents, model.steps),
        "agent_id": np.arange(model.n_agents),
        "kind": model.kind_of,
        "x_m": model.position[:, 0].copy(),
        "y_m": model.position[:, 1].copy(),
        "lon": lonlat[:, 0],
        "lat": lonlat[:, 1],
        "speed_mps": model.speed.copy(),
        "neighbours": model.neighbours_now.copy(),
        "distinct_neighbours": model.distinct_neighbours.copy(),
        "mobility_class": np.where(model.hm, "HM", "LM"),
        "area": model.area.copy(),
        "policy": model.policy_of_agent,
        "accuracy": model.accuracy.copy(),
        "loss": model.loss.copy(),
    } | {c: v.copy() for c, v in (model.link_totals or {}).items()}


def agent_table(records: list[dict[str, np.ndarray]]) -> pd.DataFrame:
    """One row per agent per recorded step (the ``agents.parquet`` schema)."""
    return pd.concat([pd.DataFrame(r) for r in records], ignore_index=True)


def contacts_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Every step's stays in range (``contacts.csv``: step, a, b, t_start, t_end, d_min)."""
    if not frames:
        return pd.DataFrame({c: [] for c in CONTACT_COLUMNS})
    return pd.concat(frames, ignore_index=True)


def model_table(datacollector: Any) -> pd.DataFrame:
    """One row per step from a Mesa DataCollector (the ``model.csv`` schema)."""
    frame = datacollector.get_model_vars_dataframe()
    frame.index.name = "step"
    return frame.reset_index()
