"""Re-meeting of the authors' Cached-DFL mobility beside MobiDFL's (validation/cdfl_remeet.py).

* the page's generated block equals what the committed data give (drift fails here);
* the statistics on hand-made meetings and positions equal the arithmetic;
* the emulation of the authors' 1 s moves equals their ``road_sim.Car.move``;
* a recomputed row of the committed data gives the committed numbers.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from validation import cdfl_remeet as cr


@pytest.fixture(scope="module")
def data():
    return json.loads((cr.DATA / "remeet.json").read_text())


def test_page_block_is_the_published_data(data):
    page = cr.PAGE.read_text()
    block = page.split(cr.START, 1)[1].split(cr.END, 1)[0].strip("\n")
    assert block == cr.page_block(data), (
        "docs/validation/index.md is stale: run `python -m validation.cdfl_remeet --page`")


def test_published_data_has_every_row_on_every_seed(data):
    assert [r["key"] for r in data["rows"]] == [r.key for r in cr.rows()]
    for row in data["rows"]:
        assert all(len(v) == data["seeds"] for v in row["values"].values()), row["key"]
    assert data["seeds"] >= 3


def test_epoch_statistics_equal_the_arithmetic():
    # Prepare: 3 cars; (0, 1) meet in every one of the 40 epochs, (1, 2) in epoch 30 only
    rounds = [np.array([[0, 1]]) for _ in range(cr.ROUNDS)]
    rounds[30] = np.array([[1, 2], [0, 1]])
    # Execute
    got = cr.epoch_statistics(rounds, n=3)
    # Assert: epochs 20-39 re-meet 1 except epoch 30 (1 of 2): (19 + 0.5) / 20
    assert got["remeet_share"] == pytest.approx(19.5 / 20)
    assert got["earlier_met_again"] == 1.0  # (0, 1) of epochs 0-19 met again in 20-39
    # 39 repeats of (0, 1), each one epoch after the last; 40 meetings after epoch 0
    assert got["gap_epochs_median"] == 1.0 and got["gap_epochs_bins"] == [1.0, 0, 0, 0, 0]
    assert got["repeat_share"] == pytest.approx(39 / 40)
    assert got["partners_per_epoch"] == pytest.approx((39 * 2 / 3 + 4 / 3) / 40)


def test_second_statistics_equal_the_arithmetic():
    # Prepare: car 1 stands 5 m from car 0 in seconds 0-2 and 10-13, 500 m away otherwise
    seconds = cr.TAU * cr.EPOCH + cr.EPOCH
    xy = np.zeros((seconds, 2, 2))
    xy[:, 1, 0] = 500.0
    xy[[0, 1, 2, 10, 11, 12, 13], 1, 0] = 5.0
    ground = np.zeros_like(xy)  # where they are on the ground: car 1 stands, car 0 drives
    ground[:, 0, 1] = np.arange(seconds)  # north at 1 m/s
    # Execute
    got = cr.second_statistics(xy, 10.0, ground)
    # Assert: contacts of 3 s and 4 s, one gap of 7 s (seconds 3-9); over 20 epochs
    # (2,400 s, once from second 0) car 0 moves 2.4 km and car 1 none: 1.2 km a car
    assert got["contact_s_mean"] == 3.5 and got["gap_s_median"] == 7.0
    assert got["gaps_within_epoch"] == 1.0
    assert got["moved_20_epochs_km"] == pytest.approx(1.2)


_CAR = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import road_sim
req = json.load(open(sys.argv[2]))
pos = [tuple(p) for p in req["pos"]]
car = road_sim.Car(req["u"], req["v"], req["speed"], pos, np.asarray(req["adj"]))
out = []
for _ in range(req["seconds"]):
    car.move(1)
    out.append(np.asarray(car.current_position, float).tolist())
json.dump(out, open(sys.argv[3], "w"))
"""



def test_one_node_moves_equal_the_authors_car_move(cached_dfl_reference, tmp_path):
    # Prepare: a ring of roads of 2 to 40 m (no choices, so no draw decides the path) and a
    # car at 19.23 m per second: short roads are where one node per move shows
    from mobidfl.maps.edges import from_segments
    from mobidfl.maps.network import StreetNetwork

    ring = np.array([[0, 0], [3, 0], [28, 0], [35, 0], [35, 40], [35, 42], [20, 42], [0, 42]],
                    float) + np.array([500_000.0, 4_500_000.0])
    table = from_segments(ring, np.roll(ring, -1, axis=0), crs="EPSG:32618", two_way=True)
    net = StreetNetwork.from_table(table, directed=True)
    turns = net.turn_table((0.5, 0.25, 0.25), rule="straightest")
    u = int(np.argmin(np.hypot(*(net.node_xy - ring[0]).T)))
    v = int(np.argmin(np.hypot(*(net.node_xy - ring[1]).T)))
    edge = np.flatnonzero((net.edge_u == u) & (net.edge_v == v))
    adj = np.zeros((len(net.node_xy),) * 2, int)
    adj[net.edge_u, net.edge_v] = 1
    speed, seconds = 19.23, 60
    (tmp_path / "req.json").write_text(json.dumps({
        "pos": net.node_xy.tolist(), "u": u, "v": v, "speed": speed, "adj": adj.tolist(),
        "seconds": seconds}))
    # Execute: the authors' Car.move(1), and the emulation
    done = subprocess.run(
        [sys.executable, "-c", _CAR, str(cached_dfl_reference / "cached_dfl"),
         str(tmp_path / "req.json"), str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = np.asarray(json.loads((tmp_path / "out.json").read_text()))
    edges, offsets, ours = edge, np.zeros(1), []
    rng = np.random.default_rng(0)
    for _ in range(seconds):
        edges, offsets = cr.authors_move(net, turns, edges, offsets, speed, rng)
        ours.append(cr.authors_xy(net, edges, offsets)[0])
    # Assert: the same position every second (coordinates ~5e6 m in float64 carry ~1e-9 m
    # rounding per operation, a few operations per second: 1e-6 m)
    assert np.abs(np.asarray(ours) - theirs).max() <= 1e-6


def test_a_row_recomputed_gives_the_committed_numbers(data):
    # one seed of the one-node-per-move row (~3 s): the script is deterministic per seed
    row = next(r for r in cr.rows() if r.key == "+steps")
    got = cr.measure_row(row, 0, cr._networks())
    committed = next(r for r in data["rows"] if r["key"] == "+steps")["values"]
    for q, v in got.items():
        assert v == committed[q][0], q


def test_fewer_than_three_seeds_is_refused_in_one_line(capsys):
    assert cr.main(["--seeds", "2"]) == 2
    err = capsys.readouterr().err
    assert "need 3 or more" in err and err.count("\n") == 1
