"""Contact traces in: published contact data drive exchanges without a map.

Three formats, each read whole and checked whole (a bad file is one
:class:`~mobidfl.errors.ConfigError` naming ``contact_trace.file``, never a traceback):

* ``mobidfl``: MobiDFL's own contact table (``contacts.csv`` / ``contacts.parquet`` of a
  run, :data:`model.contacts.CONTACT_COLUMNS`): columns ``a, b, t_start, t_end`` and
  either ``step`` (times in seconds of that step, as a run writes them) or none (times in
  seconds since the trace's start); ``d_min`` (metres) optional.
* ``one``: The ONE's external events (``StandardEventsReader``): ``<time> CONN <a> <b>
  up|down [interface]``; ``#`` comments and blank lines skipped, host ids digits with an
  optional non-digit prefix (``p12``), as The ONE's ``getHostAddress``. Its message events
  (``C``, ``S``, ``DE``, ``A``, ``DR``, ``R``) are skipped: they are not contacts. A
  connection still up at the end of the file ends at the file's last event time.
* ``crawdad``: a plain table ``a b t_start t_end`` (whitespace or commas, no header,
  further columns ignored), the layout of the CRAWDAD contact traces such as
  cambridge/haggle's iMote ``contacts.Exp*.dat``.

Times are seconds; trace time ``start_s`` is MobiDFL time 0 and step ``s`` covers
``[(s - 1) step_s, s step_s]``: a contact spanning a step boundary is one row in each step
it touches (as a map run writes it). :class:`ContactTrace` indexes the rows by step once
(one sort), so a step's :class:`~mobidfl.model.contacts.ContactTable` is a slice, no per-contact
Python.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mobidfl.contact_table import ContactTable
from mobidfl.errors import ConfigError
from mobidfl.inflate import MAX_INFLATED_BYTES, InflateError, InflateTooLarge, inflate

__all__ = ["FORMATS", "ContactTrace", "Contacts", "detect_format", "read_contacts"]

FORMATS = ("auto", "mobidfl", "one", "crawdad")
"""Values of ``contact_trace.format``."""

SETTING = "contact_trace.file"
MAX_TIME_S = 1e12
"""Latest contact time accepted (about 31,700 years): a time beyond it is a damaged or
mis-scaled trace (milliseconds as seconds), not a contact; step indices stay int64."""
ONE_MESSAGE_ACTIONS = frozenset({"C", "S", "DE", "A", "DR", "R"})
"""The ONE's ``StandardEventsReader`` message actions: skipped (not contacts)."""


class Contacts:
    """Stays in range read from a trace.

    0-based agent ids ``a < b``, absolute ``t_start`` / ``t_end`` (seconds since the trace's start)
    or, with ``step``, seconds of that step; ``d_min`` metres (NaN where the trace has none).
    """

    def __init__(self, *, a: np.ndarray, b: np.ndarray, t_start: np.ndarray,
                 t_end: np.ndarray, d_min: np.ndarray, step: np.ndarray | None) -> None:
        self.a, self.b = a.astype(np.int64), b.astype(np.int64)
        self.t_start, self.t_end = t_start.astype(float), t_end.astype(float)
        self.d_min = d_min.astype(float)
        self.step = None if step is None else step.astype(np.int64)

    def __len__(self) -> int:
        return len(self.a)


def _refuse(path: Path, why: str) -> ConfigError:
    return ConfigError(SETTING, str(path), f"a contact trace ({why})")


def _open_text(path: Path) -> str:
    """The file's text (gzip inflated once, at most :data:`MAX_INFLATED_BYTES`).

    A truncated, broken or bomb-sized gzip is one line.
    """
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = inflate(raw, cap=MAX_INFLATED_BYTES)
        return raw.decode("utf-8")
    except InflateTooLarge as exc:
        raise _refuse(path, f"refused unread: gzip {exc} (at most "
                            f"{MAX_INFLATED_BYTES / 2**20:g} MiB of text)") from None
    except UnicodeDecodeError:
        raise _refuse(path, "not UTF-8 text") from None
    except (OSError, InflateError) as exc:
        raise _refuse(path, f"unreadable: {type(exc).__name__}: {exc}") from None


def _data_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) of every line that is not blank or a ``#`` comment."""
    return [
        (n, line) for n, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def detect_format(path: Path, *, text: str | None = None) -> str:
    """The trace dialect: ``one``, ``mobidfl`` or ``crawdad``.

    ``one`` when the second field of the first data line is ``CONN`` or a message action,
    ``mobidfl`` for Parquet or a file whose first line names columns, else ``crawdad`` (``text``:
    the file's text when already read).
    """
    if path.suffix.lower() == ".parquet":
        return "mobidfl"
    text = _open_text(path) if text is None else text
    first = next((line for line in text.splitlines()
                  if line.strip() and not line.lstrip().startswith("#")), None)
    if first is None:
        raise _refuse(path, "empty: no contacts")
    fields = re.split(r"[\s,]+", first.strip())
    if len(fields) > 1 and (fields[1] == "CONN" or fields[1] in ONE_MESSAGE_ACTIONS):
        return "one"
    if {"a", "b", "t_start", "t_end"} & set(fields):  # a header line: MobiDFL's columns
        return "mobidfl"
    return "crawdad"


def _float_or_nan(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return float("nan")


def _numbers(path: Path, values: np.ndarray, lines: np.ndarray, what: str) -> np.ndarray:
    """``values`` as finite floats; the first that is not names its line."""
    import pandas as pd

    try:  # the fast path; a bad value falls back to the path that finds its line
        out = np.asarray(values, dtype=object).astype(float)
    except (ValueError, TypeError):
        try:
            out = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
            out = out.to_numpy(float)
        except (ValueError, TypeError):  # lists, dicts in a Parquet column: the error path
            out = np.array([_float_or_nan(v) for v in values], float)
    bad = ~np.isfinite(out)
    if bad.any():
        i = int(np.argmax(bad))
        raise _refuse(path, f"line {lines[i]}: {what} {values[i]!r} is not a finite number")
    return out


def _ids(path: Path, values: np.ndarray, lines: np.ndarray, what: str) -> np.ndarray:
    out = _numbers(path, values, lines, what)
    bad = (out != np.round(out)) | (np.abs(out) > 2.0**53)
    if bad.any():
        i = int(np.argmax(bad))
        raise _refuse(path, f"line {lines[i]}: {what} {values[i]!r} is not an integer id")
    return out.astype(np.int64)


def _read_mobidfl(path: Path, text: str | None) -> Contacts:
    import pandas as pd

    try:
        if path.suffix.lower() == ".parquet":
            frame = pd.read_parquet(path)
            lines = np.arange(len(frame)) + 1  # Parquet: row numbers
        else:
            from io import StringIO

            frame = pd.read_csv(StringIO(text), comment="#", dtype=str, skip_blank_lines=True)
            lines = np.arange(len(frame)) + 2  # line 1 is the header
    except ConfigError:
        raise
    except Exception as exc:
        raise _refuse(path, f"unreadable: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in ("a", "b", "t_start", "t_end") if c not in frame.columns]
    if missing:
        raise _refuse(path, f"missing column(s) {', '.join(missing)}; MobiDFL's contact "
                            "table has step, a, b, t_start, t_end[, d_min]")
    def col(name: str) -> np.ndarray:
        return frame[name].to_numpy(object)

    step = _ids(path, col("step"), lines, "step") if "step" in frame.columns else None
    d_min = (_numbers(path, col("d_min"), lines, "d_min") if "d_min" in frame.columns
             else np.full(len(frame), np.nan))
    if step is not None and (step < 1).any():
        i = int(np.argmax(step < 1))
        raise _refuse(path, f"line {lines[i]}: step {step[i]} < 1 (steps count from 1)")
    if step is not None and (step > MAX_TIME_S).any():
        i = int(np.argmax(step > MAX_TIME_S))
        raise _refuse(path, f"line {lines[i]}: step {step[i]} beyond {MAX_TIME_S:g}")
    if (d_min < 0).any():
        i = int(np.argmax(d_min < 0))
        raise _refuse(path, f"line {lines[i]}: negative d_min {d_min[i]}")
    return _checked(
        path, lines, a=_ids(path, col("a"), lines, "a"), b=_ids(path, col("b"), lines, "b"),
        t_start=_numbers(path, col("t_start"), lines, "t_start"),
        t_end=_numbers(path, col("t_end"), lines, "t_end"), d_min=d_min, step=step,
    )


def _split_fields(path: Path, text: str | None, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``width`` fields of each data line, and the lines' numbers in the file.

    An ``[L, width]`` object array (None where a line has fewer fields); an empty trace is refused.
    """
    lines = _data_lines(text or "")
    if not lines:
        raise _refuse(path, "empty: no contacts")
    rows = [line.replace(",", " ").split(None, width)[:width] for _, line in lines]
    out = np.full((len(rows), width), None, dtype=object)
    for i, fields in enumerate(rows):  # parsing, not a hot path: one pass over the text
        out[i, : len(fields)] = fields
    return out, np.array([n for n, _ in lines])


def _read_crawdad(path: Path, text: str | None) -> Contacts:
    fields, numbers = _split_fields(path, text, 4)
    short = np.array([f is None for f in fields[:, 3]])
    if short.any():
        raise _refuse(path, f"line {numbers[int(np.argmax(short))]}: fewer than 4 columns "
                            "(a b t_start t_end)")
    return _checked(
        path, numbers, a=_ids(path, fields[:, 0], numbers, "a"),
        b=_ids(path, fields[:, 1], numbers, "b"),
        t_start=_numbers(path, fields[:, 2], numbers, "t_start"),
        t_end=_numbers(path, fields[:, 3], numbers, "t_end"),
        d_min=np.full(len(numbers), np.nan), step=None,
    )


def _host_ids(path: Path, values: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """The ONE's ``getHostAddress``: digits, or a non-digit prefix and digits (``p12``)."""
    found = [re.fullmatch(r"\D*(\d+)", str(v)) if v is not None else None for v in values]
    for i, match in enumerate(found):
        if match is None:
            raise _refuse(path, f"line {lines[i]}: invalid host id {values[i]!r}")
    return np.array([int(m.group(1)) for m in found], np.int64)  # type: ignore[union-attr]


def _read_one(path: Path, text: str | None) -> Contacts:
    fields, numbers = _split_fields(path, text, 5)
    action = fields[:, 1]
    conn = action == "CONN"
    given = (fields != None).sum(axis=1)  # noqa: E711 - elementwise on an object array
    cut = (given < 2) | (conn & (given < 5))
    if cut.any():  # a cut line: say so, never "unknown action None"
        i = int(np.argmax(cut))
        raise _refuse(path, f"line {numbers[i]}: cut short ({given[i]} field(s); The ONE's "
                            "contact line is <time> CONN <a> <b> up|down)")
    other = ~conn & ~np.isin(action.astype(str), list(ONE_MESSAGE_ACTIONS))
    if other.any():
        i = int(np.argmax(other))
        raise _refuse(path, f"line {numbers[i]}: unknown action {action[i]!r} (The ONE's "
                            "StandardEventsReader: CONN, C, S, DE, A, DR, R)")
    time = _numbers(path, fields[:, 0], numbers, "time")
    fields, numbers, time = fields[conn], numbers[conn], time[conn]
    if not len(fields):
        raise _refuse(path, "no CONN events")
    a = _host_ids(path, fields[:, 2], numbers)
    b = _host_ids(path, fields[:, 3], numbers)
    state = np.array([str(s).lower() for s in fields[:, 4]])
    bad = ~np.isin(state, ["up", "down"])
    if bad.any():
        i = int(np.argmax(bad))
        raise _refuse(path, f"line {numbers[i]}: {fields[i, 4]!r} is not up or down")
    if (a == b).any():
        i = int(np.argmax(a == b))
        raise _refuse(path, f"line {numbers[i]}: host {a[i]} in contact with itself")
    if (time < 0).any():
        i = int(np.argmax(time < 0))
        raise _refuse(path, f"line {numbers[i]}: negative time {time[i]}")
    if (time > MAX_TIME_S).any():  # here, where the event's own line is known
        i = int(np.argmax(time > MAX_TIME_S))
        raise _refuse(path, f"line {numbers[i]}: time {time[i]:g} beyond {MAX_TIME_S:g} s")
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = _event_order(lo, hi, time, state == "up")
    lo, hi, time, up, numbers = lo[order], hi[order], time[order], state[order] == "up", \
        numbers[order]
    new = np.ones(len(lo), bool)
    new[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    first = np.flatnonzero(new)
    k = np.arange(len(lo)) - np.repeat(first, np.diff(np.append(first, len(lo))))
    wrong = up != (k % 2 == 0)
    if wrong.any():
        i = int(np.argmax(wrong))
        what = "'up' while the connection is already up" if up[i] else "'down' without 'up'"
        raise _refuse(path, f"line {numbers[i]}: {what} (hosts {lo[i]} {hi[i]})")
    starts = np.flatnonzero(up)  # alternation holds: the next event of the pair is its down
    nxt = np.minimum(starts + 1, len(lo) - 1)
    closed = (starts + 1 < len(lo)) & (lo[nxt] == lo[starts]) & (hi[nxt] == hi[starts])
    end = np.where(closed, time[nxt], time.max())
    return _checked(
        path, numbers[starts], a=lo[starts], b=hi[starts], t_start=time[starts], t_end=end,
        d_min=np.full(len(starts), np.nan), step=None,
    )


def _runs(*keys: np.ndarray) -> np.ndarray:
    """Index of the first element of each element's run of equal ``keys`` (sorted input)."""
    n = len(keys[0])
    start = np.zeros(n, bool)
    start[:1] = True
    for key in keys:
        start[1:] |= key[1:] != key[:-1]
    return np.maximum.accumulate(np.where(start, np.arange(n), 0))


def _event_order(lo: np.ndarray, hi: np.ndarray, time: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Order of a pair's connection events.

    By time; events of one pair at the same time (a zero-length contact, or one stay ending as the
    next begins) alternate starting with what the pair's state allows (``down`` first while it is
    up), whatever their file order.
    """
    order = np.lexsort((np.arange(len(time)), time, hi, lo))
    lo, hi, time, up = lo[order], hi[order], time[order], up[order]
    pair, group = _runs(lo, hi), _runs(lo, hi, time)
    leads = up == ((group - pair) % 2 == 0)  # an up leads while the pair is down
    by_kind = np.lexsort((np.arange(len(up)), ~leads, group))
    rank = np.empty(len(up), np.int64)
    rank[by_kind] = np.arange(len(up)) - _runs(group[by_kind], leads[by_kind])
    return order[np.lexsort((2 * rank + ~leads, group))]


def _checked(path: Path, lines: np.ndarray, *, a: np.ndarray, b: np.ndarray,
             t_start: np.ndarray, t_end: np.ndarray, d_min: np.ndarray,
             step: np.ndarray | None) -> Contacts:
    """Whole-trace checks shared by the formats.

    No self-contacts, no negative, reversed or far-future (> :data:`MAX_TIME_S`) times, no two
    overlapping stays of one pair (a duplicate), at least one contact.
    """
    if not len(a):
        raise _refuse(path, "empty: no contacts")
    checks = (
        (a == b, lambda i: f"agent {a[i]} in contact with itself"),
        ((a < 0) | (b < 0), lambda i: f"negative id ({a[i]}, {b[i]})"),
        ((t_start < 0) | (t_end < 0), lambda i: f"negative time ({t_start[i]}, {t_end[i]})"),
        (t_end < t_start, lambda i: f"t_end {t_end[i]} < t_start {t_start[i]}"),
        ((t_start > MAX_TIME_S) | (t_end > MAX_TIME_S),
         lambda i: f"time ({t_start[i]:g}, {t_end[i]:g}) beyond {MAX_TIME_S:g} s"),
    )
    for bad, say in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise _refuse(path, f"line {lines[i]}: {say(i)}")
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    slot = np.zeros(len(a), np.int64) if step is None else step
    order = np.lexsort((t_start, hi, lo, slot))
    same = (lo[order][1:] == lo[order][:-1]) & (hi[order][1:] == hi[order][:-1]) & (
        slot[order][1:] == slot[order][:-1])
    overlap = same & (t_start[order][1:] < t_end[order][:-1])
    if overlap.any():
        i = order[int(np.argmax(overlap)) + 1]
        raise _refuse(path, f"line {lines[i]}: pair ({lo[i]}, {hi[i]}) overlaps its previous "
                            "stay (a duplicate contact)")
    return Contacts(a=lo, b=hi, t_start=t_start, t_end=t_end, d_min=d_min, step=step)


def read_contacts(path: str | Path, *, fmt: str = "auto") -> Contacts:
    """Read and check a contact trace (module docstring: the formats)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(SETTING, str(path), "an existing contact trace file")
    readers = {"mobidfl": _read_mobidfl, "one": _read_one, "crawdad": _read_crawdad}
    if fmt != "auto" and fmt not in readers:
        raise ConfigError("contact_trace.format", fmt, "one of " + ", ".join(FORMATS))
    text = None if path.suffix.lower() == ".parquet" else _open_text(path)  # read once
    if fmt == "auto":
        fmt = detect_format(path, text=text)
    return readers[fmt](path, text)


class ContactTrace:
    """A checked trace indexed by step: :meth:`table` is one step's contact table.

    Parameters
    ----------
    contacts
        what :func:`read_contacts` returned.
    step_s
        the run's step length (absolute trace times are cut into steps with it).
    n_agents
        the run's agents; ids (after ``id_base``) must lie in ``[0, n_agents)``.
    id_base
        the trace's first id (CRAWDAD's iMote ids start at 1).
    start_s
        trace time that is MobiDFL time 0 (earlier contacts are cut off).
    distance_m
        distance of a contact the trace gives none for (0 = unknown).
    steps
        the run's steps; contacts after its last step are dropped and a stay is cut
        there (a day-long stay in a 4-day trace is one row per step it spans, so a long
        trace and a short run stay small).
    path
        named in errors.
    """

    def __init__(self, contacts: Contacts, *, step_s: float, n_agents: int, id_base: int = 0,
                 start_s: float = 0.0, distance_m: float = 0.0, steps: int | None = None,
                 path: str = "") -> None:
        c = contacts
        a, b = c.a - id_base, c.b - id_base
        if len(a) and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n_agents):
            low, high = int(min(c.a.min(), c.b.min())), int(max(c.a.max(), c.b.max()))
            raise ConfigError(
                SETTING, path,
                f"a contact trace whose ids, less contact_trace.id_base = {id_base}, lie in "
                f"[0, {n_agents}) (the run's agents: vehicles+pedestrians+sensors+uavs); "
                f"this one has ids {low}..{high}",
            )
        d_min = np.where(np.isnan(c.d_min), distance_m if distance_m > 0 else np.nan, c.d_min)
        if c.step is not None:
            too_long = c.t_end > step_s * (1 + 1e-9)
            if too_long.any():
                i = int(np.argmax(too_long))
                raise ConfigError(
                    SETTING, path,
                    f"a contact table whose times lie within a step of step_s = {step_s} s "
                    f"(row {i + 1}: t_end {c.t_end[i]}; written with a longer step_s?)",
                )
            keep = np.ones(len(a), bool) if steps is None else c.step <= steps
            rows = np.flatnonzero(keep)
            step, t0, t1 = c.step[keep], c.t_start[keep], c.t_end[keep]
        else:
            start, end = c.t_start - start_s, c.t_end - start_s
            horizon = np.inf if steps is None else steps * step_s
            keep = (end >= 0) & (start <= horizon)
            start, end, rows = np.maximum(start[keep], 0.0), end[keep], np.flatnonzero(keep)
            end = np.minimum(end, horizon)
            eps = 1e-9
            first = np.floor(start / step_s + eps).astype(np.int64) + 1
            last = np.maximum(first, np.ceil(end / step_s - eps).astype(np.int64))
            count = last - first + 1
            rows = np.repeat(rows, count)
            offset = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
            step = np.repeat(first, count) + offset
            base = (step - 1) * step_s
            t0 = np.maximum(np.repeat(start, count), base) - base
            t1 = np.minimum(np.repeat(end, count), base + step_s) - base
        order = np.lexsort((t0, b[rows], a[rows], step))
        self.step, self.rows = step[order], rows[order]
        self.a, self.b = a[self.rows], b[self.rows]
        self.t_start, self.t_end = t0[order], t1[order]
        self.d_min = d_min[self.rows]
        self.n_agents = n_agents
        self.step_s = float(step_s)
        self.has_distance = bool(np.isfinite(self.d_min).all())
        self.last_step = int(self.step.max(initial=0))

    def _slice(self, step: int) -> slice:
        lo, hi = np.searchsorted(self.step, [step, step + 1])
        return slice(int(lo), int(hi))

    def table(self, step: int) -> ContactTable:
        """Step ``step``'s stays in range (sorted by pair, then time).

        Each row is one piece at its constant distance ``d_min`` (NaN where unknown).
        """
        s = self._slice(step)
        n = s.stop - s.start
        d = self.d_min[s]
        rel0 = np.stack([d, np.zeros(n)], axis=1)
        return ContactTable(
            a=self.a[s], b=self.b[s], t_start=self.t_start[s], t_end=self.t_end[s], d_min=d,
            piece_row=np.arange(n), piece_start=self.t_start[s], piece_end=self.t_end[s],
            piece_t0=np.zeros(n), piece_t1=np.ones(n), piece_rel0=rel0,
            piece_relv=np.zeros((n, 2)),
        )

    def adjacency(self, table: ContactTable) -> sp.csr_matrix:
        """Symmetric bool adjacency of the pairs in ``table``.

        What ``contact_matrix`` gives a map run.
        """
        n = self.n_agents
        first = table.first_rows()
        i, j = table.a[first], table.b[first]
        data = np.ones(2 * len(i), bool)
        return sp.csr_matrix(
            (data, (np.concatenate([i, j]), np.concatenate([j, i]))), shape=(n, n)
        )

    def encounters(self, table: ContactTable) -> tuple[np.ndarray, np.ndarray]:
        """Pairs sorted by (a, b) and the fraction of the step of their first contact.

        As :func:`mobidfl.model.contacts.contact_times` gives them.
        """
        first = table.first_rows()
        pairs = np.stack([table.a[first], table.b[first]], axis=1).astype(np.int64)
        return pairs.reshape(-1, 2), table.t_start[first] / self.step_s
