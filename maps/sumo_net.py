"""Any MobiDFL map as an Eclipse SUMO network, plus seeded SUMO demand (``randomTrips.py``).

SUMO comes from PyPI (``eclipse-sumo``: ``netconvert``, ``duarouter``, ``tools/``;
``libsumo``: SUMO in-process). The map's directed drive network (``world.drive``: the
largest strongly connected component, one-way streets kept, projected metres) is written as
SUMO plain XML (``--node-files``/``--edge-files``) with coordinates *in the map's CRS* and
converted with ``netconvert --offset.disable-normalization``: SUMO's x/y are then the map's
metres, so every SUMO position lies on a MobiDFL street with no re-projection (lanes are
drawn centred on the street geometry, ``spreadType="center"``). Because the network is
strongly connected, a vehicle can always be routed from where it arrived to any new
destination.

Networks are cached in ``<map_cache>/sumo/<sha1>.net.xml`` keyed by the plain XML, the
netconvert options and the SUMO version, so a map converts once per machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mobidfl.atomic import atomic_path, write_npz
from mobidfl.errors import ConfigError
from mobidfl.maps.network import StreetNetwork

INSTALL = "the PyPI packages eclipse-sumo, libsumo and sumolib (pip install -e . or make setup)"

NETCONVERT_OPTIONS: tuple[str, ...] = (
    "--offset.disable-normalization",
    "true",
    "--no-turnarounds.except-deadend",
    "true",
    "--junctions.corner-detail",
    "0",
    "--tls.guess",
    "true",
    "--tls.guess.threshold",
    "0",
    "--no-warnings",
    "true",
)
"""netconvert options: keep the map's coordinates; U-turns only at dead ends (as Cached-DFL's
Manhattan model); traffic lights guessed at major crossings (``--tls.guess``)."""


@dataclass(frozen=True)
class SumoTools:
    """Where SUMO is installed (``SUMO_HOME`` of the ``eclipse-sumo`` wheel)."""

    home: Path
    version: str

    def binary(self, name: str) -> Path:
        """Path of SUMO's ``name`` program; a missing or non-executable one is refused."""
        path = self.home / "bin" / name
        if not path.is_file() or not os.access(path, os.X_OK):
            raise ConfigError("vehicle.mobility", "sumo", f"SUMO's '{name}' binary from {INSTALL}")
        return path

    @property
    def random_trips(self) -> Path:
        """Path of SUMO's ``tools/randomTrips.py``; refused when missing."""
        path = self.home / "tools" / "randomTrips.py"
        if not path.is_file():
            raise ConfigError(
                "vehicle.mobility", "sumo", f"SUMO's tools/randomTrips.py from {INSTALL}"
            )
        return path

    def env(self) -> dict[str, str]:
        """Environment for SUMO's programs: its own SUMO_HOME and PROJ data."""
        env = dict(os.environ, SUMO_HOME=str(self.home))
        proj = self.home / "data" / "proj"
        if proj.is_dir():
            env["PROJ_DATA"] = env["PROJ_LIB"] = str(proj)
        return env


def sumo_tools() -> SumoTools:
    """Locate SUMO; a missing installation is a one-line :class:`ConfigError`."""
    # The eclipse-sumo wheel's own files, found through its distribution metadata (a
    # module named ``sumo`` earlier on sys.path, e.g. benchmarks/sumo.py, must not matter).
    try:
        dist = importlib.metadata.distribution("eclipse-sumo")
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError("vehicle.mobility", "sumo", INSTALL) from None
    home = Path(str(dist.locate_file("sumo")))
    if not home.is_dir():
        raise ConfigError("vehicle.mobility", "sumo", INSTALL)
    tools = SumoTools(home=home, version=dist.version)
    tools.binary("netconvert")
    tools.binary("duarouter")
    return tools


def import_libsumo():
    """Import ``libsumo`` without letting it change this process's PROJ data folder.

    libsumo's ``__init__`` points ``PROJ_DATA`` at SUMO's own PROJ files when unset, which
    would make pyproj (maps, WGS84 export) read a foreign database; it also prints a pyarrow
    version notice that does not concern us (SUMO's Parquet output is not used).
    """
    try:
        with _own_proj_env(), contextlib.redirect_stdout(io.StringIO()):
            import libsumo
    except ImportError:
        raise ConfigError("vehicle.mobility", "sumo", INSTALL) from None
    return libsumo


@contextlib.contextmanager
def _own_proj_env():
    """Undo the ``PROJ_DATA``/``PROJ_LIB`` that SUMO's Python packages set on import."""
    saved = {k: os.environ.get(k) for k in ("PROJ_DATA", "PROJ_LIB")}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# --- network ----------------------------------------------------------------------------
def plain_xml(network: StreetNetwork, *, speed_mps: float) -> tuple[str, str]:
    """SUMO plain node and edge XML of a directed :class:`StreetNetwork` (map CRS metres).

    Node ``n<i>`` is ``network.node_xy[i]``; edge ``e<k>`` is ``network`` edge ``k`` with its
    full geometry as ``shape``, one lane, speed limit ``speed_mps``.
    """
    nodes = "\n".join(
        f'  <node id="n{i}" x="{x!r}" y="{y!r}"/>'
        for i, (x, y) in enumerate(network.node_xy.tolist())
    )
    shapes = _edge_shapes(network)
    edges = "\n".join(
        f'  <edge id="e{k}" from="n{u}" to="n{v}" numLanes="1" speed="{speed_mps!r}" '
        f'spreadType="center" shape="{shape}"/>'
        for k, (u, v, shape) in enumerate(
            zip(network.edge_u.tolist(), network.edge_v.tolist(), shapes, strict=True)
        )
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<nodes>\n{nodes}\n</nodes>\n',
        f'<?xml version="1.0" encoding="UTF-8"?>\n<edges>\n{edges}\n</edges>\n',
    )


def _edge_shapes(network: StreetNetwork) -> list[str]:
    points = [f"{x!r},{y!r}" for x, y in network.pts_xy.tolist()]
    return [
        " ".join(points[a:b])
        for a, b in zip(network.edge_pt0.tolist(), network.edge_pt1.tolist(), strict=True)
    ]


def build_network(
    network: StreetNetwork,
    *,
    speed_mps: float,
    cache_dir: str | Path,
    map_name: str,
    tools: SumoTools | None = None,
) -> Path:
    """Convert ``network`` with netconvert (cached by content hash); return the .net.xml.

    Raises
    ------
    ConfigError
        netconvert fails or produces a network without edges.
    """
    tools = tools or sumo_tools()
    nodes, edges = plain_xml(network, speed_mps=speed_mps)
    digest = hashlib.sha1(
        "\0".join([nodes, edges, " ".join(NETCONVERT_OPTIONS), tools.version]).encode()
    ).hexdigest()[:20]
    folder = Path(cache_dir).expanduser() / "sumo"
    target = folder / f"{digest}.net.xml"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with (tempfile.TemporaryDirectory(prefix=".sumo-", dir=folder) as tmp,
          atomic_path(target) as out):  # a concurrent run sees the whole file or none
        work = Path(tmp)
        (work / "map.nod.xml").write_text(nodes)
        (work / "map.edg.xml").write_text(edges)
        result = subprocess.run(
            [
                str(tools.binary("netconvert")),
                "--node-files", str(work / "map.nod.xml"),
                "--edge-files", str(work / "map.edg.xml"),
                "-o", str(out),
                *NETCONVERT_OPTIONS,
            ],
            capture_output=True,
            text=True,
            env=tools.env(),
            check=False,
        )
        if result.returncode != 0 or not out.is_file() or not network_edges(out):
            reason = _first_error(result)
            raise ConfigError("map", map_name, f"a street map netconvert can convert ({reason})")
    return target


def _first_error(result: subprocess.CompletedProcess) -> str:
    for line in (result.stderr or "").splitlines() + (result.stdout or "").splitlines():
        if line.strip().lower().startswith(("error", "quitting")):
            return line.strip()
    return f"exit status {result.returncode}, no edges"


def network_edges(net_file: Path) -> list[str]:
    """Ids of the normal (non-internal) edges of a SUMO network, in file order."""
    out = []
    for _, elem in ET.iterparse(net_file, events=("end",)):
        if elem.tag == "edge" and elem.get("function") is None:
            out.append(elem.get("id"))
        if elem.tag in ("edge", "junction", "connection"):
            elem.clear()
    return out


# --- demand -----------------------------------------------------------------------------
def random_trips(
    net_file: Path,
    *,
    trips: int,
    seed: int,
    fringe_factor: float,
    cache_dir: str | Path,
    tools: SumoTools | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``trips`` (origin edge, destination edge) pairs from SUMO's ``randomTrips.py``.

    Deterministic from ``seed`` (``--seed``); ``--validate`` keeps only routable trips (the
    network is strongly connected, so normally all); ``--fringe-factor`` weights trips that
    start/end at the map's border. Cached beside the network.
    """
    tools = tools or sumo_tools()
    folder = Path(cache_dir).expanduser() / "sumo"
    key = hashlib.sha1(
        f"{net_file.name}|{trips}|{seed}|{fringe_factor!r}|{tools.version}".encode()
    ).hexdigest()[:20]
    cached = folder / f"{key}.trips.npz"
    if cached.is_file():
        data = np.load(cached)
        return data["origin"], data["destination"]
    folder.mkdir(parents=True, exist_ok=True)
    asked = trips + max(10, trips // 20)  # --validate may drop a few
    with tempfile.TemporaryDirectory(prefix=".sumo-", dir=folder) as tmp:
        out = Path(tmp) / "trips.xml"
        result = subprocess.run(
            [
                sys.executable, str(tools.random_trips),
                "-n", str(net_file),
                "-o", str(out),
                "--seed", str(int(seed)),
                "-b", "0",
                "-e", str(asked),
                "-p", "1",
                "--fringe-factor", repr(float(fringe_factor)),
                "--validate",
            ],
            capture_output=True,
            text=True,
            env=tools.env(),
            cwd=tmp,
            check=False,
        )
        pairs = _read_trips(out) if out.is_file() else []
        if result.returncode != 0 or not pairs:
            raise ConfigError(
                "map", str(net_file), f"a network randomTrips.py can route ({_first_error(result)})"
            )
        while len(pairs) < trips:  # a tiny map: reuse the validated trips in order
            pairs = pairs + pairs
        origin = np.array([p[0] for p in pairs[:trips]])
        destination = np.array([p[1] for p in pairs[:trips]])
    write_npz(cached, origin=origin, destination=destination)
    return origin, destination


def _read_trips(path: Path) -> list[tuple[str, str]]:
    """(from, to) of every ``<trip>`` (or first/last edge of every routed ``<vehicle>``)."""
    pairs = []
    for _, elem in ET.iterparse(path, events=("end",)):
        if elem.tag == "trip" and elem.get("from") and elem.get("to"):
            pairs.append((elem.get("from"), elem.get("to")))
        elif elem.tag == "vehicle":
            route = elem.find("route")
            if route is not None and route.get("edges"):
                edges = route.get("edges").split()
                pairs.append((edges[0], edges[-1]))
        if elem.tag in ("trip", "vehicle"):
            elem.clear()
    return pairs




# --- routing ----------------------------------------------------------------------------
def connections(net_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """(from, to) edge indices of every connection between normal edges ``e<k>`` (cached)."""
    cached = net_file.with_suffix(".connections.npz")
    if cached.is_file():
        data = np.load(cached)
        return data["source"], data["target"]
    pairs: set[tuple[int, int]] = set()
    for _, elem in ET.iterparse(net_file, events=("end",)):
        if elem.tag == "connection":
            a, b = elem.get("from", ""), elem.get("to", "")
            if a.startswith("e") and b.startswith("e"):
                pairs.add((int(a[1:]), int(b[1:])))
        if elem.tag in ("edge", "junction", "connection"):
            elem.clear()
    ordered = sorted(pairs)
    source = np.array([p[0] for p in ordered], dtype=np.int64)
    target = np.array([p[1] for p in ordered], dtype=np.int64)
    write_npz(cached, source=source, target=target)
    return source, target


class EdgeRouter:
    """Shortest routes (by length) over SUMO's lane connections, edge to edge.

    SUMO's own per-trip routing costs milliseconds per vehicle (``findRoute``;
    docs/performance/measurements.md), paid at every re-insertion; here one
    Dijkstra per origin edge over the connection graph (scipy, cached per origin) gives
    routes SUMO accepts as they are (only connections netconvert built are used, so no
    forbidden U-turn).
    """

    _CACHE = 4096

    def __init__(self, source: np.ndarray, target: np.ndarray, length: np.ndarray) -> None:
        import scipy.sparse as sp

        n = len(length)
        self.graph = sp.csr_matrix((length[target], (source, target)), shape=(n, n))
        self._pred: dict[int, np.ndarray] = {}

    def route(self, origin: int, destination: int) -> list[int] | None:
        """Edge indices from ``origin`` to ``destination`` inclusive (None: unreachable)."""
        if origin == destination:
            return [origin]
        from scipy.sparse.csgraph import dijkstra

        pred = self._pred.get(origin)
        if pred is None:
            if len(self._pred) >= self._CACHE:
                self._pred.clear()
            _, pred = dijkstra(self.graph, indices=origin, return_predecessors=True)
            self._pred[origin] = pred
        path = [destination]
        while path[-1] != origin:
            prev = int(pred[path[-1]])
            if prev < 0:
                return None
            path.append(prev)
        return path[::-1]
