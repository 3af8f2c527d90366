"""The authors' ``road_sim`` loop with every car's position logged each second (child process).

Started by :mod:`validation.cdfl_remeet` as ``python cdfl_remeet_driver.py REQUEST.json``. It
runs ``road_sim.generate_roadNet_pair_area_list`` of liemak363/Cached-DFL@b116fea unmodified
(seeded as :mod:`validation.cdfl_driver` seeds it) and keeps two things: the pair list it
returns, and where each car stands after each of its 1 s moves, read by a wrapper around
``road_sim.Car.move`` that calls the authors' method and copies ``current_position`` (the
motion is the authors'; the wrapper only reads).

Two shims, memory only, as in :mod:`validation.cdfl_tau20`: the 18,014 x 18,014 0/1 adjacency
held as int8 instead of int64 (the same values; ``road_sim`` only compares it with 1), and no
area-filtered copy (only cars with an area use it; these cars have none).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

import networkx as nx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cdfl_driver


def main() -> None:
    req = json.loads(Path(sys.argv[1]).read_text())
    cdfl_driver._authors(Path(req["folder"]), int(req["seed"]))
    os.chdir(req["cwd"])
    adjacency = nx.adjacency_matrix
    nx.adjacency_matrix = lambda *a, **k: adjacency(*a, **k).astype(np.int8)
    import road_sim

    road_sim.filter_edges_by_group = lambda adj, groups: adj
    log: list[np.ndarray] = []
    move = road_sim.Car.move

    def logged(self, time):
        move(self, time)
        log.append(np.array(self.current_position, dtype=np.float64))

    road_sim.Car.move = logged
    n, rounds, epoch = int(req["num_car"]), int(req["num_round"]), int(req["epoch_time"])
    with contextlib.redirect_stdout(io.StringIO()):
        pairs, _area = road_sim.generate_roadNet_pair_area_list(
            str(Path.cwd()), n, rounds, req["radius_m"], epoch, req["speed"], "New York", 10,
            [0] * n,
        )
    xy = np.stack(log).reshape(rounds * epoch, n, 2)
    second = np.repeat(np.arange(len(pairs)), [len(p) for p in pairs])
    flat = np.array([ab for p in pairs for ab in p], dtype=np.int64).reshape(-1, 2)
    np.savez_compressed(req["out"], xy=xy, second=second, pairs=flat, n_seconds=len(pairs))
    Path(req["result"]).write_text(json.dumps({"seconds": len(pairs), "events": len(flat)}))


if __name__ == "__main__":
    main()
