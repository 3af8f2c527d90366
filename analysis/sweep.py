"""Parameter sweeps: a base config, a grid of values and seeds, run through ``mesa.batch_run``.

A sweep file (TOML)::

    replicates = 3            # seeds per point: seed, seed+1, ... (or `seeds = [..]`)
    [base]                    # any run settings (`mobidfl settings`), nested kind tables too
    vehicles = 48
    steps = 200
    [grid]                    # every combination is one point
    hm_fraction = [0.0, 0.05, 0.2, 0.8]
    mobility_alpha = [0.0, 0.4]

Design (why not one big ``batch_run``): ``mesa.batch_run`` returns its rows only when every
run has finished, so a killed sweep would lose everything. Each run is therefore *one*
``mesa.batch_run(MobiDFLModel, parameters=<this run's settings>, rng=[seed],
number_processes=1, data_collection_period=1, max_steps=steps)`` call (:func:`execute_run`):
Mesa still builds, seeds (``seed=`` from the ``rng`` list) and steps the one model class and
collects its DataCollector rows, while the parallelism is ours:

* ``local``: a process pool (fork server, else ``spawn`` as in Mesa) of ``number_processes``
  workers (default: the cores not busy when the sweep starts), one torch thread each. At most
  one run per worker is in flight, so a killed sweep loses at most ``number_processes`` runs;
  workers watch the driver's pid and exit when it is gone (no orphans after SIGKILL).
* ``--batch-runs`` (:func:`run_batched`): every run in this process; runs that share the
  net, data and learning settings step in lockstep as one program (their stacks
  concatenated, :mod:`mobidfl.model.learning.multirun`), each table equal to the run alone.
* ``ray``: the same function as a Ray task with per-run ``num_cpus``/``num_gpus`` hints, on a
  local Ray instance or the cluster at ``address`` (``auto`` or ``ray://HOST:PORT``; every
  node needs MobiDFL installed). Tasks return their table, so workers need no shared disk.
  A run whose node or worker process dies is sent again (``RAY_RETRIES``; the manifest's
  ``attempts`` and ``retried`` say so); the head going away stops the sweep in one line.

Only the driver writes: each finished run becomes ``DIR/runs/<run_id>.parquet`` (written to a
temporary name, then renamed; its Parquet metadata repeats the manifest row) and
``DIR/manifest.csv`` is rewritten atomically (run id, point, replicate, seed, grid values,
status, wall time, error, attempts). A run's file is written before its manifest row; a
write that fails (full disk, read-only folder) stops the sweep with one line
(:class:`SweepStopped`) and leaves every finished run readable. ``DIR/sweep.lock`` is held
(``flock``) by the one driver writing ``DIR``. Statuses: ``ok``; ``error`` (the run
raised: its message is kept and the other runs go on); ``lost`` (its worker process
died); ``pending``. ``resume=True`` skips runs whose Parquet file exists and, unless
``retry_errors``, runs that raised; it re-runs the rest. Run ids hash the run's settings
and seed, so a changed sweep file never reuses a stale result. The same seed gives the
same table on every backend (tests/analysis/test_sweep.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import product
from pathlib import Path
from typing import Any

import pandas as pd

from mobidfl.analysis.executors import (  # noqa: F401 - re-exported: the sweep's public API
    HEAD_CHECK_S,
    RAY_RETRIES,
    RunResult,
    RunSpec,
    SweepStopped,
    check_feasible,
    execute_run,
    ray_options,
    ray_session,
    run_batched,
    run_specs,
    tidy_rows,
)
from mobidfl.analysis.interrupts import CtrlC
from mobidfl.atomic import open_atomic
from mobidfl.atomic import write_text_atomic as _write_text
from mobidfl.errors import ConfigError
from mobidfl.model.config import (
    KINDS,
    SEED_MAX,
    Config,
    canonical_name,
    check_one_name_each,
    flatten,
    public_names,
    read_toml,
)
from mobidfl.toml_text import toml_value

SWEEP_KEYS = ("replicates", "seeds", "base", "grid")
MANIFEST = "manifest.csv"
LOCK = "sweep.lock"
"""Held (``flock``) by the one driver writing a sweep folder; a second driver is refused."""
RUNS = "runs"
SWEEP_FILE = "sweep.toml"
BACKENDS = ("local", "ray")
_META_KEY = b"mobidfl_run"
MAX_RUNS = 100_000
"""Runs per sweep (grid points x seeds): each is a Parquet file and a manifest row."""


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


# --- the sweep file ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Sweep:
    """A validated sweep: base settings, grid values and seeds (public setting names).

    Build it with :meth:`from_toml` or :meth:`from_dict`, which check everything before any
    run starts (a :class:`~mobidfl.errors.ConfigError` names the setting).

    Parameters
    ----------
    base
        Settings shared by every run.
    grid
        Each swept setting with its values; every combination is a point.
    seeds
        The seeds each point runs with (the replicates).
    """

    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)

    @classmethod
    def from_toml(cls, path: str | Path) -> Sweep:
        """The sweep declared in a TOML file, checked as :meth:`from_dict` does."""
        return cls.from_dict(read_toml(path, source="sweep file"))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sweep:
        """Check everything before any run starts; a ``ConfigError`` names the setting."""
        for key in data:
            if key not in SWEEP_KEYS:
                raise ConfigError(key, data[key], "a sweep key: " + ", ".join(SWEEP_KEYS))
        base_raw = data.get("base", {})
        grid_raw = data.get("grid", {})
        for key, value in (("base", base_raw), ("grid", grid_raw)):
            if not isinstance(value, Mapping):
                raise ConfigError(key, value, "a table of settings")
        check_one_name_each(flatten(base_raw))
        base = {_public_name(k): v for k, v in flatten(base_raw)}
        base_config = Config.from_settings(base)
        if "seed" in base and "seeds" in data:
            raise ConfigError("base.seed", base["seed"], "no base seed when `seeds` is set")
        grid: dict[str, list[Any]] = {}
        for raw_name, values in flatten(grid_raw):
            name = _public_name(raw_name)
            if name == "seed":
                raise ConfigError("grid.seed", values, "no seed in [grid]: use replicates/seeds")
            if canonical_name(name) in {canonical_name(n) for n in grid}:
                raise ConfigError(f"grid.{raw_name}", values, f"one entry for setting {name}")
            if not isinstance(values, list) or not values:
                raise ConfigError(f"grid.{raw_name}", values, "a non-empty list of values")
            resolved = [_value_of(base_config.updated({name: v}), name) for v in values]
            if len({json.dumps(v) for v in resolved}) != len(resolved):
                raise ConfigError(f"grid.{raw_name}", values, "a list without repeated values")
            grid[name] = resolved
        seeds = _seeds(data, base_config.seed)
        runs = math.prod(len(v) for v in grid.values()) * len(seeds)
        if runs > MAX_RUNS:
            raise ConfigError(
                "grid x replicates", runs, f"at most {MAX_RUNS} runs (grid points x seeds)"
            )
        sweep = cls(
            base={k: _value_of(base_config, k) for k in base if k != "seed"},
            grid=grid,
            seeds=seeds,
        )
        for params in sweep.points():  # joint checks (turn probabilities, agent count, ...)
            base_config.updated(params)
        return sweep

    def points(self) -> list[dict[str, Any]]:
        """Every combination of grid values, in file order (the last name varies fastest)."""
        names = list(self.grid)
        return [dict(zip(names, combo, strict=True)) for combo in product(*self.grid.values())]

    def runs(self) -> list[RunSpec]:
        """All runs, seed-major (every point once before the next replicate)."""
        specs = []
        points = self.points()
        for replicate, seed in enumerate(self.seeds):
            for index, params in enumerate(points):
                settings = {**self.base, **params}
                config = Config.from_settings(settings, seed=seed)
                digest = hashlib.sha1(
                    json.dumps({"settings": settings, "seed": seed}, sort_keys=True).encode()
                ).hexdigest()
                specs.append(
                    RunSpec(
                        run_id=f"p{index:03d}-s{seed}-{digest[:8]}",
                        point=index,
                        replicate=replicate,
                        seed=seed,
                        params=dict(params),
                        settings=settings,
                        steps=config.steps,
                    )
                )
        return specs

    def to_toml(self) -> str:
        """The sweep with resolved values (copied into the output folder)."""
        lines = [f"seeds = {json.dumps(list(self.seeds))}", "", "[base]"]
        lines += [f'"{k}" = {toml_value(v)}' for k, v in self.base.items() if v is not None]
        lines += ["", "[grid]"]
        lines += [
            f'"{k}" = [{", ".join(toml_value(v) for v in vs)}]' for k, vs in self.grid.items()
        ]
        return "\n".join(lines) + "\n"


def _seeds(data: Mapping[str, Any], first: int) -> tuple[int, ...]:
    if "seeds" in data:
        seeds = data["seeds"]
        if (
            not isinstance(seeds, list)
            or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
            or len(set(seeds)) != len(seeds)
        ):
            raise ConfigError("seeds", seeds, "a non-empty list of distinct integers")
        if len(seeds) > MAX_RUNS or not all(0 <= s <= SEED_MAX for s in seeds):
            raise ConfigError("seeds", seeds, f"at most {MAX_RUNS} integers in [0, {SEED_MAX}]")
        if "replicates" in data and data["replicates"] != len(seeds):
            raise ConfigError("replicates", data["replicates"], f"{len(seeds)} (len(seeds))")
        return tuple(seeds)
    replicates = data.get("replicates", 1)
    if not isinstance(replicates, int) or isinstance(replicates, bool) or replicates < 1:
        raise ConfigError("replicates", replicates, "an integer >= 1")
    if replicates > MAX_RUNS:
        raise ConfigError("replicates", replicates, f"at most {MAX_RUNS} (runs per sweep)")
    if first + replicates - 1 > SEED_MAX:
        raise ConfigError(
            "replicates", replicates, f"seeds up to {SEED_MAX} (seed + replicates - 1)"
        )
    return tuple(first + r for r in range(replicates))


def _public_name(name: str) -> str:
    """``vehicle_policy`` -> ``vehicle.policy``.

    An old flat name (``hm_fraction``) stays as written, so manifests keep their columns; unknown
    names fail naming the setting.
    """
    if name in _PUBLIC:
        return name
    for kind in KINDS:
        dotted = f"{kind}.{name.removeprefix(kind + '_')}"
        if name.startswith(kind + "_") and dotted in _PUBLIC:
            return dotted
    canonical_name(name)  # an alias of a plug-in setting, or ConfigError
    return name


def _value_of(config: Config, name: str) -> Any:
    return config.setting(name)


_PUBLIC = frozenset(public_names())


# --- the driver ---------------------------------------------------------------------------------


def run_sweep(
    sweep: Sweep,
    out: str | Path,
    *,
    backend: str = "local",
    processes: int | None = None,
    address: str | None = None,
    cpus_per_run: float = 1.0,
    gpus_per_run: float = 0.0,
    memory_per_run: float = 0.0,
    resume: bool = False,
    retry_errors: bool = False,
    progress: bool = True,
    batch_runs: bool = False,
) -> pd.DataFrame:
    """Run every run of ``sweep`` not finished yet into ``out``; return the manifest.

    Parameters
    ----------
    sweep
        The validated sweep.
    out
        Output folder: new or empty, or the sweep's own folder with ``resume``.
    backend
        ``local`` (process pool) or ``ray``.
    processes
        Local workers (default :func:`mobidfl.cores.unloaded_cores`); ``0`` runs in this process.
    address
        Ray cluster (``auto``, ``ray://HOST:PORT``); ``None`` starts a local Ray (or uses
        the one already initialised by the caller).
    cpus_per_run, gpus_per_run, memory_per_run
        Ray resources per run (memory in bytes, 0 = none reserved); Ray places a run only
        on a node with them free, and a request no node of the cluster can meet is refused
        before any run starts.
    resume
        Continue a sweep in ``out`` (otherwise ``out`` must be new or empty).
    retry_errors
        With ``resume``, also re-run runs that raised.
    progress
        Print one line per finished run.
    batch_runs
        Run the runs together in this process, one program for the runs that share net,
        data and learning settings (:func:`run_batched`); ``processes`` is then unused.

    Returns
    -------
    pandas.DataFrame
        The manifest: one row per run with its settings, seed, status and timings.

    Raises
    ------
    ConfigError
        A bad option (backend, processes, resources), or ``out`` is not empty without
        ``resume``; nothing has run.
    SweepStopped
        The sweep cannot go on (another driver holds ``out``, a write failed, the Ray head
        went away); the message says what is saved and how to resume.
    """
    if backend not in BACKENDS:
        raise ConfigError("--backend", backend, "one of " + ", ".join(BACKENDS))
    if processes is not None and processes < 0:
        raise ConfigError("--processes", processes, "an integer >= 0 (0 = in this process)")
    if cpus_per_run < 0 or gpus_per_run < 0 or memory_per_run < 0:
        raise ConfigError("--cpus-per-run/--gpus-per-run/--memory-per-run",
                          (cpus_per_run, gpus_per_run, memory_per_run), ">= 0")  # fmt: skip
    if batch_runs and backend != "local":
        raise ConfigError("--batch-runs", backend, "the local backend (one process runs all)")
    _check_new_folder(Path(out), resume=resume)
    with sweep_lock(out):
        return _run_locked(
            sweep, Path(out), backend=backend, processes=processes, address=address,
            resources={"num_cpus": cpus_per_run, "num_gpus": gpus_per_run,
                       "memory": memory_per_run},
            resume=resume, retry_errors=retry_errors, progress=progress, batch_runs=batch_runs,
        )  # fmt: skip


def _run_locked(
    sweep: Sweep, out: Path, *, backend: str, processes: int | None, address: str | None,
    resources: dict[str, float], resume: bool, retry_errors: bool, progress: bool,
    batch_runs: bool,
) -> pd.DataFrame:  # fmt: skip
    with contextlib.ExitStack() as stack:
        if backend == "ray":  # joined once, before the folder: a run no node fits is refused
            ray = stack.enter_context(ray_session(address))
            check_feasible(ray, ray_options(resources))
        return _run_opened(
            sweep, out, backend=backend, processes=processes, address=address,
            resources=resources, resume=resume, retry_errors=retry_errors, progress=progress,
            batch_runs=batch_runs,
        )  # fmt: skip


# The keywords of _run_locked, which forwards them all: each step of the sweep names what it reads.
def _run_opened(
    sweep: Sweep, out: Path, *, backend: str, processes: int | None, address: str | None,
    resources: dict[str, float], resume: bool, retry_errors: bool, progress: bool,
    batch_runs: bool,
) -> pd.DataFrame:  # fmt: skip
    try:
        manifest, todo = open_sweep(sweep, out, resume=resume, retry_errors=retry_errors,
                                    backend=backend)  # fmt: skip
    except OSError as exc:
        raise SweepStopped(
            f"could not write {exc.filename or out} ({_why(exc)}); nothing of this sweep "
            f"started; fix that, then run again (with --resume if {out} holds a sweep)"
        ) from None
    specs = list(manifest.specs.values())

    from tqdm import tqdm

    with CtrlC() as ctrl_c, tqdm(
        total=len(specs),
        initial=len(specs) - len(todo),
        desc="runs",
        unit="run",
        disable=not progress,
    ) as bar:

        def record(spec: RunSpec, result: RunResult) -> None:
            manifest.record(result)
            ctrl_c.check()  # a Ctrl-C lost inside a finaliser stops at the next finished run
            bar.set_postfix(ok=manifest.count("ok"), error=manifest.count("error"))
            bar.update(1)

        run_specs(todo, record, backend=backend, processes=processes, address=address,
                  resources=resources, batch_runs=batch_runs,
                  say=tqdm.write if progress else None, stopped=manifest.stopped)
    return manifest.frame()


def open_sweep(
    sweep: Sweep, out: str | Path, *, resume: bool, retry_errors: bool = False,
    backend: str = "local",
) -> tuple[Manifest, list[RunSpec]]:
    """Prepare ``out`` (sweep file, runs folder, manifest) and list the runs still to do.

    Parameters
    ----------
    sweep
        The validated sweep.
    out
        Output folder: new or empty, or the sweep's own folder with ``resume``.
    resume
        Keep the finished runs of ``out`` and list only the others.
    retry_errors
        With ``resume``, also list runs that raised.
    backend
        Recorded in the manifest (``local`` or ``ray``).

    Returns
    -------
    tuple[Manifest, list[RunSpec]]
        The manifest (already saved) and the runs still to do.

    Raises
    ------
    ConfigError
        ``out`` holds files and ``resume`` is off.
    """
    out = Path(out)
    _check_new_folder(out, resume=resume)
    specs = sweep.runs()
    (out / RUNS).mkdir(parents=True, exist_ok=True)
    _write_text(out / SWEEP_FILE, sweep.to_toml())
    manifest = Manifest(out, specs, backend=backend)
    todo = manifest.todo(retry_errors=retry_errors) if resume else list(specs)
    manifest.save()
    return manifest, todo


def _check_new_folder(out: Path, *, resume: bool) -> None:
    if not resume and out.is_dir() and any(p.name != LOCK for p in out.iterdir()):
        raise ConfigError("--out", str(out), "an empty or new folder (or pass --resume)")


@contextlib.contextmanager
def sweep_lock(out: str | Path) -> Iterator[None]:
    """Hold ``OUT/sweep.lock`` while this driver writes ``OUT``.

    A second driver on the same folder is refused in one line (its runs would overwrite each other's
    manifest rows).

    ``flock`` is released by the kernel when the driver exits, however it exits, so a
    killed sweep never leaves a stale lock behind.
    """
    import fcntl

    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / LOCK).touch()
        handle = (out / LOCK).open()
    except OSError as exc:
        raise SweepStopped(
            f"could not open {out / LOCK} ({_why(exc)}); nothing of this sweep started"
        ) from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise SweepStopped(
                f"{out} is being written by another mobidfl sweep ({holder}); nothing was "
                f"changed; wait for it to finish, then resume with: "
                f"mobidfl sweep --resume --out {out}"
            ) from None
        with contextlib.suppress(OSError):  # who holds it, for the line above (best effort)
            (out / LOCK).write_text(f"pid {os.getpid()} on {socket.gethostname()}\n")
        yield
    finally:
        handle.close()


# --- outputs ------------------------------------------------------------------------------------
class Manifest:
    """``manifest.csv``: one row per run, rewritten atomically after every finished run."""

    def __init__(self, out: Path, specs: Sequence[RunSpec], *, backend: str) -> None:
        self.out = out
        self.backend = backend
        self.specs = {s.run_id: s for s in specs}
        self.rows: dict[str, dict[str, Any]] = {s.run_id: _row(s) for s in specs}
        previous = read_manifest(out) if (out / MANIFEST).exists() else None
        if previous is not None:
            for record in previous.to_dict("records"):
                if record["run_id"] in self.rows:
                    row = self.rows[record["run_id"]]
                    for key in ("status", "wall_s", "cpu_s", "error", "worker", "backend",
                                "finished_at", "attempts", "retried"):
                        row[key] = record.get(key, row[key])
        for run_id, row in self.rows.items():
            path = run_path(out, run_id)
            if path.exists() and row["status"] != "ok":  # killed after the write, before this
                row.update(_parquet_meta(path))
            if row["status"] == "ok" and not path.exists():
                row["status"] = "pending"

    def todo(self, *, retry_errors: bool) -> list[RunSpec]:
        """The runs still to do; failed ones too with ``retry_errors``."""
        done = {"ok"} if retry_errors else {"ok", "error"}
        return [self.specs[i] for i, row in self.rows.items() if row["status"] not in done]

    def record(self, result: RunResult) -> None:
        """Save the run's table, then the manifest.

        A failed write raises :class:`SweepStopped` naming the file, with nothing half-written left
        behind (the row stays as it was, so a resume re-runs the run).
        """
        row = {
            **self.rows[result.run_id],
            "status": result.status,
            "wall_s": round(result.wall_s, 3),
            "cpu_s": round(result.cpu_s, 3),
            "error": result.error,
            "worker": result.worker,
            "backend": self.backend,
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "attempts": result.attempts,
            "retried": result.retried,
        }
        path = self.out / MANIFEST
        try:
            if result.status == "ok" and result.table is not None:
                path = run_path(self.out, result.run_id)
                _write_parquet(result.table, path, meta=row)
            if result.trace:
                path = self.out / RUNS / f"{result.run_id}.error.txt"
                _write_text(path, result.trace)
            self.rows[result.run_id] = row
            path = self.out / MANIFEST
            self.save()
        except OSError as exc:
            raise SweepStopped(self.stopped(f"could not write {path} ({_why(exc)})")) from None

    def stopped(self, why: str) -> str:
        """The one line of a sweep that cannot go on: why, what is kept, how to go on."""
        saved = sum(run_path(self.out, i).exists() for i in self.rows)
        return (f"{why}; {saved} of {len(self.rows)} runs are saved in {self.out} (the "
                f"manifest lists them); resume with: mobidfl sweep --resume --out {self.out}")

    def count(self, status: str) -> int:
        """Number of runs with ``status``."""
        return sum(row["status"] == status for row in self.rows.values())

    def frame(self) -> pd.DataFrame:
        """The manifest as a table, one row per run."""
        return pd.DataFrame(list(self.rows.values()))

    def save(self) -> None:
        """Write the manifest (``manifest.csv``) atomically."""
        _write_text(self.out / MANIFEST, self.frame().to_csv(index=False))


def _row(spec: RunSpec) -> dict[str, Any]:
    return {
        "run_id": spec.run_id,
        "point": spec.point,
        "replicate": spec.replicate,
        "seed": spec.seed,
        **spec.params,
        "status": "pending",
        "wall_s": float("nan"),
        "cpu_s": float("nan"),
        "error": "",
        "worker": "",
        "backend": "",
        "finished_at": "",
        "attempts": 0,
        "retried": "",
    }


def run_path(out: str | Path, run_id: str) -> Path:
    """Where the table of run ``run_id`` is saved in the sweep folder ``out``."""
    return Path(out) / RUNS / f"{run_id}.parquet"


def read_manifest(out: str | Path) -> pd.DataFrame:
    """The ``manifest.csv`` of a sweep folder, text columns as strings (empty, not NaN).

    Parameters
    ----------
    out
        The sweep's output folder.

    Returns
    -------
    pandas.DataFrame
        One row per run: id, point, replicate, seed, swept settings, status, timings.

    Raises
    ------
    FileNotFoundError
        ``out`` has no ``manifest.csv`` (not a sweep folder).
    """
    frame = pd.read_csv(Path(out) / MANIFEST, keep_default_na=False, na_values=[""])
    for column in ("error", "worker", "backend", "finished_at", "retried"):
        if column in frame or column == "error":  # all-empty reads as float NaN: "" instead
            frame[column] = frame[column].astype(str).where(frame[column].notna(), "")
    return frame


def load_runs(out: str | Path, *, status: str = "ok") -> pd.DataFrame:
    """All per-step rows of a sweep's finished runs, one frame (empty when none).

    Parameters
    ----------
    out
        The sweep's output folder.
    status
        Which runs to read, by their manifest status (``ok``: the finished ones).

    Returns
    -------
    pandas.DataFrame
        One row per run per recorded step, with the run's id and settings.

    Raises
    ------
    FileNotFoundError
        ``out`` has no ``manifest.csv`` (not a sweep folder).
    """
    out = Path(out)
    manifest = read_manifest(out)
    ids = manifest.loc[manifest["status"] == status, "run_id"]
    frames = [pd.read_parquet(run_path(out, i)) for i in ids if run_path(out, i).exists()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _write_parquet(table: pd.DataFrame, path: Path, *, meta: Mapping[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pa.Table.from_pandas(table, preserve_index=False)
    extra = {_META_KEY: json.dumps(dict(meta), default=str).encode()}
    arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **extra})
    with open_atomic(path, "wb") as fh:
        pq.write_table(arrow, fh)


def _parquet_meta(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(_META_KEY)
    meta = json.loads(raw) if raw else {}
    return {"status": "ok", **{k: v for k, v in meta.items() if k != "status"}}
