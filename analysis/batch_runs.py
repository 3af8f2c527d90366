"""Runs of a sweep executed together as one program (``--batch-runs``, issue 22 item 4).

``mobidfl reproduce PAPER --batch-runs`` and ``mobidfl sweep --batch-runs`` hand their runs
here instead of one ``mesa.batch_run`` per run (:func:`analysis.sweep.execute_run`): every
run's :class:`model.world.MobiDFLModel` is built (seeded and partitioned exactly as alone),
runs whose engines share :func:`model.learning.multirun.group_key` form one
:class:`model.learning.multirun.RunGroup` (their stacks concatenated, training and evaluation
one call over runs x agents), and each model steps in its own thread in lockstep with the
others. When a run ends its table is made by ``mesa.batch_run`` from the finished model, so
it has the columns and values of the same run alone (tests/test_batch_runs.py). Runs that
cannot be grouped (no learning, worker processes, a different net or backend) run alone,
one after the other, and the summary line says so.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from analysis.sweep import RunResult, RunSpec, tidy_rows

__all__ = ["lockstep", "plan_groups", "run_batched"]


def plan_groups(models: Sequence[Any]) -> tuple[list[list[int]], list[int]]:
    """Indices of ``models`` that can run as one program (groups of >= 2, in order), and
    those that run alone."""
    from model.learning.multirun import group_key

    groups: dict[tuple, list[int]] = {}
    alone: list[int] = []
    for i, model in enumerate(models):
        key = None if model.learner is None else group_key(model.learner.engine)
        if key is None:
            alone.append(i)
        else:
            groups.setdefault(key, []).append(i)
    together = [g for g in groups.values() if len(g) > 1]
    alone += [g[0] for g in groups.values() if len(g) == 1]
    return together, sorted(alone)


def run_batched(
    specs: Sequence[RunSpec],
    record: Callable[[RunSpec, RunResult], None],
    *,
    say: Callable[[str], None] | None = None,
) -> None:
    """Build every run of ``specs``, run the groupable ones together, ``record`` each result.

    Never raises for a failing run: a model that cannot be built or a step that raises
    becomes that run's ``status="error"`` (the other runs of its group go on).
    """
    import torch

    from model.learning.multirun import RunGroup
    from model.world import MobiDFLModel

    torch.set_num_threads(1)  # as execute_run: each run's numbers as in a sweep worker
    worker = f"{socket.gethostname()}:{os.getpid()}"
    built: list[tuple[RunSpec, Any]] = []
    for spec in specs:  # one after the other: each model seeds torch while it is built
        started = time.perf_counter()
        try:
            built.append((spec, MobiDFLModel(**spec.settings, seed=spec.seed)))
        except Exception as exc:
            record(spec, _failed(spec, exc, started, worker))
    together, alone = plan_groups([m for _, m in built])
    if say is not None:
        sizes = ", ".join(str(len(g)) for g in together) or "none"
        say(f"batch-runs: {len(built)} runs; together in groups of {sizes}; "
            f"{len(alone)} alone (no learning, workers > 1, or no run with the same net, "
            "data and learning settings)")  # fmt: skip
    for members in together:
        runs = [built[i] for i in members]
        group = RunGroup([model.learner.engine for _, model in runs])
        started = time.perf_counter()
        errors = lockstep([(spec, model) for spec, model in runs], group)
        wall = time.perf_counter() - started
        label = f"{worker} batch of {len(runs)}"
        for (spec, model), error in zip(runs, errors, strict=True):
            record(spec, _result(spec, model, error, wall, label))
    for i in alone:
        spec, model = built[i]
        started = time.perf_counter()
        error = lockstep([(spec, model)], None)[0]
        record(spec, _result(spec, model, error, time.perf_counter() - started, worker))


def lockstep(runs: Sequence[tuple[RunSpec, Any]], group: Any) -> list[str | None]:
    """Step every model to its end (or early stop), each in its own thread when ``group``
    is a :class:`model.learning.multirun.RunGroup` (one after the other when ``None``);
    the traceback of each run that raised, else ``None``. On Ctrl-C every run stops after
    its current step and the KeyboardInterrupt goes on (the runs stay pending)."""
    errors: list[str | None] = [None] * len(runs)
    stop = threading.Event()

    def drive(i: int, spec: RunSpec, model: Any) -> None:
        try:
            if group is not None:
                group.enter()
            while not stop.is_set() and model.running and model.steps < spec.steps:
                model.step()  # as mesa.batch_run steps a run
        except Exception:
            errors[i] = traceback.format_exc()
        finally:
            if group is not None:
                group.leave()

    if group is None:
        for i, (spec, model) in enumerate(runs):
            drive(i, spec, model)
        return errors
    workers = [
        threading.Thread(target=drive, args=(i, spec, model), name=f"run-{spec.run_id}",
                         daemon=True)  # fmt: skip
        for i, (spec, model) in enumerate(runs)
    ]
    for thread in workers:
        thread.start()
    try:
        for thread in workers:
            thread.join()
    except KeyboardInterrupt:  # Ctrl-C: every run ends its current step, none is recorded
        stop.set()
        for thread in workers:
            thread.join()
        raise
    return errors


def _result(spec: RunSpec, model: Any, error: str | None, wall: float, worker: str) -> RunResult:
    """The run's table, made by ``mesa.batch_run`` from the finished model (same columns and
    rows as :func:`analysis.sweep.execute_run`), or its error."""
    import mesa

    if error is not None:
        last = error.strip().splitlines()[-1]
        return RunResult(run_id=spec.run_id, status="error", wall_s=wall, error=last[:500],
                         worker=worker, trace=error)  # fmt: skip

    def finished(*, seed: int, **_: Any) -> Any:
        return model

    start_method = multiprocessing.get_start_method(allow_none=True)
    try:
        rows = mesa.batch_run(finished, parameters=dict(spec.settings), number_processes=1,
                              rng=[spec.seed], data_collection_period=1, max_steps=spec.steps,
                              display_progress=False)  # fmt: skip
    finally:
        multiprocessing.set_start_method(start_method, force=True)  # batch_run forces spawn
    return RunResult(run_id=spec.run_id, status="ok", wall_s=wall,
                     table=tidy_rows(rows, spec), worker=worker)  # fmt: skip


def _failed(spec: RunSpec, exc: Exception, started: float, worker: str) -> RunResult:
    return RunResult(
        run_id=spec.run_id,
        status="error",
        wall_s=time.perf_counter() - started,
        error=f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500],
        worker=worker,
        trace=traceback.format_exc(),
    )
