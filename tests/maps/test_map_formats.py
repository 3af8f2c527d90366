"""Map formats are plug-ins: a toy format registered here loads a world through the normal
path; every compressed map format is inflated once, capped, and refused in one line when cut
short, not compressed or a bomb."""

from __future__ import annotations

import bz2
import gzip
import zlib
from pathlib import Path

import numpy as np
import pytest

from mobidfl import inflate
from mobidfl.errors import ConfigError
from mobidfl.maps.edges import EdgeTable, MapDataError, from_segments
from mobidfl.maps.formats import MAP_FORMATS, MapFormat, format_for, register_map_format
from mobidfl.maps.formats.sumo import LOCAL_PLANE_CRS
from mobidfl.maps.sources import allowed, load_edges, load_graph, source_digest, street_grid
from mobidfl.maps.world import NETWORK_FORMAT, WorldMap


# --- a toy format, registered by this test module ------------------------------------------
class ToyEdges(MapFormat):
    """One straight two-way street per line: ``x0 y0 x1 y1`` in metres on a local plane."""

    name = "toy_edges"
    suffixes = (".toyedges",)

    def check(self, path: Path, *, max_inflated: int | None = None) -> None:
        self._segments(path)

    def read(self, path: Path, *, max_inflated: int | None = None) -> EdgeTable:
        xy = self._segments(path)
        return from_segments(xy[:, :2], xy[:, 2:], crs=LOCAL_PLANE_CRS, two_way=True)

    @staticmethod
    def _segments(path: Path) -> np.ndarray:
        rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
        bad = [n for n, row in enumerate(rows, 1) if len(row) != 4]
        if bad:
            raise MapDataError(f"4 numbers on every line (line {bad[0]} is not)")
        return np.array(rows, float).reshape(-1, 4)


@pytest.fixture
def toy(tmp_path):
    register_map_format(ToyEdges)
    # a 3 x 3 grid of 100 m blocks: 12 two-way streets
    lines = [f"{100 * c} {100 * r} {100 * (c + 1)} {100 * r}" for r in range(3) for c in range(2)]
    lines += [f"{100 * c} {100 * r} {100 * c} {100 * (r + 1)}" for r in range(2) for c in range(3)]
    path = tmp_path / "town.toyedges"
    path.write_text("\n".join(lines) + "\n")
    yield path
    MAP_FORMATS.unregister("toy_edges")


def test_a_registered_toy_format_loads_a_graph_and_a_world_through_the_normal_path(toy, tmp_path):
    # Execute
    table = load_edges(str(toy))
    graph = load_graph(str(toy))
    world = WorldMap.build(str(toy), cell_m=50.0, areas=2, seed=0, cache_dir=tmp_path / "cache")
    # Assert: 12 streets, both directions; the world cached under the format's digest
    assert isinstance(format_for(toy), ToyEdges) and ".toyedges" in allowed()
    assert table.n_edges == 24 and graph.number_of_edges() == 24
    assert len(world.walk.node_xy) == 9 and world.drive.n_edges == 24
    assert np.allclose(world.drive.edge_len, 100.0)
    digest = ToyEdges().digest(toy)
    assert source_digest(str(toy)) == digest
    assert (tmp_path / "cache" / f"net-{digest[:24]}-v{NETWORK_FORMAT}.npz").is_file()


def test_the_toy_format_refuses_a_bad_file_in_one_line(toy):
    # Prepare
    toy.write_text("0 0 100 0\n0 0 100\n")
    # Execute / Assert: its check and the loader give the same one line
    with pytest.raises(MapDataError, match="line 2"):
        ToyEdges().check(toy)
    with pytest.raises(ConfigError) as caught:
        load_edges(str(toy))
    assert "\n" not in str(caught.value) and "line 2" in str(caught.value)
    assert str(toy) in str(caught.value)


@pytest.mark.parametrize("attributes, error", [
    ({"suffixes": (".csv",)}, "already read by map format 'segments_csv'"),
    ({"suffixes": ("toy",)}, "lower-case file endings"),
    ({"suffixes": (".TOY",)}, "lower-case file endings"),
    ({"suffixes": ()}, "lower-case file endings"),
    ({"read": None}, "does not implement read"),
])
def test_a_format_that_breaks_the_contract_is_refused_when_it_registers(attributes, error):
    # Prepare: the toy with one declaration wrong
    body = {"name": "broken_toy", **attributes}
    if body.get("read", 1) is None:
        del body["read"]
        bases: tuple[type, ...] = (MapFormat,)
    else:
        bases = (ToyEdges,)
    broken = type("Broken", bases, body)
    # Execute / Assert
    with pytest.raises((TypeError, ValueError), match=error):
        register_map_format(broken)
    assert "broken_toy" not in MAP_FORMATS


def test_the_longest_suffix_picks_the_format():
    # Execute / Assert: SUMO's .net.xml over OSM's .xml, whatever the case
    names = {n: type(format_for(n)).__name__ for n in (
        "a.xml", "a.NET.XML", "a.net.xml.gz", "a.osm", "a.osm.bz2", "a.osm.pbf", "a.graphml.gz")}
    assert names == {"a.xml": "OsmXmlFormat", "a.NET.XML": "SumoNetFormat",
                     "a.net.xml.gz": "SumoNetFormat", "a.osm": "OsmXmlFormat",
                     "a.osm.bz2": "OsmXmlFormat", "a.osm.pbf": "OsmPbfFormat",
                     "a.graphml.gz": "GraphmlFormat"}
    assert format_for("a.txt") is None


# --- compressed map files: one pass, capped -------------------------------------------------
def _osm() -> bytes:
    nodes = "".join(f'<node id="{10 + 3 * r + c}" lat="{40.7 + 0.001 * r:.4f}" '
                    f'lon="{-73.99 + 0.001 * c:.4f}" version="1"/>\n'
                    for r in range(3) for c in range(3))
    ways = "".join(
        f'<way id="{w}" version="1">{refs}<tag k="highway" v="residential"/></way>\n'
        for i in range(3)
        for w, refs in ((100 + i, "".join(f'<nd ref="{10 + 3 * i + c}"/>' for c in range(3))),
                        (200 + i, "".join(f'<nd ref="{10 + 3 * r + i}"/>' for r in range(3))))
    )
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<osm version="0.6" generator="t">\n'
            f"{nodes}{ways}</osm>\n").encode()


def _sumo() -> bytes:
    spots = {"a": (0, 0), "b": (100, 0), "c": (100, 100)}
    edges = "".join(
        f'<edge id="{u}{v}" from="{u}" to="{v}"><lane id="{u}{v}_0" index="0" speed="13.9" '
        f'length="100" shape="{spots[u][0]},{spots[u][1]} {spots[v][0]},{spots[v][1]}"/></edge>\n'
        for u, v in ("ab", "ba", "bc", "cb"))
    junctions = "".join(f'<junction id="{j}" x="{x}" y="{y}"/>\n' for j, (x, y) in spots.items())
    return (f'<net><location netOffset="0,0" projParameter="!"/>\n{edges}{junctions}'
            "</net>\n").encode()


def _graphml() -> bytes:
    import tempfile

    import osmnx as ox

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g.graphml"
        ox.save_graphml(street_grid(rows=3, cols=3, spacing_m=120.0), path)
        return path.read_bytes()


PLAIN = {"map.osm.bz2": _osm, "map.net.xml.gz": _sumo, "map.graphml.gz": _graphml}
PACK = {"bz2": bz2.compress, "gz": lambda raw: gzip.compress(raw, mtime=0)}
BOMB_CAP = 1 << 20


def _bomb(name: str) -> bytes:
    """The file's own opening then 16 MiB of blanks (well-formed so far): only the cap stops it."""
    head = {"map.osm.bz2": b'<?xml version="1.0"?>\n<osm version="0.6">',
            "map.net.xml.gz": b"<net>", "map.graphml.gz": b"<?xml version='1.0'?>\n<graphml>"}
    return head[name] + b" " * (16 << 20)


@pytest.fixture
def counted(monkeypatch):
    """Every decompressor made (gzip or bz2, by anyone) and the bytes it put out."""
    made: list[list[int]] = []

    class Counting:
        def __init__(self, engine):
            self._engine = engine
            self._out = [0]
            made.append(self._out)

        def decompress(self, data, *args, **kwargs):
            out = self._engine.decompress(data, *args, **kwargs)
            self._out[0] += len(out)
            return out

        def __getattr__(self, name):
            return getattr(self._engine, name)

    real_bz2, real_zlib = bz2.BZ2Decompressor, zlib.decompressobj
    monkeypatch.setattr(bz2, "BZ2Decompressor", lambda *a, **k: Counting(real_bz2(*a, **k)))
    monkeypatch.setattr(zlib, "decompressobj", lambda *a, **k: Counting(real_zlib(*a, **k)))
    return made


@pytest.mark.parametrize("name", sorted(PLAIN))
@pytest.mark.parametrize("case", ["good", "truncated", "not compressed", "bomb"])
def test_every_compressed_map_format_reads_once_or_refuses_in_one_line(name, case, tmp_path,
                                                                       counted):
    # Prepare
    plain = PLAIN[name]()
    pack = PACK[name.rsplit(".", 1)[1]]
    raw = {"good": pack(plain), "truncated": pack(plain)[: len(pack(plain)) // 2],
           "not compressed": plain, "bomb": pack(_bomb(name))}[case]
    path = tmp_path / name
    path.write_bytes(raw)
    counted.clear()
    # Execute
    if case == "good":
        table = load_edges(str(path), max_inflated=BOMB_CAP)
        unpacked = tmp_path / name.rsplit(".", 1)[0]
        unpacked.write_bytes(plain)
        same = load_edges(str(unpacked))
        # Assert: the same streets as the plain file, inflated by one decompressor, once
        assert table.n_edges == same.n_edges > 0
        assert np.array_equal(table.coords, same.coords)
        assert len(counted) == 1 and counted[0][0] == len(plain)
        return
    with pytest.raises(ConfigError) as caught:
        load_edges(str(path), max_inflated=BOMB_CAP)
    message = str(caught.value)
    # Assert: one line naming the file and why; a bomb inflated only up to the cap
    assert "\n" not in message and str(path) in message and "'map'" in message
    why = {"truncated": "cut short", "not compressed": "bad ", "bomb": "more than 1 MiB"}[case]
    assert why in message, message
    assert len(counted) == 1
    if case == "bomb":
        assert counted[0][0] <= BOMB_CAP + 1
    # the format's own check refuses it too, for the same reason
    with pytest.raises((MapDataError, ConfigError), match=why.strip()):
        format_for(path).check(path, max_inflated=BOMB_CAP)


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_compressed_map_bomb_is_exit_2_with_one_line_from_the_cli(name, tmp_path, monkeypatch,
                                                                     capsys):
    from mobidfl.analysis.cli import main

    # Prepare: the default cap lowered to 1 MiB for this run
    path = tmp_path / name
    path.write_bytes(PACK[name.rsplit(".", 1)[1]](_bomb(name)))
    monkeypatch.setattr(inflate, "MAX_INFLATED_BYTES", BOMB_CAP)
    # Execute
    code = main(["run", "--out", str(tmp_path / "out"), "--set", f"map={path}",
                 "--set", "learning=false", "--set", "steps=2", "--set", "vehicles=3",
                 "--set", "pedestrians=0", "--set", "sensors=0", "--set", "uavs=0", "--quiet",
                 "--set", f"map_cache={tmp_path / 'cache'}"])
    # Assert
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "'map'" in err[0] and "more than 1 MiB" in err[0], err[0]
