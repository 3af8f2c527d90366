"""A step's contacts as a table of stays in range.

The one type the contact search (:mod:`mobidfl.model.contacts`), contact traces
(:mod:`mobidfl.maps.contact_trace`) and the link models (:mod:`mobidfl.model.links`) share.

Ground floor: imports nothing of ours, so every floor that produces or reads contacts can
name it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONTACT_COLUMNS", "ContactTable"]


CONTACT_COLUMNS = ("step", "a", "b", "t_start", "t_end", "d_min")
"""Columns of the contact table (one row per stay in range; times in seconds of the step)."""


class ContactTable:
    """Every stay in range of every pair during one step.

    ``a < b`` agent ids; ``t_start`` / ``t_end``: seconds since the step's start when the pair
    came into and left range (a pair that parts and meets again has several rows);
    ``d_min``: closest distance in metres. Rows sorted by ``(a, b, t_start)``.

    ``pieces`` keep the geometry for link models whose rate depends on distance: one piece
    per pair and chord (sub-interval) in range, with ``piece_row`` (the row it belongs to),
    ``piece_start`` / ``piece_end`` (seconds), ``piece_t0`` / ``piece_t1`` (fractions of
    its chord) and the chord's relative motion ``piece_rel0`` + t ``piece_relv``.
    """

    def __init__(self, **arrays: np.ndarray) -> None:
        self.a = arrays["a"]
        self.b = arrays["b"]
        self.t_start = arrays["t_start"]
        self.t_end = arrays["t_end"]
        self.d_min = arrays["d_min"]
        # One attribute per array column: explicit names for the typed attributes above.
        self.piece_row = arrays["piece_row"]
        self.piece_start = arrays["piece_start"]
        self.piece_end = arrays["piece_end"]
        self.piece_t0 = arrays["piece_t0"]
        self.piece_t1 = arrays["piece_t1"]
        self.piece_rel0 = arrays["piece_rel0"]
        self.piece_relv = arrays["piece_relv"]

    def __len__(self) -> int:
        return len(self.a)

    @property
    def duration(self) -> np.ndarray:
        """Seconds each contact lasted, ``t_end - t_start``."""
        return self.t_end - self.t_start

    def columns(self, step: int) -> dict[str, np.ndarray]:
        """The table as :data:`CONTACT_COLUMNS` arrays, stamped with ``step`` (export)."""
        return {
            "step": np.full(len(self), int(step), np.int64),
            "a": self.a, "b": self.b,
            "t_start": self.t_start, "t_end": self.t_end, "d_min": self.d_min,
        }

    def frame(self, step: int):
        """The table as a DataFrame with :data:`CONTACT_COLUMNS` (export)."""
        import pandas as pd

        return pd.DataFrame(self.columns(step))

    def first_rows(self) -> np.ndarray:
        """Row of each pair's first stay in range (rows are sorted by pair, then time)."""
        if not len(self):
            return np.empty(0, np.int64)
        first = np.ones(len(self), bool)
        first[1:] = (self.a[1:] != self.a[:-1]) | (self.b[1:] != self.b[:-1])
        return np.flatnonzero(first)
