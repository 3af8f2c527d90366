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

import functools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Descriptors",
    "Observed",
    "contact_spells",
    "describe_seeds",
    "describe_world",
    "label_skew_index",
    "markdown_head",
    "markdown_row",
    "speed_heterogeneity",
]


class Descriptors:
    """One world's regime, measured over its steps (seconds are simulated time).

    ``agents`` and ``steps``, and one float per entry of
    :data:`mobidfl.analysis.measures.DESCRIPTORS` (NaN where not given or not measured), read
    as attributes by name (``d.label_skew``).
    """

    __slots__ = ("agents", "steps", "values")

    def __init__(self, *, agents: int, steps: int, **values: float) -> None:
        from mobidfl.analysis.measures import descriptor_names

        names = descriptor_names()
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TypeError(f"not a descriptor: {', '.join(unknown)}")
        self.agents = agents
        self.steps = steps
        self.values = {name: float(values.get(name, float("nan"))) for name in names}

    def __getattr__(self, name: str) -> float:
        """A descriptor's value by its name."""
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        """Equal when every field is (NaN as the same NaN object would: use as_dict)."""
        return isinstance(other, Descriptors) and self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """``Descriptors(agents=..., steps=..., <descriptor>=...)``."""
        return "Descriptors(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"

    def as_dict(self) -> dict[str, float | int]:
        """The descriptors as a plain dict: agents, steps, then the table's order."""
        return {"agents": self.agents, "steps": self.steps, **self.values}


@dataclass(frozen=True)
class Observed:
    """What :func:`describe_world` sees of a world: what every descriptor is computed from.

    The contact matrix of each step, the step length, each agent's mean speed, who has met
    whom by the end, and the data split (``None`` without learning).
    """

    agents: int
    adjacency: list[sp.csr_matrix]
    step_s: float
    mean_speeds: np.ndarray
    met: sp.csr_matrix
    label_hist: np.ndarray | None = None
    data_sizes: np.ndarray | None = None

    @functools.cached_property
    def spells(self) -> tuple[np.ndarray, np.ndarray]:
        """``(durations_s, gaps_s)`` of every contact spell (:func:`contact_spells`), once."""
        return contact_spells(self.adjacency, step_s=self.step_s)


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
    from mobidfl.analysis.measures import DESCRIPTORS
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
    label_hist = data_sizes = None
    if world.get("learning", True) is not False:
        with warnings.catch_warnings():  # the settings were told once, by the moving world
            warnings.simplefilter("ignore", InertSettingWarning)
            built = MobiDFLModel(**world)
        if built.learner is not None:
            label_hist = built.learner.engine.label_hist
            data_sizes = np.asarray(built.learner.engine.data_sizes)
    seen = Observed(agents=n, adjacency=adjacency, step_s=moving.config.step_s,
                    mean_speeds=speed_sum / max(1, len(adjacency)), met=moving.met,
                    label_hist=label_hist, data_sizes=data_sizes)
    return Descriptors(agents=n, steps=len(adjacency),
                       **{d.name: d.compute(seen) for d in DESCRIPTORS})


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


def markdown_head() -> tuple[str, str]:
    """The header and rule lines of ``--describe``'s table: world, agents, steps, descriptors.

    Cells of its own (a rule's prediction) are appended to both by the caller.
    """
    from mobidfl.analysis.measures import DESCRIPTORS

    heads = ["world", "agents", "steps", *(d.header for d in DESCRIPTORS)]
    return "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)


def markdown_row(name: str, d: Descriptors) -> str:
    """One world's line of ``--describe``'s table (:func:`markdown_head`), each as it prints."""
    from mobidfl.analysis.measures import DESCRIPTORS

    cells = [name, str(d.agents), str(d.steps), *(x.format(d.values[x.name])
                                                  for x in DESCRIPTORS)]
    return "| " + " | ".join(cells) + " |"
