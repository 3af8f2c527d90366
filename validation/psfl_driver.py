"""Runs ``davidedomini/PSFL`` (pinned, unmodified) inside its own Python 3.13 environment.

Invoked by :mod:`validation.psfl` as ``<ref venv python> psfl_driver.py SPEC.json OUT_DIR`` (one
call runs a list of jobs: one import of torch); it
imports only the reference's code, ``phyelds`` and ``ProFed`` (never MobiDFL, which needs another
interpreter). Data arrive as ``.npz`` files written by MobiDFL; results leave as ``.npz`` and
JSON. Three jobs (``"job"`` of each entry of ``SPEC["jobs"]``):

``ds``     the reference's ``PSFLClient.loss_based_distances`` on fixed per-node models and
           validation data, on its own 7 x 7 ``deformed_lattice`` with ``radius_neighborhood
           (1.15)``, run for three rounds (``neighbors`` reads the previous round's exports);
``elect``  phyelds' ``elect_leaders(threshold, distances)``, ``distance_to(leader, distances)``
           and ``broadcast(leader, local_id(), distances)`` (the calls ``psfl_client`` makes,
           broadcasting the leader's id instead of its model) on a fixed distance field; the
           probe also notes the order in which the simulator ran the nodes in each tick;
``run``    the reference's ``simulation.run_simulation(threshold, areas, seed)`` end to end;
           each finished run is written to ``run-seed-S_regions-A_threshold-T.json`` in OUT
           and read back instead of run again (a long sweep resumes where it stopped).

The only change to what the reference's code sees: ``ProFed.partitioner.download_dataset``
returns MobiDFL's images (the data-only shim). ``simulation.py`` is loaded without its
module-level sweep (20 seeds x areas x 3 thresholds from an environment variable): its import
lines and function definitions are executed as written, and ``run_simulation`` is called per
(seed, areas, threshold) after ``random.seed(seed)`` as the sweep does, plus
``torch.manual_seed(seed)`` (the reference never seeds torch). Two observers only read: a
wrapper records the keyword arguments ``run_simulation`` passes to phyelds'
``aggregate_program_runner`` (each node's data subsets and the initial model) before calling
it unchanged, an event after every tick reads each node's outputs, and after the run each
node's area (``utils.distribute_nodes_spatially``, the call ``run_simulation`` makes) and
its final model's accuracy on its test subset (``learning.model_evaluation``, batch 64, the
call ``TestSetEvalMonitor`` makes before averaging) are read.
"""

from __future__ import annotations

import ast
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

SPECS = json.loads(Path(sys.argv[1]).read_text())
OUT = Path(sys.argv[2])
SRC = Path(SPECS["reference"]) / "src"
SPEC: dict = {}
DONE: list[dict] = []
ORDER: list[int] = []  # node ids in the order the simulator ran the election probe
sys.path.insert(0, str(SRC))

from phyelds.calculus import aggregate  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.data import Field  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.libraries.device import local_id  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.libraries.leader_election import elect_leaders  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.libraries.spreading import broadcast, distance_to  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.simulator import Simulator  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.simulator.deployments import deformed_lattice  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.simulator.neighborhood import radius_neighborhood  # noqa: E402 - after the reference checkout is put on sys.path
from phyelds.simulator.runner import aggregate_program_runner  # noqa: E402 - after the reference checkout is put on sys.path
from ProFed import partitioner  # noqa: E402 - after the reference checkout is put on sys.path

LATTICE = (7, 7, 1, 0.01)  # simulation.py: deformed_lattice(simulator, 7, 7, 1, 0.01)
RADIUS = 1.15  # simulation.py: radius_neighborhood(1.15)


class Images(Dataset):
    """MobiDFL's images in the shape torchvision's datasets give ProFed: ``classes``,
    ``targets`` and ``(image, label)`` items."""

    def __init__(self, x: np.ndarray, y: np.ndarray, classes: int) -> None:
        self.x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        self.targets = torch.from_numpy(np.asarray(y, dtype=np.int64))
        self.classes = [str(c) for c in range(classes)]

    def __len__(self) -> int:
        return int(self.targets.shape[0])

    def __getitem__(self, i):
        return self.x[i], int(self.targets[i])


def load_images() -> tuple[Images, Images]:
    d = np.load(SPEC["data"])
    classes = int(d["classes"])
    return Images(d["x_train"], d["y_train"], classes), Images(d["x_test"], d["y_test"], classes)


def shim_download_dataset(dataset_name, transform=None, download_path="dataset"):
    """Data-only shim: MobiDFL's images instead of a torchvision download."""
    return load_images()


def load_simulation() -> dict:
    """``simulation.py``'s imports and definitions, executed as written, without its sweep."""
    path = SRC / "simulation.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    keep = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.FunctionDef)]
    ns: dict = {"__name__": "simulation", "__file__": str(path)}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), ns)
    return ns


def lattice(seed: int) -> tuple[Simulator, np.ndarray, list[list[int]]]:
    random.seed(seed)
    sim = Simulator()
    sim.environment.set_neighborhood_function(radius_neighborhood(RADIUS))
    deformed_lattice(sim, *LATTICE)
    nodes = sorted(sim.environment.nodes.values(), key=lambda n: n.id)
    pos = np.array([n.position for n in nodes], dtype=float)
    nbrs = [sorted(m.id for m in sim.environment.get_neighbors(n)) for n in nodes]
    return sim, pos, nbrs


def uuid_of(node) -> float:
    """The random priority ``elect_leaders`` drew for this node (``random_uuid``'s state)."""
    for path, value in node.data["state"].items():
        if "random_uuid" in str(path):
            v = getattr(value, "__wrapped__", value)
            return float(v[0] if isinstance(v, tuple) else v)
    return float("nan")


# --- job: ds ----------------------------------------------------------------------------------
def job_ds() -> dict:
    import PSFLClient  # the reference's module, unmodified

    train, _ = load_images()
    m = np.load(SPEC["models"])
    sim, pos, nbrs = lattice(int(SPEC["seed"]))
    keys = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    val = json.loads(Path(SPEC["val"]).read_text())
    for node in sim.environment.nodes.values():
        i = node.id
        weights = {k: torch.from_numpy(m[f"{k}.{i}"]) for k in keys}
        data = torch.utils.data.Subset(train, val[str(i)])
        sim.schedule_event(
            0.0, aggregate_program_runner, sim, 1.0, node, PSFLClient.loss_based_distances,
            model_weights=weights, validation_data=data,
        )
    sim.run(2.5)  # rounds at t = 0, 1, 2
    ds = {
        str(n.id): {str(k): float(v) for k, v in n.data["result"].data.items()}
        for n in sim.environment.nodes.values()
    }
    return {"positions": pos.tolist(), "neighbours": nbrs, "ds": ds}


# --- job: elect -------------------------------------------------------------------------------
@aggregate
def election_probe(ds_row: dict, threshold: float):
    ORDER.append(int(local_id()))
    distances = Field({int(k): float(v) for k, v in ds_row.items()}, local_id())
    leader = elect_leaders(threshold, distances)
    potential = distance_to(leader, distances)
    federation = broadcast(leader, local_id(), distances)
    return bool(leader), float(potential), int(federation)


def job_elect() -> dict:
    out = []
    for case in SPEC["cases"]:
        sim, pos, nbrs = lattice(int(SPEC["seed"]))
        if "from_job" in case:  # the distances a previous ds job measured
            table = DONE[int(case["from_job"])]["ds"]
        else:  # a full matrix: take the neighbours' entries
            m = case["matrix"]
            table = {str(i): {str(j): m[i][j] for j in nb} for i, nb in enumerate(nbrs)}
        for node in sim.environment.nodes.values():
            sim.schedule_event(
                0.0, aggregate_program_runner, sim, 1.0, node, election_probe,
                ds_row=table[str(node.id)], threshold=float(case["threshold"]),
            )
        history: list[list] = []
        order: list[list[int]] = []
        ORDER.clear()

        def observe(simulator) -> None:
            nodes = sorted(simulator.environment.nodes.values(), key=lambda n: n.id)
            history.append([list(n.data["result"]) for n in nodes])  # noqa: B023 - called within this iteration only
            order.append(list(ORDER))  # noqa: B023 - called within this iteration only
            ORDER.clear()
            simulator.schedule_event(1.0, observe, simulator)

        sim.schedule_event(0.5, observe, sim)
        sim.run(int(SPEC["rounds"]) - 0.25)
        nodes = sorted(sim.environment.nodes.values(), key=lambda n: n.id)
        out.append({"history": history, "order": order, "uuid": [uuid_of(n) for n in nodes],
                    "ds": table})
    return {"positions": pos.tolist(), "neighbours": nbrs, "cases": out}


# --- job: run ---------------------------------------------------------------------------------
def job_run() -> dict:
    partitioner.download_dataset = shim_download_dataset
    ns = load_simulation()
    results = []
    from learning import model_evaluation  # the reference's, unmodified

    for seed, areas, threshold in SPEC["runs"]:
        tag = f"seed-{seed}_regions-{areas}_threshold-{float(threshold)}"
        done = OUT / f"run-{tag}.json"
        if done.is_file():  # finished by an earlier call: read, not run again
            results.append(json.loads(done.read_text()))
            continue
        captured: dict[int, dict] = {}
        sims: list = []
        ticks: list[dict] = []

        def observe(simulator) -> None:
            nodes = sorted(simulator.environment.nodes.values(), key=lambda n: n.id)
            outs = [n.data.get("outputs", {}) for n in nodes]
            ticks.append({  # noqa: B023 - one simulator per run, finished before the next
                "leader": [bool(o.get("is_aggregator", False)) for o in outs],
                "val_acc": [float(o.get("ValidationAccuracy", float("nan"))) for o in outs],
            })
            simulator.schedule_event(1.0, observe, simulator)

        def runner(simulator, time_delta, node, program, **kwargs):
            if not captured:  # noqa: B023 - one simulator per run
                simulator.schedule_event(0.97, observe, simulator)
                sims.append(simulator)  # noqa: B023 - called within this iteration only
            train, val, test = kwargs["data"]
            captured[node.id] = {  # noqa: B023 - called within this iteration only
                "train": [int(i) for i in train.indices],
                "val": [int(i) for i in val.indices],
                "test": [int(i) for i in test.indices],
                "position": list(node.position),
                "neighbours": sorted(m.id for m in simulator.environment.get_neighbors(node)),
            }
            if "init" not in captured.setdefault(-1, {}):  # noqa: B023 - called within this iteration only
                captured[-1]["init"] = {  # noqa: B023 - called within this iteration only
                    k: v.detach().numpy().copy() for k, v in kwargs["initial_model_params"].items()
                }
            return aggregate_program_runner(simulator, time_delta, node, program, **kwargs)

        ns["aggregate_program_runner"] = runner
        work = Path(tempfile.mkdtemp(prefix="psfl-run-", dir=OUT))
        here = Path.cwd()
        os.chdir(work)
        try:
            random.seed(seed)
            torch.manual_seed(seed)
            ns["run_simulation"](float(threshold), int(areas), int(seed))
        finally:
            os.chdir(here)
        import pandas as pd

        fed = pd.read_csv(work / "data" / f"federations_{tag}.csv")["FederationsCount"]
        exp = pd.read_csv(work / "data" / f"experiment_{tag}.csv")
        test = pd.read_csv(work / "data" / f"test_{tag}.csv")["Accuracy"]
        init = captured.pop(-1)["init"]
        np.savez(work / "init.npz", **init)
        area = {i: a for a, ids in ns["distribute_nodes_spatially"](len(captured), int(areas))
                .items() for i in ids}
        final = sorted(sims[0].environment.nodes.values(), key=lambda n: n.id)
        test_acc = [float(model_evaluation(n.data["outputs"]["final_model"],
                                           n.data["outputs"]["test_data"], 64)[0]) for n in final]
        results.append({
            "seed": seed, "areas": areas, "threshold": threshold,
            "nodes": {str(k): v for k, v in sorted(captured.items())},
            "init": str(work / "init.npz"),
            "federations_csv": [float(v) for v in fed],
            "val_acc_mean_csv": [float(v) for v in exp.get("ValidationAccuracy_mean", [])],
            "test_acc_mean": float(test.iloc[0]),
            "test_acc": test_acc,
            "area": [int(area[i]) for i in range(len(final))],
            "ticks": ticks,
        })
        part = done.with_suffix(".part")  # whole or absent: a killed run leaves no half file
        part.write_text(json.dumps(results[-1]))
        part.replace(done)
    return {"runs": results}


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for spec in SPECS["jobs"]:
        SPEC.clear()
        SPEC.update(spec)
        DONE.append({"ds": job_ds, "elect": job_elect, "run": job_run}[spec["job"]]())
    (OUT / "result.json").write_text(json.dumps({"results": DONE}))
