"""Runs Cached-DFL's own code (``liemak363/Cached-DFL`` at b116fea), unmodified, in a child process.

Started by :mod:`validation.cached_dfl` as ``python cdfl_driver.py REQUEST.json``. The authors'
modules have short names (``model``, ``aggregation``, ``utils``) that clash with MobiDFL's
packages, so they are imported in a fresh interpreter whose path starts at the cache folder's
``cached_dfl/``; the working directory is a temporary ``run/`` whose ``../NY_Data/NewYork.csv``
is the cache's copy (``road_sim.generate_roadNet_pair_area_list`` reads that relative path).

Shims (each one listed in validation/README.md and tested):

* ``cvxpy``: ``cache_algorithm.py`` imports it at the top for LP helpers (``solve_LP_alpha``,
  ``solve_LP_fresh``) that Table 2 never calls; it is not installed, so an empty module stands
  in (library drift: a missing optional dependency).
* ``road_sim.filter_edges_by_group`` (speed): the original is a pure-Python double loop over an
  18,014 x 18,014 dense matrix (324 M iterations, ~10 min); :func:`filter_edges_fast` computes
  the same matrix with numpy, row block by row block (tested equal on small matrices). Its
  result is used only for cars with an area (``car_type != 0``); Table 2's cars have none.
* pair lists computed once: ``trainer_single.generate_roadNet_pair_area_list`` is replaced by a
  function returning the pair list the same authors' function produced earlier for the same
  (seed, cars, rounds, epoch time, speed, range), saved in the cache folder.

Configuration, not shims: ``seed_setter.SEED`` is set before ``road_sim`` is imported (the
authors hard-code 10086); ``trainer_single``'s module globals that its ``__main__`` block sets
(``num_car``, ``local_ep``, ``cache_size``, ``kick_out``, ``global_model``, ...) are set here;
``global_model`` is a one-parameter module whose deep copy is itself (Table 2 counts and ages
do not depend on model contents; the authors deep-copy every cached model at every meeting).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import types
from pathlib import Path

import numpy as np


def filter_edges_fast(adj_matrix: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``road_sim.filter_edges_by_group`` vectorised: ``adj[i, j]`` kept iff same group."""
    groups = np.asarray(groups)
    n = len(groups)
    out = np.zeros_like(adj_matrix)
    for s in range(0, n, 512):
        e = min(n, s + 512)
        same = groups[s:e, None] == groups[None, :n]
        out[s:e, :n] = np.where(same, adj_matrix[s:e, :n], 0)
    return out


def _authors(folder: Path, seed: int) -> None:
    """Import path and cwd for the authors' modules; the cvxpy stub; the seed."""
    sys.path[:] = [str(folder / "cached_dfl")] + [
        p for p in sys.path if Path(p).resolve() != Path(__file__).resolve().parent
    ]
    sys.modules.setdefault("cvxpy", types.ModuleType("cvxpy"))
    import seed_setter

    seed_setter.SEED = int(seed)
    seed_setter.set_seed()


def _pairs(req: dict) -> dict:
    """The authors' ``road_sim.generate_roadNet_pair_area_list``: 1 s sub-steps, meeting events."""
    import road_sim

    road_sim.filter_edges_by_group = filter_edges_fast
    out = Path(req["out"])
    with contextlib.redirect_stdout(io.StringIO()):
        pairs, _area = road_sim.generate_roadNet_pair_area_list(
            str(Path.cwd()), req["num_car"], req["num_round"], req["radius_m"],
            req["epoch_time"], req["speed"], "New York", 10, [0] * req["num_car"],
        )
    second = np.repeat(np.arange(len(pairs)), [len(p) for p in pairs])
    flat = np.array([ab for p in pairs for ab in p], dtype=np.int64).reshape(-1, 2)
    np.savez_compressed(out, second=second, pairs=flat, n_seconds=len(pairs))
    return {"seconds": len(pairs), "events": len(flat)}


def _load_pairs(path: str) -> list[list[tuple[int, int]]]:
    z = np.load(path)
    pairs: list[list[tuple[int, int]]] = [[] for _ in range(int(z["n_seconds"]))]
    for s, (a, b) in zip(z["second"].tolist(), z["pairs"].tolist(), strict=True):
        pairs[s].append((a, b))
    return pairs


def _token_model():
    """One-parameter model whose deep copy is itself: cache statistics ignore model contents."""
    import torch

    class Token(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def __deepcopy__(self, memo):
            return self

    return Token()


def _trainer(req: dict, *, kick_out: int, cache_size: int):
    """``trainer_single`` imported without running ``__main__``; globals set as it sets them."""
    sys.argv = [
        "trainer_single.py", "--algorithm", "test", "--epoch_time", str(req["epoch_time"]),
        "--num_car", str(req["num_car"]), "--num_round", str(req["num_round"]),
        "--kick_out", str(kick_out), "--cache_size", str(cache_size),
        "--local_ep", str(req["local_ep"]),
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        import trainer_single as ts
    import datetime

    ts.args = ts.parser.parse_args(sys.argv[1:])
    n = req["num_car"]
    ts.num_car, ts.num_round, ts.local_ep = n, req["num_round"], req["local_ep"]
    ts.lr, ts.alpha, ts.task, ts.distribution = 0.1, 0.5, "fashionmnist", "non-iid"
    ts.cache_size = cache_size
    ts.kick_out = ts.args.kick_out is not None and ts.args.kick_out > 0  # as in __main__
    ts.date_time = datetime.datetime.now()
    ts.car_type_list = [0] * n
    ts.global_model = _token_model()
    ts.statistic_data = np.zeros([n, 10])
    ts.data_points = np.ones(n)
    ts.weights = ts.data_points
    ts.data_similarity = np.zeros([n, n])
    pairs = _load_pairs(req["pairs"])
    ts.generate_roadNet_pair_area_list = lambda *a, **k: (pairs, [[] for _ in range(n)])
    return ts


def _table2(req: dict) -> dict:
    """``trainer_single.Decentralized_Cache_test`` (algorithm ``test``) per tau_max; log parsed."""
    out: dict[str, list[list[float]]] = {}
    cache_size = req["cache_size"]
    for tau in req["taus"]:
        ts = _trainer(req, kick_out=tau, cache_size=cache_size)
        log = Path("result/test/cache") / (
            f"cache_age_cache_num_cache_{cache_size}_{req['epoch_time']}_{tau}.txt"
        )
        log.unlink(missing_ok=True)
        with contextlib.redirect_stdout(io.StringIO()):
            ts.Decentralized_Cache_test()
        rows = []
        for line in log.read_text().splitlines():
            rnd, rest = line.split(":", 1)
            age, num = rest.split("\t")
            rows.append([int(rnd), float(age), float(num)])
        out[str(tau)] = rows
    return out


def _aggregate(req: dict) -> dict:
    """``cache_algorithm.cache_average_process`` on given parameters, weights and cache times."""
    import torch

    with contextlib.redirect_stdout(io.StringIO()):
        import cache_algorithm as ca

    def module(values: list[float]):
        m = torch.nn.Linear(len(values), 1, bias=False)
        with torch.no_grad():
            m.weight.copy_(torch.tensor([values], dtype=torch.float32))
        return m

    own = module(req["own"])
    cache = {
        int(k): {"model": module(v["params"]), "time": int(v["time"])}
        for k, v in req["cache"].items()
    }
    with contextlib.redirect_stdout(io.StringIO()):
        got = ca.cache_average_process(
            own, int(req["owner"]), int(req["round"]), cache, np.asarray(req["sizes"], float)
        )
    return {
        "params": got.weight.detach().double().reshape(-1).tolist(),
        "mixing_weight": [ca.get_mixing_weight(int(req["round"]), int(v["time"]))
                          for v in req["cache"].values()],
    }


def main() -> None:
    req = json.loads(Path(sys.argv[1]).read_text())
    _authors(Path(req["folder"]), req.get("seed", 10086))
    os.chdir(req["cwd"])
    task = {"pairs": _pairs, "table2": _table2, "aggregate": _aggregate}[req["task"]]
    result = task(req)
    Path(req["result"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
