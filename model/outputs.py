"""A run's tables, as the CLI, sweeps and the app write or show them.

``model.csv`` (one row per step, the named reporters of :mod:`mobidfl.model.reporters`),
``agents.parquet`` (one row per agent per recorded step) and ``contacts.csv`` (every stay in
range). The model keeps the raw records; these functions turn them into tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

World = Any
"""The running :class:`mobidfl.model.world.MobiDFLModel` (not imported: that module imports this
one)."""


def agent_record(model: World) -> dict[str, np.ndarray]:
    """The step's ``agents.parquet`` rows as columns (copies: the model moves on)."""
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


def agent_table(records: ColumnLog) -> pd.DataFrame:
    """One row per agent per recorded step (the ``agents.parquet`` schema)."""
    return records.frame()


class ColumnLog:
    """Rows appended step by step as column arrays, joined every ``chunk`` appends.

    Joined into one array per column.

    A long run keeps its rows, not one small object per step: a pandas DataFrame per step
    costs ~15 kB of bookkeeping whatever its rows, which a 1,000-epoch run sees as steady
    memory growth (the soak benchmark's contact tables).
    """

    def __init__(self, columns: tuple[str, ...] | None = None, *, chunk: int = 256) -> None:
        self.columns = tuple(columns) if columns is not None else None
        """The column names (``None``: taken from the first block appended)."""
        self.chunk = int(chunk)
        self._joined: dict[str, np.ndarray] | None = None
        self._pending: list[Mapping[str, np.ndarray]] = []
        self._rows = 0

    def append(self, columns: Mapping[str, np.ndarray]) -> None:
        """Add one block of rows (every column, equal lengths)."""
        if self.columns is None:
            self.columns = tuple(columns)
        self._pending.append({c: np.asarray(columns[c]) for c in self.columns})
        self._rows += len(self._pending[-1][self.columns[0]])
        if len(self._pending) >= self.chunk:
            self._join()

    def __len__(self) -> int:
        return self._rows

    def _join(self) -> None:
        blocks = ([self._joined] if self._joined is not None else []) + self._pending
        if blocks:
            self._joined = {c: np.concatenate([b[c] for b in blocks]) for c in self.columns}
        self._pending = []

    def blocks(self) -> list[dict[str, np.ndarray]]:
        """Every row so far as one block of columns (``[]`` before the first append).

        What a checkpoint keeps.
        """
        self._join()
        return [] if self._joined is None else [dict(self._joined)]

    def frame(self) -> pd.DataFrame:
        """Every row so far as one DataFrame (columns in order; empty: no rows, no dtype)."""
        self._join()
        if self._joined is None:
            return pd.DataFrame({c: [] for c in self.columns or ()})
        return pd.DataFrame({c: self._joined[c] for c in self.columns})


def contacts_table(log: ColumnLog) -> pd.DataFrame:
    """Every step's stays in range (``contacts.csv``: step, a, b, t_start, t_end, d_min)."""
    return log.frame()


def model_table(datacollector: Any) -> pd.DataFrame:
    """One row per step from a Mesa DataCollector (the ``model.csv`` schema)."""
    frame = datacollector.get_model_vars_dataframe()
    frame.index.name = "step"
    return frame.reset_index()
