"""The benchmark's own files, each read whole or refused in one line naming it.

A published bench (``python -m mobidfl.analysis.publish BENCH DEST``) is ``manifest.json``,
``runs.parquet``, ``curves.parquet`` and ``descriptors.csv``; its pages (``publish --page``,
``--paper-page``, ``--slice-page``, ``--answer-page``) are computed from them and
``regime_rule.json`` is read back by ``mobidfl bench --describe WORLD --rule FILE``. They are
inputs like any other: a file cut in half, of another kind or of another bench is one
:class:`~mobidfl.errors.ConfigError` naming it (exit 2), never a pyarrow traceback and never a
page quietly written from half the runs. One reader per kind of file, used by every path.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from mobidfl.errors import ConfigError

__all__ = ["CURVES", "DESCRIPTORS", "MANIFEST", "RUNS", "read_curves", "read_descriptors",
           "read_json", "read_manifest", "read_published", "read_runs"]

SETTING = "published file"
"""What a refusal names before the file's path (the file is an input, not a setting)."""
MANIFEST, RUNS, CURVES, DESCRIPTORS = ("manifest.json", "runs.parquet", "curves.parquet",
                                       "descriptors.csv")
RUN_COLUMNS = {"run_id": "text", "column": "text", "policy": "text", "seed": "integer",
               "status": "text", "final_acc": "number"}
"""What every page reads of ``runs.parquet`` (others, e.g. ``auc_acc``, where present)."""
CURVE_COLUMNS = {"column": "text", "policy": "text", "seed": "integer", "time_s": "number",
                 "acc_mean": "number"}
DESCRIPTOR_TEXT = ("column", "scenario", "variant", "link")
"""``descriptors.csv``'s text columns; every other column is a number (NaN: not measured)."""


def _refuse(path: Path, what: str, why: str) -> ConfigError:
    return ConfigError(SETTING, str(path), f"a whole {what} ({why})")


def _short(exc: BaseException, path: Path) -> str:
    """``Type: first sentence`` of an error, without the path already named."""
    text = " ".join(str(exc).replace(f"'{path}'", "").replace(str(path), "").split())
    text = text.replace(" :", ":")
    first = text.split(". ")[0].strip(" :")
    return f"{type(exc).__name__}: {first[:157] + '...' if len(first) > 160 else first}"


def read_json(path: str | Path, *, what: str) -> dict[str, Any]:
    """A JSON object read whole from ``path``, or one ConfigError naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _refuse(path, what, "missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError: a cut file
        raise _refuse(path, what, _short(exc, path)) from None
    if not isinstance(data, dict):
        raise _refuse(path, what, f"a JSON {type(data).__name__}, not an object")
    return data


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """``folder/manifest.json`` of a bench or its publication, checked as the report reads it."""
    from mobidfl.analysis.bench_plan import read_plan
    from mobidfl.analysis.runner import BenchDamaged

    path = Path(folder) / MANIFEST
    read_json(path, what=f"{MANIFEST} of a bench")  # missing, unreadable, cut: named here
    try:
        return read_plan(Path(folder))
    except BenchDamaged as exc:
        raise _refuse(path, f"{MANIFEST} of a bench", exc.why) from None


def _check_columns(frame: pd.DataFrame, path: Path, what: str,
                   needed: Mapping[str, str]) -> None:
    """Each ``needed`` column there and of its kind (text: no missing value)."""
    for name, kind in needed.items():
        if name not in frame.columns:
            raise _refuse(path, what, f"no {name!r} column")
        values = frame[name]
        if values.empty:  # no rows: nothing of the wrong kind (an empty object column)
            continue
        if kind == "text":
            ok = bool(values.map(lambda v: isinstance(v, str)).all())
        elif kind == "integer":
            ok = pd.api.types.is_integer_dtype(values)
        else:
            ok = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
        if not ok:
            raise _refuse(path, what, f"column {name!r} is not all {kind}s")


def _read_parquet(path: Path, what: str, needed: Mapping[str, str]) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise _refuse(path, what, "missing" if not path.exists() else "not a file")
    try:
        frame = pq.read_table(path).to_pandas()
    except (OSError, ValueError, pa.ArrowException) as exc:  # cut: no footer, bad pages
        raise _refuse(path, what, _short(exc, path)) from None
    _check_columns(frame, path, what, needed)
    return frame


def _of_plan(frame: pd.DataFrame, path: Path, what: str, plan: Mapping[str, Any] | None) -> None:
    """Every row's column is one of the manifest's (else the file is another bench's)."""
    if plan is None:
        return
    keys = {c["key"] for c in plan["columns"]}
    odd = sorted(set(frame["column"]) - keys)
    if odd:
        raise _refuse(path, what, f"column {odd[0]!r} is not one of its {MANIFEST}'s: another "
                      "bench's file")


def read_runs(path: str | Path, *, plan: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``runs.parquet`` read whole: one row per run, :data:`RUN_COLUMNS` of their kinds."""
    path, what = Path(path), f"{RUNS} of a published bench"
    frame = _read_parquet(path, what, RUN_COLUMNS)
    _of_plan(frame, path, what, plan)
    return frame


def read_curves(path: str | Path, *, plan: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``curves.parquet`` read whole: accuracy over time, :data:`CURVE_COLUMNS` of their kinds."""
    path, what = Path(path), f"{CURVES} of a published bench"
    frame = _read_parquet(path, what, CURVE_COLUMNS)
    _of_plan(frame, path, what, plan)
    return frame


def read_descriptors(path: str | Path) -> pd.DataFrame:
    """``descriptors.csv`` read whole: every line ended and complete, one row per column.

    WHY: pandas fills a cut last line with NaN, and a NaN descriptor is "not measured": a cut
    file would silently drop worlds from the rule.
    """
    path, what = Path(path), f"{DESCRIPTORS} of a bench"
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise _refuse(path, what, "missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _refuse(path, what, _short(exc, path)) from None
    if not raw.endswith(b"\n"):
        raise _refuse(path, what, "cut: its last line has no end")
    rows = list(csv.reader(io.StringIO(text)))
    width = len(rows[0]) if rows else 0
    for number, row in enumerate(rows[1:], start=2):
        if row and len(row) != width:
            raise _refuse(path, what, f"line {number} has {len(row)} fields, the header {width}")
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (ValueError, pd.errors.ParserError) as exc:  # EmptyDataError included
        raise _refuse(path, what, _short(exc, path)) from None
    _check_columns(frame, path, what, {"column": "text"})
    if frame["column"].duplicated().any():
        repeated = frame.loc[frame["column"].duplicated(), "column"].iloc[0]
        raise _refuse(path, what, f"column {repeated!r} twice")
    for name in frame.columns:
        if name not in DESCRIPTOR_TEXT:
            _check_columns(frame, path, what, {name: "number"})
    return frame


def read_published(dest: str | Path) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame,
                                              pd.DataFrame]:
    """``(plan, runs, curves, descriptors)`` of a published bench, each file read whole."""
    dest = Path(dest)
    if not dest.is_dir():
        raise ConfigError("DEST", str(dest), "the folder of a published bench (publish "
                          "BENCH DEST writes one)")
    plan = read_manifest(dest)
    return (plan, read_runs(dest / RUNS, plan=plan), read_curves(dest / CURVES, plan=plan),
            read_descriptors(dest / DESCRIPTORS))
