"""The public runner: plan runs, resume and repair an output folder, run what is left.

Shared by every command that runs many worlds into one folder: ``mobidfl bench``
(:mod:`mobidfl.analysis.bench_run`), the study tuning (:mod:`mobidfl.analysis.tuning`),
``mobidfl sweep`` (through :func:`mobidfl.analysis.executors.run_specs`) and the paper
reproductions (:func:`open_sweeps`). A folder of cells holds one sweep folder per cell
(``cells/<cell>/manifest.csv`` and one Parquet file per finished run): :func:`plan_runs`
gives each cell its runs, :func:`open_cells` writes their manifests and lists the runs
still to do (a resume keeps every finished run), :func:`repair_cells` makes a damaged or
partial folder whole again, and :func:`run_recorded` runs what is left (serially, on a
process pool, on Ray or batched, with a progress bar) recording each run in its manifest.
:func:`quiet_worlds` keeps the worlds' inert-setting warnings out of all of it.

Public API
----------
* planning: :data:`RUN_SETTINGS`, :func:`run_id`, :func:`safe_name`, :func:`plan_runs`,
  :func:`agent_count`
* a folder: :data:`CELLS`, :func:`folder_entries`, :func:`open_cells` (resume),
  :class:`BenchDamaged`, :func:`cell_rows`, :func:`damaged_run`, :func:`repair_cells`
* running: :func:`run_recorded`, :func:`open_sweeps`, :func:`quiet_worlds`, :func:`quiet`,
  and the backend choice under them all, :func:`mobidfl.analysis.executors.run_specs`
  (also importable from here; the sweep, which this module builds on, calls it directly)
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from mobidfl.analysis.executors import RunResult, RunSpec, run_batched, run_specs
from mobidfl.analysis.interrupts import CtrlC
from mobidfl.errors import PicklableError

if TYPE_CHECKING:
    from mobidfl.analysis.bench_scenarios import Cell

CELLS = "cells"
"""The folder of a bench-shaped output that holds one sweep folder per cell."""
RUN_SETTINGS = {"workers": 1, "contacts_out": "none"}
"""How each run is computed (not its world): one core per run, no contact files."""


def run_id(settings: dict[str, Any], seed: int) -> str:
    """As :meth:`mobidfl.analysis.sweep.Sweep.runs`: the hash of the run's settings and seed."""
    digest = hashlib.sha1(
        json.dumps({"settings": settings, "seed": seed}, sort_keys=True, default=str).encode()
    ).hexdigest()
    return f"p000-s{seed}-{digest[:8]}"


def safe_name(text: str) -> str:
    """``text`` as a file name (a cell's folder, a figure): anything odd becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_.@=-]+", "_", text)


def agent_count(settings: dict[str, Any]) -> int:
    """The agents of a world's settings (the per-agent metrics divide by it)."""
    return sum(int(settings.get(k, 0)) for k in ("vehicles", "pedestrians", "sensors", "uavs"))


def plan_runs(cells: Sequence[Cell], seeds: Sequence[int] | Mapping[str, Sequence[int]], *,
              extra: dict[str, Any]) -> dict[str, list[Any]]:
    """``cell key -> [RunSpec per seed]`` of every runnable cell (seed-major order is the caller's).

    ``seeds``: one list for every cell, or a list per column key (seeds added column by column,
    ``--until-half-width``: the cells of a column keep the same seeds, so its policies stay paired).
    ``extra``: run settings (device, workers), the same for every cell.
    """
    plan: dict[str, list[Any]] = {}
    for cell in cells:
        if cell.refusal:
            continue
        mine = seeds[cell.column.key] if isinstance(seeds, Mapping) else seeds
        settings = {**cell.settings, **RUN_SETTINGS, **extra}
        steps = int(settings["steps"])
        plan[cell.key] = [
            RunSpec(run_id=run_id(settings, seed), point=0, replicate=i, seed=seed,
                    params={"policy": cell.policy}, settings=settings, steps=steps)
            for i, seed in enumerate(mine)
        ]
    return plan


def folder_entries(out: Path) -> list[str]:
    """What a folder holds besides temporaries and a sweep lock."""
    from mobidfl.analysis.sweep import LOCK
    from mobidfl.atomic import TEMP_PREFIX

    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir()
                  if not p.name.startswith(TEMP_PREFIX) and p.name != LOCK)


def cell_manifest() -> type:
    """The sweep's :class:`~mobidfl.analysis.sweep.Manifest`, whose failed write says only why.

    The bench adds what is saved and the bench command that resumes (not a cell's sweep).
    """
    from mobidfl.analysis.sweep import Manifest

    class CellManifest(Manifest):
        def stopped(self, why: str) -> str:
            """Only why (the bench's line adds what is saved and how to resume)."""
            return why

    return CellManifest


def open_cells(out: Path, cells: Sequence[Cell], plan: Mapping[str, Any], *, backend: str,
               retry_errors: bool) -> tuple[dict[str, Any], dict[str, str], list[Any]]:
    """Each planned cell's run folder and manifest under ``out/cells``, and the runs left to do.

    Shared by the bench and the study tuning, whose folders have the same shape.

    Returns
    -------
    tuple
        ``(manifests by cell key, cell key by run id, runs to do)``, the runs seed-major (a
        partial table then has every cell).
    """
    manifests: dict[str, Any] = {}
    owner: dict[str, str] = {}
    todo: list[Any] = []
    manifest_class = cell_manifest()
    for cell in cells:
        if cell.key not in plan:
            continue
        folder = out / CELLS / safe_name(cell.key)
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        manifest = manifest_class(folder, plan[cell.key], backend=backend)
        manifest.save()
        manifests[cell.key] = manifest
        for spec in manifest.todo(retry_errors=retry_errors):
            owner[spec.run_id] = cell.key
            todo.append(spec)
    todo.sort(key=lambda spec: spec.replicate)
    return manifests, owner, todo


class BenchDamaged(PicklableError, ValueError):
    """A file of a bench folder that is not whole (cut, damaged or not the bench's)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def damaged_run(path: Path) -> str:
    """Why the run file ``path`` cannot be read whole ("" when it can)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        return f"{type(exc).__name__}: {_short(str(exc), path)}"
    if "time_s" not in table.column_names:
        return "no time_s column (not a run's table)"
    return ""


def _short(text: str, path: Path) -> str:
    """An error's first sentence, without the path already named, on one line."""
    text = " ".join(text.replace(f"'{path}'", "").replace(str(path), "").split())
    text = text.replace(" :", ":")
    first = text.split(". ")[0]
    return first if len(first) <= 160 else first[:157] + "..."


def repair_cells(out: Path, cells: Sequence[Cell], plan: Mapping[str, Sequence[RunSpec]], *,
                 tell: Callable[[str], None]) -> None:
    """Resume: a damaged cell manifest is written again, a damaged run file removed.

    WHY: a kill or a full disk can leave a cut ``manifest.csv`` or run file; a resume then
    rebuilds the manifest from the runs' files and runs a damaged run again, one ``tell``
    line each, instead of refusing the folder.
    """
    from mobidfl.analysis.sweep import MANIFEST, run_path

    for cell in cells:
        folder = out / CELLS / safe_name(cell.key)
        if cell.key not in plan or not folder.is_dir():
            continue
        if (folder / MANIFEST).exists():
            try:
                cell_rows(folder, [spec.run_id for spec in plan[cell.key]])
            except BenchDamaged as exc:
                tell(f"mobidfl: {exc.path} is damaged ({exc.why}): written again from the "
                     "runs' files")
                (folder / MANIFEST).unlink()
        for spec in plan[cell.key]:
            path = run_path(folder, spec.run_id)
            why = damaged_run(path) if path.exists() else ""
            if why:
                tell(f"mobidfl: {path} is damaged ({why}): seed {spec.seed} of "
                     f"{cell.key} runs again")
                path.unlink()


def cell_rows(folder: Path, runs: Sequence[str]) -> Any:
    """A cell's ``manifest.csv`` read whole, or :class:`BenchDamaged` naming it.

    A row for each of ``runs``, no other.
    """
    from mobidfl.analysis.sweep import MANIFEST, read_manifest

    path = folder / MANIFEST
    try:
        whole = path.read_bytes().endswith(b"\n")
    except OSError as exc:
        raise BenchDamaged(path, f"unreadable ({exc.strerror or exc})") from None
    if not whole:
        raise BenchDamaged(path, "cut: its last line has no end")
    try:
        rows = read_manifest(folder)
    except (OSError, ValueError, KeyError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise BenchDamaged(path, f"{type(exc).__name__}: {_short(str(exc), path)}") from None
    for column in ("run_id", "seed", "status"):
        if column not in rows:
            raise BenchDamaged(path, f"no {column} column")
    known = {"ok", "error", "lost", "pending"}
    odd = sorted(set(rows["status"].astype(str)) - known)
    if odd or rows["run_id"].isna().any() or pd.to_numeric(rows["seed"], errors="coerce").isna(
            ).any():
        raise BenchDamaged(path, "rows cut or not the bench's (status "
                           f"{odd[0] if odd else 'ok'}, or a run without id or seed)")
    listed = set(rows["run_id"].astype(str))
    if listed != set(runs):
        raise BenchDamaged(path, f"it lists {len(listed & set(runs))} of the cell's "
                           f"{len(set(runs))} runs" + (" and others" if listed - set(runs)
                                                      else ""))
    return rows


@contextlib.contextmanager
def quiet_worlds() -> Iterator[None]:
    """One bench: no inert-setting warnings, here or in the processes it starts.

    WHY: a scenario or study writes every world setting, whether this world reads it or not
    (``dirichlet_alpha`` in an IID world); the user did not write them per world, so a warning
    about them is noise. A user's own settings file and ``--set`` (``mobidfl run``) still warn.
    Entered as one command (:func:`mobidfl.model.config.one_report`): its workers stay quiet.
    """
    from mobidfl.model.config import InertSettingWarning, one_report

    with one_report(), warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        yield


def quiet[**P, R](run: Callable[P, R]) -> Callable[P, R]:
    """``run`` inside :func:`quiet_worlds`."""
    @functools.wraps(run)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        with quiet_worlds():
            return run(*args, **kwargs)
    return wrapped


def run_recorded(todo: Sequence[RunSpec], manifest_of: Callable[[RunSpec], Any], *,
                 total: int, desc: str, progress: bool, show_failed: bool = False,
                 backend: str = "local", processes: int | None = None,
                 address: str | None = None, resources: Mapping[str, float] | None = None,
                 batch_runs: bool = False, say: Callable[[str], None] | None = None,
                 say_none_left: bool = False) -> None:
    """Run ``todo`` (:func:`mobidfl.analysis.executors.run_specs`), each result in its manifest.

    ``manifest_of(spec)`` is the manifest that records the run. A progress bar of ``total``
    runs (those not in ``todo`` already done; ``show_failed`` counts the failed ones beside
    it) unless ``progress`` is off; a Ctrl-C stops at the next finished run, every finished
    run kept. ``--batch-runs``' grouping line goes above the bar, or to ``say`` without one;
    ``say_none_left`` says it even when no run is left (a reproduction's resume says so).
    """
    from tqdm import tqdm

    with CtrlC() as ctrl_c, tqdm(total=total, initial=total - len(todo), desc=desc,
                                 unit="run", disable=not progress) as bar:
        failed = 0

        def record(spec: RunSpec, result: RunResult) -> None:
            nonlocal failed
            manifest_of(spec).record(result)
            failed += result.status != "ok"
            ctrl_c.check()
            if show_failed:
                bar.set_postfix(failed=failed)
            bar.update(1)

        line = tqdm.write if progress else say
        if batch_runs and not todo and say_none_left:
            run_batched(todo, record, say=line)
        run_specs(todo, record, backend=backend, processes=processes, address=address,
                  resources=resources, batch_runs=batch_runs, say=line)


def open_sweeps(sweeps: Sequence[tuple[Any, Path]]
                ) -> tuple[list[RunSpec], Callable[[RunSpec], Any]]:
    """Open every ``(sweep, folder)``, resumed where the folder exists: runs left, their manifest.

    WHY: several sweeps run together as one batch (``--batch-runs`` of a reproduction) while
    each run is still recorded in its own sweep's folder; pass both to :func:`run_recorded`.
    """
    from mobidfl.analysis.sweep import open_sweep

    todo: list[RunSpec] = []
    owner: dict[int, Any] = {}
    for sweep, folder in sweeps:
        manifest, rest = open_sweep(sweep, folder, resume=folder.exists())
        for spec in rest:
            owner[id(spec)] = manifest
        todo += rest
    return todo, lambda spec: owner[id(spec)]
