"""Recorded mobility traces: reading (SUMO FCD XML or CSV) and interpolation at any time.

Formats:

* SUMO FCD (``sumo --fcd-output``): ``<fcd-export><timestep time=..><vehicle id x y/>``.
  x/y are SUMO network coordinates: a network MobiDFL built (:mod:`mobidfl.maps.sumo_net`) uses the
  map's CRS; ``--fcd-output.geo`` writes lon/lat (set ``trace_crs = "EPSG:4326"``).
* CSV with exactly the columns ``id,time,lon,lat`` (WGS84) or ``id,time,x,y`` (metres in
  ``trace_crs``, by default the map's CRS), in any order. Any other column is an error.

Time must never go back: FCD timesteps in file order, CSV rows per id in file order
(strictly increasing per id). Trace time ``t0`` (the earliest time in the file) is MobiDFL
time 0.

Ids become agents: integer ids in numeric order, otherwise in order of first appearance.
Between two records positions are interpolated linearly. Before its first record an agent
is parked at its first position, after its last record at its last one: it is on the
street where it entered / left the trace and meets who passes by. (Parking absent agents
far off the map instead would make their entering sub-interval a straight chord across the
map, which the ``during`` contact rule would test against everyone on its way.)
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pyproj import CRS, Transformer

from mobidfl.errors import ConfigError

CSV_COLUMNS = ({"id", "time", "lon", "lat"}, {"id", "time", "x", "y"})


@dataclass(frozen=True)
class Trace:
    """Records sorted by (agent, time); ``ptr[a]:ptr[a + 1]`` are agent ``a``'s records."""

    ids: np.ndarray
    ptr: np.ndarray
    time: np.ndarray  # seconds since the trace's first record
    xy: np.ndarray  # map CRS metres

    @property
    def n_agents(self) -> int:
        """Number of agents in the trace."""
        return len(self.ids)

    def subset(self, start: int, count: int) -> Trace:
        """Agents ``start .. start + count - 1`` only."""
        a, b = int(self.ptr[start]), int(self.ptr[start + count])
        return Trace(
            self.ids[start : start + count],
            self.ptr[start : start + count + 1] - a,
            self.time[a:b],
            self.xy[a:b],
        )


def read_trace(path: str | Path, *, map_crs: str, crs: str = "") -> Trace:
    """Read an FCD XML or CSV trace into map-CRS metres (see the module docstring).

    Raises
    ------
    ConfigError
        missing file, unknown columns, non-numeric values, time going back.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError("trace.file", str(path), "an existing SUMO FCD .xml or .csv file")
    if path.suffix.lower() == ".csv":
        ids, time, a, b, geo = _read_csv(path)
    elif path.suffix.lower() == ".xml":
        ids, time, a, b = _read_fcd(path)
        geo = False
    else:
        raise ConfigError("trace.file", str(path), "a SUMO FCD .xml or a .csv trace file")
    if not len(ids):
        raise ConfigError("trace.file", str(path), "a trace with at least one record")
    if not (np.isfinite(time).all() and np.isfinite(a).all() and np.isfinite(b).all()):
        raise ConfigError("trace.file", str(path), "finite time and coordinates in every record")
    if np.abs(time).max() > MAX_TIME_S:
        raise ConfigError("trace.file", str(path), f"times within ±{MAX_TIME_S:g} s (seconds, "
                          "not milliseconds)")
    if max(np.abs(a).max(), np.abs(b).max()) > MAX_COORDINATE:
        raise ConfigError("trace.file", str(path), f"coordinates within ±{MAX_COORDINATE:g} "
                          "(beyond any place on Earth in metres or degrees)")
    xy = _to_map(np.stack([a, b], axis=1), geo=geo, crs=crs, map_crs=map_crs, path=path)
    return _assemble(ids, time, xy, path=path)


def _read_csv(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    try:
        frame = pd.read_csv(path, dtype={"id": str})
    except Exception as exc:  # pandas raises many kinds on malformed files
        reason = type(exc).__name__
        raise ConfigError("trace.file", str(path), f"a readable CSV ({reason})") from None
    columns = set(frame.columns)
    if columns not in CSV_COLUMNS:
        raise ConfigError(
            "trace.file",
            str(path),
            f"a CSV with columns id,time,lon,lat or id,time,x,y (found {','.join(frame.columns)})",
        )
    geo = "lon" in columns
    names = ("lon", "lat") if geo else ("x", "y")
    try:
        values = frame[["time", *names]].to_numpy(dtype=float)
    except ValueError:
        raise ConfigError("trace.file", str(path), "numeric time and coordinates") from None
    if not np.isfinite(values).all():
        raise ConfigError("trace.file", str(path), "finite time and coordinates in every row")
    ids = frame["id"].astype(str).to_numpy()
    _check_increasing_per_id(ids, values[:, 0], path)
    return ids, values[:, 0], values[:, 1], values[:, 2], geo


def _check_increasing_per_id(ids: np.ndarray, time: np.ndarray, path: Path) -> None:
    codes, _ = pd.factorize(ids)
    order = np.argsort(codes, kind="stable")  # file order within each id
    same = codes[order][1:] == codes[order][:-1]
    bad = same & (np.diff(time[order]) <= 0)
    if bad.any():
        row = int(order[1:][bad][0])
        raise ConfigError(
            "trace.file",
            str(path),
            f"time increasing per id (id {ids[row]} goes back to {time[row]} in row {row + 2})",
        )


MAX_TIME_S = 1e11
"""Largest trace time accepted (about 3,000 years: Unix seconds fit, a damaged -1e308 not)."""
MAX_COORDINATE = 1e8
"""Largest |x|, |y| accepted: 100,000 km, more than the Earth's circumference in metres."""

FCD_RECORDS = ("vehicle", "person", "container")
"""What a SUMO FCD ``<timestep>`` holds (fcd_file.xsd); containers are not agents here."""


def _read_fcd(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ids: list[str] = []
    times: list[float] = []
    xs: list[float] = []
    ys: list[float] = []
    last = -np.inf
    root_seen = False
    try:
        for event, elem in ET.iterparse(path, events=("start", "end")):
            if event == "start":
                if not root_seen:
                    root_seen = True
                    if elem.tag != "fcd-export":
                        found = f"<fcd-export>, not <{elem.tag}>"
                        raise ConfigError("trace.file", str(path), f"a SUMO FCD file ({found})")
                continue
            if elem.tag != "timestep":
                continue
            t = float(elem.get("time"))
            if t < last:
                raise ConfigError(
                    "trace.file", str(path), f"timesteps in increasing time ({t} after {last})"
                )
            last = t
            texts = [elem.text, *(c.tail for c in elem), *(c.text for c in elem)]
            if any(t and not t.isspace() for t in texts):
                raise ConfigError("trace.file", str(path), "an FCD file without text between "
                                  "its elements (a damaged '<'?)")
            for child in elem:
                if child.tag not in FCD_RECORDS:
                    raise ConfigError("trace.file", str(path), f"a SUMO FCD file (a <timestep> "
                                      f"holds {'/'.join(FCD_RECORDS)}, not <{child.tag[:40]}>)")
                if child.get("id") is None:
                    raise ConfigError("trace.file", str(path), "an id on every FCD record")
                if child.tag in ("vehicle", "person"):
                    ids.append(child.get("id"))
                    times.append(t)
                    xs.append(float(child.get("x")))
                    ys.append(float(child.get("y")))
            elem.clear()
    except ConfigError:
        raise
    except ET.ParseError as exc:
        raise ConfigError("trace.file", str(path), f"well-formed XML ({exc})") from None
    except OSError as exc:
        raise ConfigError("trace.file", str(path), f"a readable file (cannot read it: "
                          f"{exc.strerror or exc})") from None
    except LookupError as exc:  # the XML declaration names an unknown encoding
        raise ConfigError("trace.file", str(path), f"an XML encoding Python knows ({exc})") \
            from None
    except (TypeError, ValueError):
        raise ConfigError("trace.file", str(path), "numeric time, x and y in the FCD") from None
    return np.array(ids, dtype=str), np.array(times), np.array(xs), np.array(ys)


def _to_map(values: np.ndarray, *, geo: bool, crs: str, map_crs: str, path: Path) -> np.ndarray:
    source = "EPSG:4326" if geo else (crs or map_crs)
    try:
        same = CRS.from_user_input(source) == CRS.from_user_input(map_crs)
    except Exception:
        raise ConfigError("trace.crs", crs, "a CRS pyproj understands, e.g. EPSG:32618") from None
    if same:
        return values.astype(float)
    x, y = Transformer.from_crs(source, map_crs, always_xy=True).transform(
        values[:, 0], values[:, 1]
    )
    out = np.stack([x, y], axis=1)
    if not np.isfinite(out).all():
        raise ConfigError("trace.file", str(path), f"coordinates valid in {source}")
    return out


def _assemble(ids: np.ndarray, time: np.ndarray, xy: np.ndarray, *, path: Path) -> Trace:
    codes, uniques = pd.factorize(ids)  # codes in order of first appearance
    numeric = pd.to_numeric(pd.Series(uniques), errors="coerce")
    if numeric.notna().all() and (numeric == numeric.round()).all():
        rank = np.argsort(np.argsort(numeric.to_numpy(), kind="stable"), kind="stable")
        codes, uniques = rank[codes], uniques[np.argsort(numeric.to_numpy(), kind="stable")]
    order = np.lexsort((time, codes))
    codes, time, xy = codes[order], time[order], xy[order]
    dup = (codes[1:] == codes[:-1]) & (np.diff(time) <= 0)
    if dup.any():
        raise ConfigError("trace.file", str(path), "one record per id and time")
    ptr = np.searchsorted(codes, np.arange(len(uniques) + 1))
    return Trace(np.asarray(uniques, dtype=str), ptr, time - time.min(), xy)


def positions_at(trace: Trace, t: float) -> np.ndarray:
    """Every agent's position at trace time ``t`` (linear; parked before/after its records)."""
    n = trace.n_agents
    first, last = trace.ptr[:-1], trace.ptr[1:] - 1
    end = float(trace.time.max())
    t = min(max(float(t), 0.0), end)
    span = end + 1.0
    agent = np.repeat(np.arange(n), np.diff(trace.ptr))
    keys = agent * span + trace.time
    idx = np.searchsorted(keys, np.arange(n) * span + t, side="right") - 1
    idx = np.clip(idx, first, last)
    nxt = np.minimum(idx + 1, last)
    t0, t1 = trace.time[idx], trace.time[nxt]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(t1 > t0, (t - t0) / np.where(t1 > t0, t1 - t0, 1.0), 0.0)
    w = np.clip(w, 0.0, 1.0)[:, None]
    return trace.xy[idx] + w * (trace.xy[nxt] - trace.xy[idx])


def resolution(trace: Trace) -> tuple[float, float]:
    """(shortest interval between two records of one agent, fastest speed between them)."""
    same = np.diff(np.repeat(np.arange(trace.n_agents), np.diff(trace.ptr))) == 0
    dt = np.diff(trace.time)[same]
    if not dt.size:
        return float("inf"), 0.0
    dist = np.hypot(*np.diff(trace.xy, axis=0)[same].T)
    return float(dt.min()), float((dist / dt).max())


OUTSIDE_MARGIN_M = 100.0
"""How far beyond the map's bounding box a trace point may lie (lane offsets, a car parked at
the border) before the trace counts as recorded elsewhere."""


def outside_map(
    xy: np.ndarray, bounds: tuple[float, float, float, float], *, margin_m: float = OUTSIDE_MARGIN_M
) -> np.ndarray:
    """Mask of the points of ``xy`` farther than ``margin_m`` outside ``bounds`` (x0, y0, x1, y1).

    WHY: a trace in the wrong CRS, or of another city, would park every agent hundreds of km
    away and the run would go on with only a contact-regime warning.
    """
    x0, y0, x1, y1 = bounds
    x, y = xy[:, 0], xy[:, 1]
    return (x < x0 - margin_m) | (x > x1 + margin_m) | (y < y0 - margin_m) | (y > y1 + margin_m)


def clipped_to(trace: Trace, bounds: tuple[float, float, float, float]) -> Trace:
    """The trace with every point moved onto the map's bounding box (``trace.outside = clip``)."""
    x0, y0, x1, y1 = bounds
    xy = np.column_stack([np.clip(trace.xy[:, 0], x0, x1), np.clip(trace.xy[:, 1], y0, y1)])
    return Trace(trace.ids, trace.ptr, trace.time, xy)
