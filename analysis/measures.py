"""The one table of regime descriptors and the one of run metrics.

Every page, table and file that shows a descriptor of a world or a metric of a run reads its
name, unit, direction, format and words here, so a new one is one entry plus the function
that computes it (``docs/reference/layout.md``: the worked examples).

A descriptor's function reads an :class:`Observed` world (its
contacts step by step, its agents' speeds, its data split), measured once by
:func:`mobidfl.analysis.describe.describe_world`; a metric's function reads one run's per-step
table (``model.csv``'s columns) and its number of agents. Metrics made elsewhere (the run's CPU
time from its manifest record, the accuracy within a byte budget from every policy's curves)
have no function here: their entry says where they come from. The maths they share with
:mod:`mobidfl.analysis.describe` and :mod:`mobidfl.analysis.bench_stats` (which re-export it)
live here, so this module imports neither.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["DESCRIPTORS", "METRICS", "Descriptor", "Metric", "Observed", "board_metrics",
           "contact_spells", "curve_mean", "descriptor_named", "descriptor_names", "evaluations",
           "label_skew_index", "last_value", "map_descriptors", "metric_named",
           "page_descriptors", "run_metrics", "speed_heterogeneity"]


# --- the maths the descriptors and metrics share with their modules ---------------------------
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


def last_value(table: pd.DataFrame, column: str) -> float:
    """The last finite value of ``column``; NaN when it is absent or never finite.

    A run evaluates every ``eval_every`` steps; NaN in between.
    """
    if column not in table:
        return float("nan")
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else float("nan")


def evaluations(table: pd.DataFrame, column: str = "acc_mean") -> np.ndarray:
    """The finite values of ``column`` in row order: the run's evaluations (NaN in between)."""
    if column not in table:
        return np.empty(0)
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values)]


def curve_mean(table: pd.DataFrame, *, last: int | None = None,
               column: str = "acc_mean") -> float:
    """Mean of ``column`` over the run's evaluations, or over its ``last`` ones.

    Over all of them it is the area under the accuracy curve per evaluation (evaluations are
    evenly spaced, ``eval_every``): a run that learns early scores higher, and one
    evaluation's swing moves it by 1 / (number of evaluations) of the swing, where the final
    accuracy is that one sample of an oscillating curve. NaN without evaluations.
    """
    values = evaluations(table, column)
    if last is not None:
        if last < 1:
            raise ValueError(f"last must be >= 1, got {last!r}")
        values = values[-last:]
    return float(values.mean()) if values.size else float("nan")


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


@dataclass(frozen=True)
class Measure:
    """What a descriptor and a metric both declare: name, unit, direction and wording.

    ``higher_is_better``: ``None`` for a descriptor (a property, not a score); ``digits``: the
    decimals a table prints; ``header``: its column; ``words``: its name in a sentence.
    """

    name: str
    unit: str
    higher_is_better: bool | None
    digits: int
    header: str
    words: str
    description: str


@dataclass(frozen=True)
class Descriptor(Measure):
    """One measured property of a world: a column of ``descriptors.csv`` and ``--describe``.

    ``digits``: the decimals ``--describe`` prints; ``header``: its column there, and
    ``page_header`` on the findings pages (default ``header``); ``words``: its name in a
    sentence (a rule's text, a figure's axis). ``on_map``: a column of ``regime_map.csv``;
    ``on_pages``: a column of the findings pages' world tables (read from that file, so one
    too); ``log_scale``: its levels
    span orders of magnitude (a rule's cut lies geometrically midway).
    """

    compute: Callable[[Observed], float]
    page_header: str = ""
    on_map: bool = False
    on_pages: bool = False
    log_scale: bool = False

    def format(self, value: float) -> str:
        """``value`` as ``--describe`` prints it (NaN as ``nan``)."""
        return f"{value:.{self.digits}f}"

    @property
    def page_title(self) -> str:
        """Its column header on the findings pages."""
        return self.page_header or self.header


@dataclass(frozen=True)
class Metric(Measure):
    """One number of a run: a column of the bench's per-run table and ``runs.parquet``.

    ``compute(table, agents=...)`` reads the run's per-step table; ``None`` where the number
    is made elsewhere (``source`` says where). ``on_board``: the leaderboard gives its mean
    and confidence half-width per cell.
    """

    compute: Callable[..., float] | None
    source: str = ""
    on_board: bool = False

    def format(self, value: float) -> str:
        """``value`` with this metric's decimals (NaN as ``nan``)."""
        return f"{value:.{self.digits}f}"


# --- the descriptors' functions ---------------------------------------------------------------
def neighbours_per_step(seen: Observed) -> float:
    """Mean over steps of the mean number of agents in range of an agent."""
    degrees = [np.diff(a.indptr).mean() for a in seen.adjacency] if seen.adjacency else [0.0]
    return float(np.mean(degrees))


def contact_duration_s(seen: Observed) -> float:
    """Mean length of a contact spell in simulated seconds (NaN: no contact)."""
    durations = seen.spells[0]
    return float(durations.mean()) if durations.size else float("nan")


def inter_contact_s(seen: Observed) -> float:
    """Mean gap between two spells of one pair in seconds (NaN: no pair met twice)."""
    gaps = seen.spells[1]
    return float(gaps.mean()) if gaps.size else float("nan")


def met_share(seen: Observed) -> float:
    """Mean share of the rest of the fleet an agent has met by the last step."""
    n = seen.agents
    met = np.diff(seen.met.indptr) / max(1, n - 1)
    return float(met.mean()) if n else float("nan")


def speed_cv(seen: Observed) -> float:
    """Coefficient of variation of the agents' mean speeds."""
    return speed_heterogeneity(seen.mean_speeds)


def label_skew(seen: Observed) -> float:
    """Label-skew index of the data split (NaN without learning)."""
    return float("nan") if seen.label_hist is None else label_skew_index(seen.label_hist)


def samples_per_agent(seen: Observed) -> float:
    """Mean training samples an agent holds (NaN without learning)."""
    return float("nan") if seen.data_sizes is None else float(np.mean(seen.data_sizes))


DESCRIPTORS: tuple[Descriptor, ...] = (
    Descriptor("neighbours_per_step", "agents", None, 2, "neighbours/step",
               "contacts per agent per step",
               "Mean over steps 1..T of the mean number of agents in range of an agent.",
               neighbours_per_step, page_header="contacts/step", on_map=True, on_pages=True,
               log_scale=True),
    Descriptor("contact_duration_s", "s", None, 0, "contact s", "contact duration",
               "Mean length of a spell of consecutive steps in range, x step_s (NaN: no "
               "contact).", contact_duration_s, on_map=True),
    Descriptor("inter_contact_s", "s", None, 0, "inter-contact s", "inter-contact time",
               "Mean gap between two spells of the same pair, x step_s (NaN: no pair met "
               "twice).", inter_contact_s, on_map=True),
    Descriptor("met_share", "share", None, 3, "met share", "met share",
               "Mean share of the rest of the fleet an agent has met by the last step.",
               met_share, on_map=True, on_pages=True),
    Descriptor("speed_cv", "", None, 2, "speed CV", "speed CV",
               "Coefficient of variation of the agents' mean speeds (0: all equal or all "
               "static).", speed_cv, on_map=True, on_pages=True),
    Descriptor("label_skew", "TV distance", None, 3, "label skew", "label skew",
               "Mean total-variation distance of an agent's labels from the pooled labels "
               "(0 to 1).", label_skew, on_map=True, on_pages=True),
    Descriptor("samples_per_agent", "samples", None, 0, "samples/agent", "samples per agent",
               "Mean training samples an agent holds (NaN without learning): data per agent "
               "decides how much a neighbour's model can add.", samples_per_agent,
               log_scale=True),
)
"""The regime descriptors, in the order of ``descriptors.csv`` and ``--describe``."""


# --- the metrics' functions -------------------------------------------------------------------
def _total(table: pd.DataFrame, column: str, agents: int) -> float:
    """``column`` summed over steps, over ``agents`` (NaN: absent, or a step unknown)."""
    if column not in table or agents <= 0:
        return float("nan")
    values = pd.to_numeric(table[column], errors="coerce")
    return float(values.sum(skipna=False)) / agents


def final_acc(table: pd.DataFrame, *, agents: int) -> float:
    """The last evaluated ``acc_mean``."""
    return last_value(table, "acc_mean")


def p10_acc(table: pd.DataFrame, *, agents: int) -> float:
    """The last evaluated ``acc_p10``."""
    return last_value(table, "acc_p10")


def auc_acc(table: pd.DataFrame, *, agents: int) -> float:
    """Mean ``acc_mean`` over the run's evaluations."""
    return curve_mean(table)


def last3_acc(table: pd.DataFrame, *, agents: int) -> float:
    """Mean ``acc_mean`` over the run's last three evaluations."""
    return curve_mean(table, last=3)


def bytes_per_agent(table: pd.DataFrame, *, agents: int) -> float:
    """Bytes sent over the run, per agent."""
    return _total(table, "bytes_sent", agents)


def energy_per_agent(table: pd.DataFrame, *, agents: int) -> float:
    """Radio energy over the run, per agent."""
    return _total(table, "energy_j", agents)


def end_s(table: pd.DataFrame, *, agents: int) -> float:
    """Simulated time of the last row."""
    return last_value(table, "time_s")


METRICS: tuple[Metric, ...] = (
    Metric("final_acc", "accuracy", True, 3, "final acc", "final mean accuracy",
           "The last evaluated mean accuracy over the agents.", final_acc, on_board=True),
    Metric("p10_acc", "accuracy", True, 3, "p10 acc", "10th-percentile agent's accuracy",
           "The last evaluated accuracy 90 % of the agents reach or beat.", p10_acc,
           on_board=True),
    Metric("auc_acc", "accuracy", True, 3, "mean acc", "mean accuracy over the run",
           "Mean accuracy over the run's evaluations (the area under the curve per "
           "evaluation).", auc_acc),
    Metric("last3_acc", "accuracy", True, 3, "last-3 acc", "mean of the last three accuracies",
           "Mean accuracy over the run's last three evaluations.", last3_acc),
    Metric("bytes_per_agent", "B", False, 0, "bytes/agent", "bytes sent per agent",
           "Bytes sent over the run, per agent (NaN: not counted, or a step unknown).",
           bytes_per_agent, on_board=True),
    Metric("energy_per_agent", "J", False, 3, "energy/agent", "radio energy per agent",
           "Radio energy over the run, per agent (NaN at the ideal link).", energy_per_agent,
           on_board=True),
    Metric("end_s", "s", None, 0, "end s", "simulated time at the end",
           "Simulated time of the run's last row.", end_s),
    Metric("budget_acc", "accuracy", True, 3, "budget acc", "accuracy within D-PSGD's bytes",
           "The best accuracy a run reached while it had sent at most D-PSGD's whole-run "
           "bytes per agent in the same world and seed.", None,
           source="mobidfl.analysis.answer.add_budget_accuracy (every policy's curves)"),
    Metric("cpu_s", "s", False, 1, "CPU s", "CPU time of the run",
           "CPU seconds the run took.", None, source="the run's manifest record"),
)
"""The metrics of a run; those with a function are the bench's per-run numbers, in order."""


# --- reading the tables -----------------------------------------------------------------------
def descriptor_named(name: str) -> Descriptor:
    """The descriptor called ``name`` (KeyError naming it if there is none)."""
    for d in DESCRIPTORS:
        if d.name == name:
            return d
    raise KeyError(f"no descriptor {name!r}")


def metric_named(name: str) -> Metric:
    """The metric called ``name`` (KeyError naming it if there is none)."""
    for m in METRICS:
        if m.name == name:
            return m
    raise KeyError(f"no metric {name!r}")


def descriptor_names() -> tuple[str, ...]:
    """Every descriptor's name, in table order."""
    return tuple(d.name for d in DESCRIPTORS)


def _axes_first(chosen: list[Descriptor], axes: tuple[str, ...]) -> list[Descriptor]:
    """``chosen`` with the regime map's two axes first, the rest in table order."""
    first = [descriptor_named(a) for a in axes]
    return first + [d for d in chosen if d.name not in axes]


def map_descriptors(axes: tuple[str, ...]) -> list[Descriptor]:
    """The descriptor columns of ``regime_map.csv``.

    Its ``axes``, then every ``on_map`` or ``on_pages`` descriptor in table order.
    """
    return _axes_first([d for d in DESCRIPTORS if d.on_map or d.on_pages], axes)


def page_descriptors(axes: tuple[str, ...]) -> list[Descriptor]:
    """The findings pages' world columns: ``axes``, then every ``on_pages`` descriptor."""
    return _axes_first([d for d in DESCRIPTORS if d.on_pages], axes)


def run_metrics(table: pd.DataFrame, *, agents: int) -> dict[str, float]:
    """Every metric with a function, computed from one run's per-step ``table``."""
    return {m.name: m.compute(table, agents=agents) for m in METRICS if m.compute is not None}


def board_metrics() -> tuple[str, ...]:
    """The metrics the leaderboard gives a mean and a half-width of, in table order."""
    return tuple(m.name for m in METRICS if m.on_board)

