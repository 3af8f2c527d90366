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
:func:`speed_heterogeneity`, kept with the table of descriptors in
:mod:`mobidfl.analysis.measures`); :func:`describe_world` runs the world's mobility alone
(``learning = False``) for its steps and builds, but does not train, its learners once to read
the data split.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mobidfl.analysis.measures import (
    DESCRIPTORS,
    Observed,
    contact_spells,
    descriptor_names,
    label_skew_index,
    speed_heterogeneity,
)

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
        names = descriptor_names()
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TypeError(f"not a descriptor: {', '.join(unknown)}")
        self.agents = agents
        self.steps = steps
        self.values = {name: float(values.get(name, float("nan"))) for name in names}

    def __getattr__(self, name: str) -> float:
        """A descriptor's value by its name (called only for names that are not slots)."""
        if name == "values":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        """Equal when agents, steps and every descriptor's value are."""
        return isinstance(other, Descriptors) and self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """``Descriptors(agents=..., steps=..., <descriptor>=...)``."""
        return "Descriptors(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items()) + ")"

    def as_dict(self) -> dict[str, float | int]:
        """The descriptors as a plain dict: agents, steps, then the table's order."""
        return {"agents": self.agents, "steps": self.steps, **self.values}


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
    heads = ["world", "agents", "steps", *(d.header for d in DESCRIPTORS)]
    return "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)


def markdown_row(name: str, d: Descriptors) -> str:
    """One world's line of ``--describe``'s table (:func:`markdown_head`), each as it prints."""
    cells = [name, str(d.agents), str(d.steps), *(x.format(d.values[x.name])
                                                  for x in DESCRIPTORS)]
    return "| " + " | ".join(cells) + " |"
