"""Every reader refuses a damaged file in one line, or reads the same map (issue 23).

Property-based (hypothesis): a valid small file of each format is cut at a random offset,
has a random byte of its markup flipped, or has a random number replaced by NaN / inf /
a huge / a non-numeric value. Every outcome must be the same map as the intact file or a
one-line :class:`ConfigError` (``DatasetUnavailable`` for the idx files) — never a
traceback, never a silently different map. Flips inside values (a digit of a coordinate)
make a different but valid file, so only markup bytes are flipped; the value cases are the
injections. Examples are derandomised and bounded (``FUZZ``) so CI runs them all in a few
seconds, and each test fails when the reader check it guards is removed (tried once per
check when they were written: see docs/reference/errors.md).
"""

from __future__ import annotations

import gzip
import re
import struct
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mobidfl.errors import ConfigError, DatasetUnavailable
from mobidfl.maps.edges import EdgeTable
from mobidfl.maps.sources import load_edges, street_grid
from mobidfl.maps.traces import read_trace
from mobidfl.model.config import Config, parse_assignments, public_names

FUZZ = settings(max_examples=25, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e999", "abc", "", "0x1F", "--1"]


# --- valid small files --------------------------------------------------------------------------
def _graphml() -> bytes:
    import osmnx as ox

    path = Path(_scratch()) / "grid.graphml"
    ox.save_graphml(street_grid(rows=3, cols=3, spacing_m=120.0), path)
    return path.read_bytes()


def _osm() -> bytes:
    nodes = "".join(
        f'<node id="{10 + 3 * r + c}" lat="{40.7 + 0.001 * r:.4f}" lon="{-73.99 + 0.001 * c:.4f}"'
        ' version="1"/>\n'
        for r in range(3) for c in range(3)
    )
    ways = []
    for i in range(3):
        rows = "".join(f'<nd ref="{10 + 3 * i + c}"/>' for c in range(3))
        cols = "".join(f'<nd ref="{10 + 3 * r + i}"/>' for r in range(3))
        for way, refs in ((100 + i, rows), (200 + i, cols)):
            ways.append(f'<way id="{way}" version="1">{refs}<tag k="highway" v="residential"/>'
                        '</way>\n')
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="test">\n'
            f'{nodes}{"".join(ways)}</osm>\n').encode()


def _sumo() -> bytes:
    junctions = {"a": (0, 0), "b": (100, 0), "c": (100, 100), "d": (0, 100)}
    edges = [("ab", "a", "b"), ("ba", "b", "a"), ("bc", "b", "c"), ("cd", "c", "d"),
             ("da", "d", "a")]
    lanes = []
    for name, u, v in edges:
        (x0, y0), (x1, y1) = junctions[u], junctions[v]
        lanes.append(
            f'  <edge id="{name}" from="{u}" to="{v}" priority="1">\n'
            f'    <lane id="{name}_0" index="0" speed="13.89" length="100.00" '
            f'shape="{x0:.2f},{y0:.2f} {(x0 + x1) / 2:.2f},{(y0 + y1) / 2 + 1:.2f} '
            f'{x1:.2f},{y1:.2f}"/>\n  </edge>\n'
        )
    lanes.append('  <edge id="rail" from="a" to="c" priority="1">\n    <lane id="rail_0" '
                 'index="0" allow="rail" speed="20.00" length="141.42" shape="0.00,0.00 '
                 '100.00,100.00"/>\n  </edge>\n')
    nodes = "".join(f'  <junction id="{j}" type="priority" x="{x:.2f}" y="{y:.2f}" '
                    'incLanes="" intLanes="" shape=""/>\n' for j, (x, y) in junctions.items())
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<net version="1.20">\n'
            '  <location netOffset="0.00,0.00" convBoundary="0.00,0.00,100.00,100.00" '
            'origBoundary="0.00,0.00,100.00,100.00" projParameter="!"/>\n'
            + "".join(lanes) + nodes + "</net>\n").encode()


def _geojson() -> bytes:
    feature = ('{{"type": "Feature", "properties": {{"oneway": "{o}"}}, "geometry": '
               '{{"type": "LineString", "coordinates": [[{a}, {b}], [{c}, {d}], [{e}, {f}]]}}}}')
    features = [
        feature.format(o="false", a=-73.99, b=40.70, c=-73.985, d=40.7005, e=-73.98, f=40.70),
        feature.format(o="true", a=-73.98, b=40.70, c=-73.98, d=40.705, e=-73.98, f=40.71),
        feature.format(o="false", a=-73.99, b=40.70, c=-73.99, d=40.705, e=-73.99, f=40.71),
    ]
    return ('{"type": "FeatureCollection", "features": [\n' + ",\n".join(features)
            + "\n]}\n").encode()


def _fcd() -> bytes:
    steps = "".join(
        f'  <timestep time="{t:.2f}">\n'
        + "".join(f'    <vehicle id="v{i}" x="{10.0 * t + i:.2f}" y="{5.0 * i:.2f}" '
                  f'speed="10.00"/>\n' for i in range(3))
        + "  </timestep>\n"
        for t in range(4)
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<fcd-export>\n{steps}</fcd-export>\n'.encode()


def _idx() -> bytes:
    data = np.arange(2 * 3 * 4, dtype=np.uint8)
    return bytes([0, 0, 8, 3]) + struct.pack(">III", 2, 3, 4) + data.tobytes()


_SCRATCH: list[str] = []


def _scratch() -> str:
    return _SCRATCH[0]


@pytest.fixture(scope="module", autouse=True)
def scratch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    _SCRATCH[:] = [str(folder)]
    return folder


# --- mutations ----------------------------------------------------------------------------------
def markup_positions(raw: bytes) -> np.ndarray:
    """Offsets of markup bytes: inside ``<...>`` but outside quoted values (names, ``=``,
    quotes, brackets). A flip there changes the file's structure, not one of its values."""
    out, in_tag, quote = [], False, 0
    for i, byte in enumerate(raw):
        if not in_tag:
            if byte == ord("<"):
                in_tag = True
                out.append(i)
        elif quote:
            if byte == quote:
                quote = 0
                out.append(i)
        elif byte in (ord('"'), ord("'")):
            quote = byte
            out.append(i)
        else:
            out.append(i)
            if byte == ord(">"):
                in_tag = False
    return np.array(out)


NUMBER = re.compile(rb"(?<![\w.-])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")
"""A number standing alone (a coordinate, a time), not a digit inside a name like ``v0``."""


def number_spans(raw: bytes) -> list[tuple[int, int]]:
    return [m.span() for m in NUMBER.finditer(raw)]


def truncations(raw: bytes) -> st.SearchStrategy[bytes]:
    """``raw`` cut anywhere before its last non-blank byte (a cut file, never a whole one)."""
    end = len(raw.rstrip())
    return st.integers(0, end - 1).map(lambda n: raw[:n])


def tag_name_positions(raw: bytes) -> np.ndarray:
    """Offsets of the ``<`` and the name of every start or end tag (``<lane``, ``</edge``)."""
    return np.array([i for m in re.finditer(rb"</?[A-Za-z_][\w.:-]*", raw)
                     for i in range(*m.span())])


def flips(raw: bytes) -> st.SearchStrategy[bytes]:
    """One markup byte flipped; half the time in an element's name, where a skipped element
    would silently drop a street (names are a small share of the markup)."""

    def flipper(where: np.ndarray) -> st.SearchStrategy[bytes]:
        def flip(args: tuple[int, int]) -> bytes:
            index, mask = args
            at = int(where[index])
            return raw[:at] + bytes([raw[at] ^ mask]) + raw[at + 1:]

        return st.tuples(st.integers(0, len(where) - 1), st.integers(1, 255)).map(flip)

    return flipper(markup_positions(raw)) | flipper(tag_name_positions(raw))


def injections(raw: bytes) -> st.SearchStrategy[bytes]:
    spans = number_spans(raw)

    def inject(args: tuple[int, str]) -> bytes:
        (a, b), token = spans[args[0]], args[1].encode()
        return raw[:a] + token + raw[b:]

    return st.tuples(st.integers(0, len(spans) - 1), st.sampled_from(BAD_NUMBERS)).map(inject)


def damaged(raw: bytes) -> st.SearchStrategy[tuple[str, bytes]]:
    return st.one_of(
        truncations(raw).map(lambda b: ("cut", b)),
        flips(raw).map(lambda b: ("flip", b)),
        injections(raw).map(lambda b: ("inject", b)),
    )


# --- outcomes -----------------------------------------------------------------------------------
def read_map(path: Path) -> EdgeTable | ConfigError:
    """The map, or the one-line refusal; anything else propagates and fails the test."""
    try:
        return load_edges(str(path))
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc), str(exc)
        return exc


def same_map(a: EdgeTable, b: EdgeTable) -> bool:
    return (a.crs == b.crs and a.n_edges == b.n_edges and a.n_nodes == b.n_nodes
            and np.array_equal(a.node_xy, b.node_xy) and np.array_equal(a.edge_u, b.edge_u)
            and np.array_equal(a.edge_v, b.edge_v) and np.array_equal(a.ptr, b.ptr)
            and np.array_equal(a.coords, b.coords))


def assert_refused_or_same(kind: str, data: bytes, name: str, original: EdgeTable) -> None:
    path = Path(_scratch()) / name
    path.write_bytes(data)
    got = read_map(path)
    if isinstance(got, EdgeTable):
        assert kind != "cut", f"a file cut to {len(data)} bytes loaded as a map"
        assert same_map(got, original), f"{kind}: a damaged file loaded as a different map"


def where(data: bytes, raw: bytes) -> str:
    """The damaged spot, for the failure message."""
    at = next((i for i, (a, b) in enumerate(zip(data, raw, strict=False)) if a != b),
              min(len(data), len(raw)))
    return repr(data[max(0, at - 60):at + 40])


def _intact(raw: bytes, name: str) -> EdgeTable:
    path = Path(_scratch()) / name
    path.write_bytes(raw)
    table = load_edges(str(path))
    assert table.n_edges >= 4
    return table


# --- one property per reader --------------------------------------------------------------------
GRAPHML: dict[str, object] = {}


def _graphml_case() -> tuple[bytes, EdgeTable]:
    if not GRAPHML:
        # plus one edge written self-closed (no data), as GraphML writers do for bare edges
        raw = _graphml().replace(b"  </graph>", b'    <edge source="0" target="4" />\n  </graph>')
        GRAPHML.update(raw=raw, table=_intact(raw, "ok.graphml"))
    return GRAPHML["raw"], GRAPHML["table"]  # type: ignore[return-value]


@FUZZ
@given(st.data())
def test_graphml_reader_refuses_or_reads_the_same_map(data):
    raw, original = _graphml_case()
    kind, mutated = data.draw(damaged(raw))
    data.draw(st.just(where(mutated, raw)), label="damage")
    assert_refused_or_same(kind, mutated, "fuzz.graphml", original)


def test_graphml_element_with_a_damaged_name_is_refused_not_skipped():
    raw, original = _graphml_case()
    # Execute: the bare edge's name damaged (still well-formed XML), a data key undeclared
    damaged_name = raw.replace(b'<edge source="0" target="4" />', b'<edgE source="0" target="4" />')
    damaged_key = raw.replace(b'<data key="d1">', b'<data key="d9">', 1)
    # Assert: refused, not read as the map without that edge / that node's x
    for data, why in ((damaged_name, "<edgE>"), (damaged_key, "'d9'")):
        got = read_map(_write(Path(_scratch()) / "named.graphml", data))
        assert isinstance(got, ConfigError) and why in str(got), got
    assert original.n_edges == 25  # the 3x3 grid's 24 directed edges + the bare one


OSM = _osm()
SUMO = _sumo()
GEOJSON = _geojson()


@FUZZ
@given(damaged(OSM))
@example(("flip", OSM.replace(b"<nd ", b"<nD ", 1)))  # a way's node not skipped
@example(("flip", OSM.replace(b'<nd ref=', b'<nd rEf=', 1)))
@example(("flip", OSM.replace(b'<tag k=', b'<tag K=', 1)))  # a street's highway tag kept
@example(("flip", OSM.replace(b"<nd ", b">nd ", 1)))  # a node turned to text
def test_osm_xml_reader_refuses_or_reads_the_same_map(case):
    original = _intact(OSM, "ok.osm")
    assert_refused_or_same(*case, "fuzz.osm", original)


@FUZZ
@given(damaged(SUMO))
@example(("flip", SUMO.replace(b"<lane ", b"<lanE ", 1)))  # a street's only lane unknown
@example(("flip", SUMO.replace(b'allow="rail"', b'allOw="rail"', 1)))  # rail turned drivable
@example(("flip", SUMO.replace(b"<lane ", b"=lane ", 1)))  # a lane turned to text
def test_sumo_net_reader_refuses_or_reads_the_same_map(case):
    original = _intact(SUMO, "ok.net.xml")
    assert original.n_edges == 5  # the rail edge is not a street
    assert_refused_or_same(*case, "fuzz.net.xml", original)


@FUZZ
@given(st.one_of(truncations(gzip.compress(SUMO, mtime=0)),
                 st.tuples(st.integers(10, len(gzip.compress(SUMO, mtime=0)) - 1),
                           st.integers(1, 255)).map(
                     lambda a: _flip_at(gzip.compress(SUMO, mtime=0), *a))))
def test_gzipped_sumo_net_is_read_to_its_end(mutated):
    # every byte after gzip's 10-byte header is covered by its CRC or its length
    original = _intact(gzip.compress(SUMO, mtime=0), "ok.net.xml.gz")
    assert_refused_or_same("cut", mutated, "fuzz.net.xml.gz", original)


def _flip_at(raw: bytes, at: int, mask: int) -> bytes:
    return raw[:at] + bytes([raw[at] ^ mask]) + raw[at + 1:]


@FUZZ
@given(st.one_of(truncations(GEOJSON).map(lambda b: ("cut", b)),
                 injections(GEOJSON).map(lambda b: ("inject", b))))
def test_geojson_reader_refuses_or_reads_the_same_map(case):
    original = _intact(GEOJSON, "ok.geojson")
    assert_refused_or_same(*case, "fuzz.geojson", original)


def test_gpkg_with_a_bad_coordinate_is_refused(scratch):
    import geopandas as gpd
    import shapely

    # Prepare: the GeoJSON streets as a GeoPackage, then one point at latitude 95 / NaN / huge
    frame = gpd.read_file(_write(scratch / "g.geojson", GEOJSON))
    results = []
    for bad in ((-73.99, 95.0), (float("nan"), 40.7), (1e308, 40.7)):
        lines = list(frame.geometry)
        lines[0] = shapely.LineString([bad, lines[0].coords[-1]])
        path = scratch / f"bad{len(results)}.gpkg"
        gpd.GeoDataFrame(frame.drop(columns="geometry"), geometry=lines,
                         crs="EPSG:4326").to_file(path, driver="GPKG")
        # Execute
        results.append(read_map(path))
    # Assert
    assert all(isinstance(r, ConfigError) for r in results), results
    assert "latitude [-90, 90]" in str(results[0]) and "finite" in str(results[1])


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


FCD = _fcd()


@FUZZ
@example(("flip", FCD.replace(b"<vehicle ", b"<vehiclE ", 1)))  # a record not skipped
@example(("flip", FCD.replace(b"<vehicle ", b"=vehicle ", 1)))  # a record turned to text
@given(st.one_of(truncations(FCD).map(lambda b: ("cut", b)),
                 injections(FCD).map(lambda b: ("inject", b)),
                 flips(FCD).map(lambda b: ("flip", b))))
def test_fcd_trace_reader_refuses_or_reads_the_same_trace(case):
    kind, mutated = case
    original = read_trace(_write(Path(_scratch()) / "ok.xml", FCD), map_crs="EPSG:32618")
    path = _write(Path(_scratch()) / "fuzz.xml", mutated)
    try:
        got = read_trace(path, map_crs="EPSG:32618")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert kind != "cut", "a cut trace was read"
    same = (np.array_equal(got.ids, original.ids) and np.array_equal(got.ptr, original.ptr)
            and np.array_equal(got.time, original.time) and np.array_equal(got.xy, original.xy))
    assert same, f"{kind}: a damaged trace was read as a different one: {where(mutated, FCD)}"


IDX = _idx()


@FUZZ
@given(st.one_of(
    truncations(IDX).map(lambda b: ("raw", b)),
    st.tuples(st.integers(0, 15), st.integers(1, 255)).map(lambda a: ("raw", _flip_at(IDX, *a))),
    truncations(gzip.compress(IDX, mtime=0)).map(lambda b: ("gz", b)),
    st.tuples(st.integers(10, len(gzip.compress(IDX, mtime=0)) - 1), st.integers(1, 255)).map(
        lambda a: ("gz", _flip_at(gzip.compress(IDX, mtime=0), *a))),
))
def test_idx_reader_checks_the_header_against_the_file(case):
    from mobidfl.model.learning.data import read_idx

    kind, mutated = case
    path = _write(Path(_scratch()) / ("fuzz-idx" + (".gz" if kind == "gz" else "")), mutated)
    try:
        got = read_idx(path)
    except DatasetUnavailable as exc:
        assert "\n" not in str(exc)
        return
    assert got.shape == (2, 3, 4) and np.array_equal(got.ravel(), np.arange(24)), got.shape


# --- settings: the TOML config and --set ---------------------------------------------------------
TOML = b"""map = "grid:3x3"
steps = 4
step_s = 30.0
vehicles = 3
learning = false
seed = 7

[vehicle]
speed = 8.5
"""


@FUZZ
@given(st.one_of(truncations(TOML), injections(TOML), st.binary(max_size=64),
                 st.tuples(st.integers(0, len(TOML) - 1), st.integers(1, 255)).map(
                     lambda a: _flip_at(TOML, *a))))
def test_toml_config_is_a_config_or_one_line(mutated):
    path = _write(Path(_scratch()) / "fuzz.toml", mutated)
    try:
        config = Config.from_toml(path)
    except ConfigError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    # read as written: every value in the file is the config's value
    for name, value in _flat(tomllib.loads(mutated.decode())).items():
        assert config.explicit_settings()[name] == value, (name, where(mutated, TOML))


def _flat(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


NAMES = sorted(n for n in public_names() if n not in ("map", "data_root", "map_cache"))


@FUZZ
@given(st.sampled_from(NAMES),
       st.sampled_from([*BAD_NUMBERS, "1e400", "-1", "10**9", "true", "none", "9" * 40, "x=y"])
       | st.text(max_size=12))
def test_set_values_are_a_config_or_one_line(name, value):
    try:
        Config.from_settings({"learning": False, "map": "grid:3x3", "steps": 2,
                              **parse_assignments([f"{name}={value}"])})
    except ConfigError as exc:
        assert "\n" not in " ".join(exc.args), exc.args
        assert len(str(exc)) < 2000, len(str(exc))
