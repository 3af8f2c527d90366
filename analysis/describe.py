"""Regime descriptors of a world.

What its mobility and its data split are, measured, without training (``mobidfl bench --describe
WORLD``).

A benchmark column is placed on the regime map by numbers measured from its world, not by
its name: how many agents an agent meets per step, how long a contact lasts and how long a
pair waits to meet again (the contact process of opportunistic networks: Chaintreau et al.,
*Impact of Human Mobility on Opportunistic Forwarding Algorithms*, IEEE TMC 2007), how much
of the fleet an agent has met by the end, how different the agents' speeds are, and how far
each agent's labels are from the pooled labels (the skew that makes exchanging models pay).

The maths are pure functions of arrays (:func:`contact_spells`, :func:`label_skew_index`,
:func:`speed_heterogeneity`); :func:`describe_world` runs the world's mobility alone
(``learning = False``) for its steps and builds, but does not train, its learners once to read
the data split.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Descriptors",
    "contact_spells",
    "describe_seeds",
    "describe_world",
    "label_skew_index",
    "speed_heterogeneity",
]


@dataclass(frozen=True)
class Descriptors:
    """One world's regime, measured over its steps (seconds are simulated time)."""

    agents: int
    steps: int
    neighbours_per_step: float
    """Mean over steps 1..T of the mean number of agents in range of an agent."""
    contact_duration_s: float
    """Mean length of a spell of consecutive steps in range, x ``step_s`` (NaN: no contact)."""
    inter_contact_s: float
    """Mean gap between two spells of the same pair, x ``step_s`` (NaN: no pair met twice)."""
    met_share: float
    """Mean share of the rest of the fleet an agent has met by the last step."""
    speed_cv: float
    """Coefficient of variation of the agents' mean speeds (0: all equal or all static)."""
    label_skew: float
    """Mean total-variation distance of an agent's labels from the pooled labels (0 to 1)."""
    samples_per_agent: float = float("nan")
    """Mean training samples an agent holds (NaN without learning): data per agent decides
    how much a neighbour's model can add (PSFL's sigma is compared with a loss over them)."""

    def as_dict(self) -> dict[str, float | int]:
        """The descriptors as a plain dict, field by field."""
        return asdict(self)


def contact_spells(adjacency: Sequence[sp.spmatrix], *, step_s: float) -> tuple[np.ndarray,
                                                                                   np.ndarray]:
    """``(durations_s, gaps_s)`` of every contact spell in a sequence of contact matrices.

    The matrices are symmetric, one per step.

    A spell is a run of consecutive steps in which a pair is in range; its duration is its
    number of steps x ``step_s``. A gap is the time from the last step of one spell of a pair
    to the first step of its next spell (spells cut by the first or last step are counted as
    seen). Vectorised over pairs: every (step, pair) is one row, sorted by pair then step.
    """
    steps, pairs = [], []
    for t, matrix in enumerate(adjacency):
        upper = sp.triu(sp.coo_matrix(matrix), k=1)
        n = matrix.shape[0]
        steps.append(np.full(upper.nnz, t, dtype=np.int64))
        pairs.append(upper.row.astype(np.int64) * n + upper.col.astype(np.int64))
    if not steps:
        return np.empty(0), np.empty(0)
    t = np.concatenate(steps)
    pair = np.concatenate(pairs)
    if t.size == 0:
        return np.empty(0), np.empty(0)
    order = np.lexsort((t, pair))
    t, pair = t[order], pair[order]
    new = np.ones(t.size, dtype=bool)
    new[1:] = (pair[1:] != pair[:-1]) | (t[1:] != t[:-1] + 1)
    spell = np.cumsum(new) - 1
    durations = np.bincount(spell).astype(float) * step_s
    starts = t[new]
    last = np.ones(t.size, dtype=bool)
    last[:-1] = new[1:]
    ends = t[last]
    spell_pair = pair[new]
    same_pair = spell_pair[1:] == spell_pair[:-1]
    gaps = (starts[1:] - ends[:-1])[same_pair].astype(float) * step_s
    return durations, gaps


def label_skew_index(label_hist: np.ndarray) -> float:
    """Mean total-variation distance between each agent's label distribution and the pooled one.

    0 when every agent holds the pooled mix, 1 - 1/C when each holds a single one of C equally
    frequent labels. Agents without data are left out.
    """
    counts = np.asarray(label_hist, dtype=float)
    sizes = counts.sum(axis=1)
    held = sizes > 0
    if not held.any():
        return float("nan")
    pooled = counts[held].sum(axis=0) / counts[held].sum()
    own = counts[held] / sizes[held, None]
    return float(0.5 * np.abs(own - pooled).sum(axis=1).mean())


def speed_heterogeneity(mean_speeds: np.ndarray) -> float:
    """Coefficient of variation (population std / mean) of the agents' mean speeds.

    0 for a fleet that does not move.
    """
    speeds = np.asarray(mean_speeds, dtype=float)
    mean = float(speeds.mean()) if speeds.size else 0.0
    return 0.0 if mean <= 0.0 else float(speeds.std() / mean)


def describe_world(settings: Mapping[str, Any], *, steps: int | None = None) -> Descriptors:
    """Measure :class:`Descriptors` for the world of ``settings`` (any settings a run takes).

    The mobility runs with ``learning = False`` (no model is trained); the data split is
    read from learners that are built but never stepped. ``steps`` overrides the world's
    own horizon.
    """
    from mobidfl.model.config import InertSettingWarning
    from mobidfl.model.world import MobiDFLModel

    world = dict(settings)
    if steps is not None:
        world["steps"] = steps
    with warnings.catch_warnings():  # learning off here on purpose: its settings are inert
        warnings.simplefilter("ignore", InertSettingWarning)
        moving = MobiDFLModel(**{**world, "learning": False})
    n = moving.n_agents
    adjacency, speed_sum = [], np.zeros(n)
    for _ in range(moving.config.steps):
        moving.step()
        adjacency.append(moving.adjacency.copy())
        speed_sum += moving.speed
    taken = max(1, len(adjacency))
    durations, gaps = contact_spells(adjacency, step_s=moving.config.step_s)
    degrees = [np.diff(a.indptr).mean() for a in adjacency] if adjacency else [0.0]
    met = np.diff(moving.met.indptr) / max(1, n - 1)
    skew = samples = float("nan")
    if world.get("learning", True) is not False:
        with warnings.catch_warnings():  # the settings were told once, by the moving world
            warnings.simplefilter("ignore", InertSettingWarning)
            built = MobiDFLModel(**world)
        if built.learner is not None:
            skew = label_skew_index(built.learner.engine.label_hist)
            samples = float(np.mean(built.learner.engine.data_sizes))
    return Descriptors(
        agents=n,
        steps=len(adjacency),
        neighbours_per_step=float(np.mean(degrees)),
        contact_duration_s=float(durations.mean()) if durations.size else float("nan"),
        inter_contact_s=float(gaps.mean()) if gaps.size else float("nan"),
        met_share=float(met.mean()) if n else float("nan"),
        speed_cv=speed_heterogeneity(speed_sum / taken),
        label_skew=skew,
        samples_per_agent=samples,
    )


def describe_seeds(settings: Mapping[str, Any], seeds: Sequence[int]) -> Descriptors:
    """:func:`describe_world` at each of ``seeds``, averaged descriptor by descriptor.

    A world's contacts and split differ from seed to seed; the bench measures its columns over
    its results seeds and ``--describe`` over the same seeds (the same ``--seeds`` and
    ``--first-seed``), so both print the same numbers for the same world. A descriptor NaN at
    every seed stays NaN; ``agents`` and ``steps`` are the first seed's.
    """
    if not seeds:
        raise ValueError("at least one seed")
    each = [describe_world({**settings, "seed": int(s)}) for s in seeds]
    if len(each) == 1:
        return each[0]
    values = {}
    for name, first in each[0].as_dict().items():
        if name in ("agents", "steps"):
            values[name] = first
            continue
        column = np.array([d.as_dict()[name] for d in each], dtype=float)
        values[name] = float(np.nanmean(column)) if np.isfinite(column).any() else float("nan")
    return Descriptors(**values)
