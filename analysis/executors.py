"""How runs execute: one run, runs together in this process, a process pool, Ray.

The backends under every command that runs many worlds (:mod:`mobidfl.analysis.sweep`, and
through :mod:`mobidfl.analysis.runner` the bench, the study tuning and the paper
reproductions). Each takes :class:`RunSpec` and hands every :class:`RunResult` to a
``record`` callback in the driver, which alone writes (the sweep's design is in its
module's docstring). :func:`run_specs` picks the backend from the command's options.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mobidfl.cores import unloaded_cores
from mobidfl.errors import ConfigError

RAY_RETRIES = 2
"""Times a Ray run is sent again after its node or worker process died (not after it raised)."""


HEAD_CHECK_S = 2.0
"""How often the Ray driver checks that the cluster's head still answers."""


class SweepStopped(Exception):
    """The sweep cannot go on: one line saying why, what is saved and how to resume.

    A write failed, the Ray head went away, or another driver holds the folder.
    """


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: the settings passed to ``mesa.batch_run`` and its seed."""

    run_id: str
    point: int
    replicate: int
    seed: int
    params: dict[str, Any]
    settings: dict[str, Any]
    steps: int


@dataclass
class RunResult:
    """What a worker sends back: the run's table (or its error) and how long it took."""

    run_id: str
    status: str
    wall_s: float
    error: str = ""
    cpu_s: float = float("nan")
    """CPU seconds of the run's process while it ran (``time.process_time``)."""
    table: pd.DataFrame | None = None
    worker: str = ""
    trace: str = ""
    attempts: int = 1
    retried: str = ""


def execute_run(spec: RunSpec) -> RunResult:
    """Run one sweep run with ``mesa.batch_run`` (one model, one seed) and tidy its rows.

    Never raises: an exception in the run becomes ``status="error"`` with its message.
    """
    import mesa
    import torch

    from mobidfl.model.world import MobiDFLModel

    torch.set_num_threads(1)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    started = time.perf_counter()
    cpu_started = time.process_time()
    start_method = multiprocessing.get_start_method(allow_none=True)
    try:
        rows = mesa.batch_run(
            MobiDFLModel,
            parameters=dict(spec.settings),
            number_processes=1,
            rng=[spec.seed],
            data_collection_period=1,
            max_steps=spec.steps,
            display_progress=False,
        )
        table = tidy_rows(rows, spec)
    except Exception as exc:  # a failing run is recorded, the others go on
        return RunResult(
            run_id=spec.run_id,
            status="error",
            wall_s=time.perf_counter() - started,
            error=f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500],
            worker=worker,
            trace=traceback.format_exc(),
        )
    finally:
        multiprocessing.set_start_method(start_method, force=True)  # batch_run forces spawn
    return RunResult(
        run_id=spec.run_id,
        status="ok",
        wall_s=time.perf_counter() - started,
        table=table,
        worker=worker,
        cpu_s=time.process_time() - cpu_started,
    )


def run_batched(
    specs: Sequence[RunSpec],
    record: Callable[[RunSpec, RunResult], None],
    *,
    say: Callable[[str], None] | None = None,
) -> None:
    """Runs together as one program (``--batch-runs``).

    Build every run of ``specs`` (seeded and partitioned as alone), step those whose engines share
    :func:`mobidfl.model.learning.multirun.group_key` in lockstep with their stacks concatenated
    (training and evaluation one call over runs x agents), the rest one after the other, and
    ``record`` each run's table, made by ``mesa.batch_run`` from the finished model so that it has
    the rows of the same run alone (tests/analysis/test_batch_runs.py).

    Never raises for a failing run: a model that cannot be built or a step that raises
    becomes that run's ``status="error"`` (the other runs of its group go on).
    """
    import torch

    from mobidfl.model.learning.multirun import RunGroup, lockstep, plan_groups
    from mobidfl.model.world import MobiDFLModel

    torch.set_num_threads(1)  # as execute_run: each run's numbers as in a sweep worker
    worker = f"{socket.gethostname()}:{os.getpid()}"
    built: list[tuple[RunSpec, Any]] = []
    for spec in specs:  # one after the other: each model seeds torch while it is built
        started = time.perf_counter()
        try:
            built.append((spec, MobiDFLModel(**spec.settings, seed=spec.seed)))
        except Exception as exc:
            record(spec, RunResult(
                run_id=spec.run_id, status="error", wall_s=time.perf_counter() - started,
                error=f"{type(exc).__name__}: {exc}".replace("\n", " ")[:500], worker=worker,
                trace=traceback.format_exc(),
            ))  # fmt: skip
    together, alone = plan_groups([m for _, m in built])
    if say is not None:
        sizes = ", ".join(str(len(g)) for g in together) or "none"
        say(f"batch-runs: {len(built)} runs; together in groups of {sizes}; "
            f"{len(alone)} alone (no learning, workers > 1, or no run with the same net, "
            "data and learning settings)")  # fmt: skip
    for members in [*together, *([i] for i in alone)]:
        runs = [built[i] for i in members]
        group = RunGroup([m.learner.engine for _, m in runs]) if len(runs) > 1 else None
        started = time.perf_counter()
        errors = lockstep([(m, spec.steps) for spec, m in runs], group)
        wall = time.perf_counter() - started
        label = f"{worker} batch of {len(runs)}" if group is not None else worker
        for (spec, model), error in zip(runs, errors, strict=True):
            record(spec, _finished_run(spec, model, error, wall, label))


def _finished_run(
    spec: RunSpec, model: Any, error: str | None, wall: float, worker: str
) -> RunResult:
    """A run stepped by :func:`run_batched`.

    Its table made by ``mesa.batch_run`` from the finished model (the columns and rows of
    :func:`execute_run`), or its error.
    """
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


def tidy_rows(rows: list[dict[str, Any]], spec: RunSpec) -> pd.DataFrame:
    """``batch_run`` rows -> run id, point, replicate, seed, settings, then ``model.csv``."""
    frame = pd.DataFrame(rows).drop(columns=["RunId", "iteration"])
    frame = frame.rename(columns={"Step": "step"})
    frame["step"] = frame["step"].round().astype(int)
    settings = [c for c in spec.settings if c in frame and c != "seed"]
    metrics = [c for c in frame.columns if c not in settings and c not in ("step", "seed")]
    frame = frame[["step", *metrics]].copy()
    for position, (name, value) in enumerate(
        [
            ("run_id", spec.run_id),
            ("point", spec.point),
            ("replicate", spec.replicate),
            ("seed", spec.seed),
            *spec.settings.items(),
        ]
    ):
        frame.insert(position, name, value)
    return frame


def worker_context() -> Any:
    """``forkserver`` with torch and the model preloaded, else ``spawn``.

    Both start workers from a clean interpreter (no inherited torch threads, as Mesa's own
    ``spawn``); the fork server imports torch, Mesa and the model once for every worker and
    every later pool of this process, so workers start and exit in a fraction of the time
    a fresh import takes (docs/performance/measurements.md).
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # first: the server ends with this process (mobidfl/lifetime.py), even mid-import
    context.set_forkserver_preload(["mobidfl.forkserver_preload", "torch", "mesa",
                                    "mobidfl.model.world", "mobidfl.analysis.executors"])
    return context


def _init_worker(driver: int) -> None:
    """One torch thread.

    Exit when the driver process is gone (killed sweeps leave no orphans: pool workers would
    otherwise wait forever on their task queue, holding the driver's standard streams). Two ways:
    the parent-death signal (the fork server, or the driver under ``spawn``), and a poll of the
    driver for a parent that died before it was set (:mod:`mobidfl.lifetime`).
    """
    import threading

    import torch

    from mobidfl.lifetime import die_with_parent

    die_with_parent()
    torch.set_num_threads(1)
    # Ctrl-C reaches the whole process group (or the driver forwards it): a worker abandons
    # its run, which the driver records as pending; an idle worker ignores it. Either way
    # the worker stays alive, so the pool shuts down cleanly and prints nothing.
    signal.signal(signal.SIGINT, _interrupt_run)
    threading.Thread(target=_exit_with, args=(driver,), daemon=True).start()


_IN_RUN = False
"""True while this pool worker executes a run (SIGINT interrupts only then)."""


def _pool_run(spec: RunSpec) -> RunResult:
    """:func:`execute_run` in a pool worker, interruptible by SIGINT."""
    global _IN_RUN  # noqa: PLW0603 - this process's flag, read by its SIGINT handler
    _IN_RUN = True
    try:
        return execute_run(spec)
    finally:
        _IN_RUN = False


def _interrupt_run(signum: int, frame: Any) -> None:
    if _IN_RUN:
        raise KeyboardInterrupt


def _exit_with(driver: int, *, every_s: float = 1.0) -> None:
    """Exit once ``driver`` has ended.

    A killed driver that its caller has not reaped yet (a zombie, while the caller still reads the
    streams this worker holds) counts as ended.
    """
    from mobidfl.lifetime import process_gone

    while True:
        time.sleep(every_s)
        if process_gone(driver):
            os._exit(1)


def run_local(
    todo: Sequence[RunSpec], record: Callable[[RunResult], None], *, workers: int
) -> None:
    """At most ``workers`` runs in flight; a dead worker marks its runs ``lost``."""
    context = worker_context()
    queue = list(reversed(todo))

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            workers, mp_context=context, initializer=_init_worker, initargs=(os.getpid(),)
        )

    pool = new_pool()
    inflight: dict[Future, RunSpec] = {}
    try:
        while queue or inflight:
            while queue and len(inflight) < workers:
                spec = queue.pop()
                inflight[pool.submit(_pool_run, spec)] = spec
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                spec = inflight.pop(future)
                try:
                    result = future.result()
                except BrokenProcessPool as exc:
                    broken = True
                    result = _lost(spec, f"worker process died ({exc})")
                record(result)
            if broken:
                for future, spec in list(inflight.items()):
                    record(_lost(spec, "worker process died"))
                    inflight.pop(future)
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool()
    except KeyboardInterrupt:  # Ctrl-C: abandon the runs in flight (they stay pending)
        _interrupt_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _interrupt_workers(pool: ProcessPoolExecutor) -> None:
    """Forward Ctrl-C to the workers (``kill -INT`` may have reached the driver only).

    The executor has no public API for its processes (``_processes``).
    """
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(process.pid, signal.SIGINT)


def run_ray(
    todo: Sequence[RunSpec],
    record: Callable[[RunResult], None],
    *,
    address: str | None,
    resources: Mapping[str, float],
    stopped: Callable[[str], str] = lambda why: why,
    retries: int = RAY_RETRIES,
) -> None:
    """Every run as a Ray task; a run whose node or worker died is sent again.

    ``max_retries=0``: the retries are ours, so the manifest can say them; a run whose node or
    worker process died is sent again up to ``retries`` times (``attempts`` and ``retried`` in its
    manifest row), then recorded ``lost``. A run that raised is not retried (its error is the run's,
    not the node's). The head going away stops the sweep with :class:`SweepStopped` (one line; the
    runs finished so far are saved, the rest stay pending for ``--resume``).
    """
    with ray_session(address) as ray:
        head = _head_address(ray)
        options = ray_options(resources)
        if todo:
            check_feasible(ray, options)
        task = ray.remote(_ray_run).options(max_retries=0, **options)
        attempts: dict[str, list[str]] = {spec.run_id: [] for spec in todo}
        refs = {task.remote(spec): spec for spec in todo}
        checked = time.monotonic()
        while refs:
            try:
                done, _ = ray.wait(list(refs), num_returns=1, timeout=HEAD_CHECK_S)
            except Exception as exc:
                raise SweepStopped(stopped(_head_gone(head, exc))) from None
            if not done or time.monotonic() - checked > HEAD_CHECK_S:
                checked = time.monotonic()
                if head is not None and not _answers(head):
                    raise SweepStopped(stopped(_head_gone(head, None)))
            for ref in done:
                spec = refs.pop(ref)
                tried = attempts[spec.run_id]
                try:
                    result = ray.get(ref)
                except Exception as exc:  # node died, worker process died, object lost
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    if head is not None and not _answers(head):
                        raise SweepStopped(stopped(_head_gone(head, None))) from None
                    tried.append(why)
                    if len(tried) <= retries:
                        refs[task.remote(spec)] = spec
                        continue
                    result = _lost(spec, f"Ray task failed {len(tried)} times: {why}")
                result.attempts = len(tried) + 1 if result.status != "lost" else len(tried)
                result.retried = " | ".join(f"attempt {n + 1}: {w}" for n, w in enumerate(tried))
                record(result)


@contextlib.contextmanager
def ray_session(address: str | None) -> Iterator[Any]:
    """The ``ray`` module, connected.

    A Ray already initialised by the caller is used as it is; otherwise a local Ray (127.0.0.1 only)
    or the cluster at ``address`` is joined here and left at the end.
    """
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend", "ray", "installed Ray (pip install 'ray>=2.60')") from None
    started_here = not ray.is_initialized()
    if started_here:
        from mobidfl.model.ray_local import init_ray

        # A local Ray listens on 127.0.0.1 only; a cluster address is the user's choice.
        init_ray(ray, address=address, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        if started_here:
            with contextlib.suppress(Exception):
                ray.shutdown()


def ray_options(resources: Mapping[str, float]) -> dict[str, float]:
    """Ray's options for one run's ``resources``: the CPUs always, others only where asked."""
    return {k: v for k, v in resources.items() if v or k == "num_cpus"}


def _ray_run(spec: RunSpec) -> RunResult:
    """:func:`execute_run` as a Ray task; ``worker`` names the node and what it granted."""
    import ray

    result = execute_run(spec)
    context = ray.get_runtime_context()
    granted = {k: round(v, 3) for k, v in sorted(context.get_assigned_resources().items())}
    result.worker += f" node={context.get_node_id()[:12]} {json.dumps(granted)}"
    return result


def check_feasible(ray: Any, options: Mapping[str, float]) -> None:
    """Refuse a per-run request that no live node can ever meet (Ray would wait forever)."""
    wanted = {"CPU": options.get("num_cpus", 0), "GPU": options.get("num_gpus", 0),
              "memory": options.get("memory", 0)}  # fmt: skip
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    if not nodes or any(all(n.get(k, 0) >= v for k, v in wanted.items()) for n in nodes):
        return
    offered = "; ".join(
        ", ".join(f"{k} {n.get(k, 0):g}" for k in wanted) for n in nodes
    )
    raise ConfigError(
        "--cpus-per-run/--gpus-per-run/--memory-per-run",
        ", ".join(f"{k} {v:g}" for k, v in wanted.items()),
        f"what one node of the cluster has (nodes: {offered})",
    )


def _head_address(ray: Any) -> tuple[str, int] | None:
    """The head's GCS (host, port) this driver is connected to (None for a Ray client)."""
    try:
        host, _, port = ray.get_runtime_context().gcs_address.rpartition(":")
        return host, int(port)
    except Exception:
        return None


def _answers(head: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(head, timeout=HEAD_CHECK_S):
            return True
    except OSError:
        return False


def _head_gone(head: tuple[str, int] | None, exc: Exception | None) -> str:
    where = f" at {head[0]}:{head[1]}" if head else ""
    detail = f" ({type(exc).__name__})" if exc is not None else ""
    return f"the Ray cluster's head{where} went away{detail}"


def _lost(spec: RunSpec, why: str) -> RunResult:
    return RunResult(run_id=spec.run_id, status="lost", wall_s=float("nan"), error=why[:500])


def run_specs(
    todo: Sequence[RunSpec],
    record: Callable[[RunSpec, RunResult], None],
    *,
    backend: str = "local",
    processes: int | None = None,
    address: str | None = None,
    resources: Mapping[str, float] | None = None,
    batch_runs: bool = False,
    say: Callable[[str], None] | None = None,
    stopped: Callable[[str], str] = lambda why: why,
) -> None:
    """Run ``todo`` on the backend the options pick and ``record(spec, result)`` each run.

    WHY one place: the sweep, the bench, the study tuning and the reproductions choose the
    same way. Ray with ``backend="ray"`` (``resources`` per run, ``stopped`` words the line
    when its head goes away); with ``batch_runs`` every run in this process as one program
    (:func:`run_batched`, ``say`` its grouping); with ``processes=0`` one after the other in
    this process; else a process pool of ``processes`` workers (default: the cores not busy
    now), never more than the runs.
    """
    if not todo:
        return
    if backend != "ray" and (batch_runs or processes == 0):
        if batch_runs:
            run_batched(todo, record, say=say)
        else:
            for spec in todo:
                record(spec, execute_run(spec))
        return
    specs = {spec.run_id: spec for spec in todo}
    if len(specs) < len(todo):
        raise ValueError("run ids repeat in one batch: a pool's or Ray's result names its run "
                         "by id only")

    def by_id(result: RunResult) -> None:
        record(specs[result.run_id], result)

    if backend == "ray":
        run_ray(todo, by_id, address=address, resources=resources or {}, stopped=stopped)
    else:
        run_local(todo, by_id, workers=min(processes or unloaded_cores(), len(todo)))
