"""A run's whole state as plain data, and putting it back: what checkpoints hold.

:func:`state_dict` gathers everything needed to continue a run exactly (random generators,
positions, mobility, contacts so far, learning, link totals, the collected tables);
:func:`load_state_dict` puts it into a model built with the same config.
:mod:`mobidfl.model.checkpoint` writes and reads the files.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np
import scipy.sparse as sp

from mobidfl.contact_table import CONTACT_COLUMNS
from mobidfl.model.learning.results import Evaluation
from mobidfl.model.outputs import ColumnLog

World = Any
"""The running :class:`mobidfl.model.world.MobiDFLModel` (not imported: that module imports this
one)."""


def state_dict(model: World) -> dict[str, Any]:
    """Everything needed to continue ``model``'s run exactly."""
    return {
        "steps": model.steps,
        "running": bool(model.running),  # False after an early stop: a resume stays stopped
        "rng": model.rng.bit_generator.state,
        "random": model.random.getstate(),
        "position": model.position.copy(),
        "speed": model.speed.copy(),
        "mobility": [mobility.state_dict() for *_, mobility in model.groups],
        "met": {"indptr": model.met.indptr.copy(), "indices": model.met.indices.copy()},
        "adjacency": {
            "indptr": model.adjacency.indptr.copy(),
            "indices": model.adjacency.indices.copy(),
        },
        "accuracy": model.accuracy.copy(),
        "loss": model.loss.copy(),
        "consensus": model.consensus,
        "policy_metrics": dict(model.policy_metrics),
        "model_vars": {k: list(v) for k, v in model.datacollector.model_vars.items()},
        "records": model.records.blocks(),
        "learner": None if model.learner is None else model.learner.state_dict(),
        "link": None if model.link_totals is None else {
            "model": None if model.link.ideal else model.link.state_dict(),
            "totals": model.link_totals,
        },
        "contacts": None if not model.record_contacts else {
            c: np.array(v) for c, v in model.contacts_table().items()
        },
    }


class IncompatibleCheckpoint(ValueError):
    """A checkpoint whose tables this version cannot continue.

    An older MobiDFL wrote other ``model.csv`` / ``agents.parquet`` columns: the checkpoint
    is refused before any step, and the file is kept.
    """


def check_tables(model: World, state: dict[str, Any]) -> None:
    """Refuse ``state`` unless its collected tables have this version's columns for ``model``.

    WHY: a checkpoint of an older version (commit 0ca62c9: no ``acc_p10``, ``degree_mean``
    instead of per-policy columns) loaded fine, ran every remaining step, overwrote its
    state.pt, then failed writing model.csv (columns of unequal length): the old checkpoint
    was lost. Comparing the columns first refuses it while it is still whole.
    """
    saved = state.get("model_vars")
    if not isinstance(saved, dict):
        raise IncompatibleCheckpoint("it holds no model.csv columns")
    wanted = list(model.datacollector.model_reporters)
    _same_columns("model.csv", list(saved), wanted)
    lengths = {len(v) for v in saved.values()}
    if len(lengths) > 1:
        raise IncompatibleCheckpoint(
            f"its model.csv columns have different lengths ({sorted(lengths)})"
        )
    blocks = state.get("records") or []
    if model.records.columns is not None:
        for block in blocks:
            _same_columns("agents.parquet", list(block), list(model.records.columns))
    contacts = state.get("contacts")
    if isinstance(contacts, dict) and model.record_contacts:
        _same_columns("contacts", list(contacts), list(CONTACT_COLUMNS))


def _same_columns(table: str, saved: list[str], wanted: list[str]) -> None:
    missing = [c for c in wanted if c not in saved]
    extra = [c for c in saved if c not in wanted]
    if not missing and not extra:
        return
    parts = []
    if missing:
        parts.append(f"without {_some(missing)}")
    if extra:
        parts.append(f"with {_some(extra)}, which this version does not write")
    raise IncompatibleCheckpoint(
        f"it was written by another MobiDFL version: its {table} columns differ "
        f"({'; '.join(parts)})"
    )


def _some(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def load_state_dict(model: World, state: dict[str, Any]) -> None:
    """Continue ``model`` from :func:`state_dict` of a run built with the same config.

    Raises :class:`IncompatibleCheckpoint` (before changing ``model``) when the state's
    tables are not this version's (:func:`check_tables`), and ``ValueError`` (likewise) when
    ``model`` has run past the state's step (:func:`restart_clock`).
    """
    check_tables(model, state)
    restart_clock(model, int(state["steps"]))  # first: Mesa's clock only, the step does nothing
    n = model.n_agents
    model.rng.bit_generator.state = state["rng"]
    model.running = bool(state.get("running", True))
    model.random.setstate(_as_random_state(state["random"]))
    model.position = np.asarray(state["position"], float).copy()
    model.speed = np.asarray(state["speed"], float).copy()
    for (*_, mobility), mobility_state in zip(model.groups, state["mobility"], strict=True):
        mobility.load_state_dict(mobility_state)
    model.met = _bool_csr(state["met"], n)
    model.adjacency = _bool_csr(state["adjacency"], n)
    model.neighbours_now = np.diff(model.adjacency.indptr)
    model.distinct_neighbours = np.diff(model.met.indptr)
    model.evaluation = Evaluation(
        accuracy=state["accuracy"], loss=state["loss"], consensus=state["consensus"]
    )
    model.policy_metrics = MappingProxyType(dict(state["policy_metrics"]))
    for key, values in state["model_vars"].items():
        model.datacollector.model_vars[key] = list(values)
    model.records = ColumnLog()
    for block in state["records"]:
        model.records.append(block)
    if model.learner is not None:
        model.learner.load_state_dict(state["learner"])
    if state.get("link") is not None and model.link_totals is not None:
        if not model.link.ideal:
            model.link.load_state_dict(state["link"]["model"])
        model.link_totals = {c: np.asarray(v, float) for c, v in state["link"]["totals"].items()}
    contacts = state.get("contacts")
    if contacts is None and state.get("link") is not None:  # checkpoints before contacts_out
        contacts = state["link"].get("contacts")
    if contacts is not None and model.record_contacts:
        model.contact_log = ColumnLog(CONTACT_COLUMNS)
        columns = {c: np.asarray(v) for c, v in dict(contacts).items()}
        if len(columns[CONTACT_COLUMNS[0]]):
            model.contact_log.append(columns)


def restart_clock(model: World, steps: int) -> None:
    """Bring Mesa's clock to ``steps`` steps, so that the next ``step()`` is step ``steps + 1``.

    Mesa 3.5 drives ``step`` from a recurring event it keeps to itself and has no public call
    to move that event; its public ``run_until`` moves it: the clock runs through the
    ``steps`` step events (``model.steps`` and ``model.time`` count them) while the model's
    ``step`` returns at once (``MobiDFLModel._clock_only``; microseconds a step). A
    subclass's own code around ``super().step()`` runs then too. Mesa's clock does not go
    back: ``model`` must not have run past ``steps``. A public way to start Mesa's step
    schedule at a given time is not asked for upstream yet; the issue we would file (not
    filed) is in docs/concepts/world.md, "Mesa's public API only".
    """
    if model.time > steps:
        raise ValueError(
            f"a checkpoint of step {steps} continues a model that has not run past it "
            f"(this one is at step {model.steps})"
        )
    if model.time < steps:
        model._clock_only = True
        try:
            model.run_until(float(steps))
        finally:
            model._clock_only = False
    if (model.steps, model.time) != (steps, float(steps)):
        raise RuntimeError(f"Mesa's clock is at step {model.steps}, time {model.time}, not {steps}")


def _bool_csr(parts: dict[str, np.ndarray], n: int) -> sp.csr_matrix:
    indices = np.asarray(parts["indices"])
    return sp.csr_matrix(
        (np.ones(len(indices), bool), indices, np.asarray(parts["indptr"])), shape=(n, n)
    )


def _as_random_state(state: Any) -> tuple:
    version, internal, gauss = state
    return (int(version), tuple(int(v) for v in internal), gauss)
