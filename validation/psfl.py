"""PSFL (Domini et al., ACSOS 2024) beside its first author's Python code, ``davidedomini/PSFL``.

The reference (pinned in :mod:`validation.refcache`, no licence: read from the cache, never
copied) runs unmodified in its own Python 3.13 environment (:mod:`validation.psfl_env`) through
``validation/psfl_driver.py``; MobiDFL's side runs here on the inputs the reference used: its
7 x 7 ``deformed_lattice`` positions and radius-1.15 neighbourhood, its per-node data (ProFed's
"Hard" split of MobiDFL's images, handed to it by the data-only shim) and its initial model.

Quantities, each with a verdict:

1. neighbourhood: MobiDFL's ``pairs_within`` at radius 1.15 on the reference's positions;
2. ds(i, j) = L_ij + L_ji (eq. 3) for the same models and data: the reference's
   ``loss_based_distances`` against :func:`mobidfl.model.maths.psfl.eq3_loss` +
   :func:`mobidfl.model.maths.psfl.dissimilarity_edges` (float tolerance), and against the policy's
   own path (:meth:`PsflPolicy._loss`, which reads D_i in a seeded order: explained);
3. leaders and federations for the same distances: phyelds' ``elect_leaders`` /
   ``distance_to`` / ``broadcast`` against :func:`mobidfl.model.maths.psfl.elect_leaders` +
   :func:`mobidfl.model.maths.psfl.gradient_field` with the reference's random priorities (the
   paper's reading), and against phyelds' own rule written out here (:func:`phyelds_election` in
   :func:`simulator_order`, :func:`follow_lowest_potential`) to name the difference;
4. federation count against areas and threshold over seeds, and 5. validation accuracy over
   ticks: the reference's ``run_simulation`` against MobiDFL's ``psfl`` policy set to the code's
   learning settings (docs/validation/psfl.md: MobiDFL's reading of record).
"""

from __future__ import annotations

import heapq
import json
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from mobidfl.atomic import write_text_atomic
from mobidfl.errors import ConfigError, DatasetUnavailable
from mobidfl.model.contacts import pairs_within
from mobidfl.model.learning.data import FASHION_SYSTEM_DIR, Dataset, load_dataset
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.maths.psfl import (
    Graph,
    dissimilarity_edges,
    elect_leaders,
    eq3_loss,
    fedavg_within,
    federations,
    gradient_field,
    to_graph,
)
from mobidfl.model.policies import make_policy
from mobidfl.model.policies.base import AgentTable, ExchangeContext
from mobidfl.model.policies.psfl import PsflPolicy
from validation import Row, refcache
from validation.psfl_env import ensure_venv, find_python313

REFERENCE = "psfl"
CASE = "psfl"
DRIVER = Path(__file__).with_name("psfl_driver.py")
CLASSES_OUT = 27  # the reference's MLP: Linear(784, 128), Linear(128, 27) (EMNIST letters)
SIGMAS = (20.0, 40.0, 80.0)

# train / test images handed to the reference; runs (seed, areas, threshold); seeds of the
# fixed-input checks.
SIZES: dict[str, dict] = {
    "ci": {"train": 5000, "test": 1000, "areas": (3,), "thresholds": (40.0,), "seeds": 2},
    "small": {"train": 5000, "test": 1000, "areas": (3,), "thresholds": (40.0,), "seeds": 3},
    "full": {"train": 0, "test": 0, "areas": (3, 5, 9), "thresholds": SIGMAS, "seeds": 3},
}


# --- data -------------------------------------------------------------------------------------
def _images(size: str) -> Dataset:
    """MobiDFL's Fashion-MNIST (Cached-DFL's set; EMNIST-letters is not available offline),
    or ``mnist5k`` where Debian's ``dataset-fashion-mnist`` is not installed; ``train`` /
    ``test`` > 0 keep a stratified, seeded subset."""
    cfg = SIZES[size]
    try:
        if not FASHION_SYSTEM_DIR.is_dir():
            raise DatasetUnavailable("fashion_mnist")
        ds = load_dataset("fashion_mnist", test_size=10_000, seed=0)
    except DatasetUnavailable:
        ds = load_dataset("mnist5k", test_size=1_000, seed=0)
    rng = np.random.default_rng(0x95F1)

    def keep(y: torch.Tensor, n: int) -> np.ndarray:
        if n <= 0 or n >= y.shape[0]:
            return np.arange(y.shape[0])
        labels = y.numpy()
        per = n // 10
        idx = [rng.permutation(np.flatnonzero(labels == c))[:per] for c in np.unique(labels)]
        return np.sort(np.concatenate(idx))

    tr, te = keep(ds.y_train, cfg["train"]), keep(ds.y_test, cfg["test"])
    return Dataset(
        name=ds.name, x_train=ds.x_train[tr].contiguous(), y_train=ds.y_train[tr].clone(),
        x_test=ds.x_test[te].contiguous(), y_test=ds.y_test[te].clone(),
        num_classes=CLASSES_OUT, input_shape=ds.input_shape,
    )


def _export(ds: Dataset, path: Path) -> Path:
    np.savez(
        path, x_train=ds.x_train.numpy(), y_train=ds.y_train.numpy(), x_test=ds.x_test.numpy(),
        y_test=ds.y_test.numpy(), classes=int(ds.y_train.max()) + 1,
    )
    return path


# --- the reference ----------------------------------------------------------------------------
def _reference(spec: dict, out: Path) -> dict:
    ref = refcache.ensure(REFERENCE)
    py = ensure_venv(ref)
    out.mkdir(parents=True, exist_ok=True)
    spec = {"reference": str(ref), **spec}
    (out / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(py), str(DRIVER), str(out / "spec.json"), str(out)],
        check=False, capture_output=True, text=True, env=env, timeout=6 * 3600,
    )
    (out / "driver.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise ConfigError("psfl reference", f"exit {done.returncode}", f"a clean run ({tail})")
    return json.loads((out / "result.json").read_text())


def _engine(ds: Dataset, parts: list[np.ndarray], *, seed: int, local_steps: int = 1):
    return make_engine(
        "loop",
        TrainingSettings(
            net="mlp",
            lr=1e-3,
            batch_size=128,
            local_steps=local_steps,
            weight_decay=1e-4,
            optimizer="adam",
            optimizer_state="reset",
            seed=seed,
            workers=1,
        ),
        dataset=ds,
        parts=parts,
    )


def _tensors(state: dict[str, np.ndarray]) -> tuple[torch.Tensor, ...]:
    """The reference's ``fc1`` / ``fc2`` in MobiDFL's ``mlp`` parameter order."""
    return tuple(
        torch.from_numpy(np.asarray(state[k], dtype=np.float32))
        for k in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    )


def _graph(neighbours: list[list[int]]) -> sp.csr_matrix:
    rows = np.repeat(np.arange(len(neighbours)), [len(n) for n in neighbours])
    cols = np.concatenate([np.asarray(n, np.int64) for n in neighbours])
    n = len(neighbours)
    return sp.csr_matrix((np.ones(rows.size, bool), (rows, cols)), shape=(n, n))


# --- 1-2: neighbourhood and ds ----------------------------------------------------------------
def _fixed_models(ds: Dataset, n: int, seed: int) -> tuple[dict, dict, np.ndarray]:
    """Distinct per-node models and validation sets with area-like label blocks."""
    rng = np.random.default_rng([seed, 0xD5])
    labels = ds.y_train.numpy()
    classes = np.unique(labels)
    blocks = np.array_split(classes, 3)
    models, val = {}, {}
    area = np.arange(n) // math.ceil(n / 3)
    for i in range(n):
        b = 1 / math.sqrt(784)
        w = {
            "fc1.weight": rng.uniform(-b, b, (128, 784)),
            "fc1.bias": rng.uniform(-b, b, 128),
            "fc2.weight": rng.uniform(-1 / math.sqrt(128), 1 / math.sqrt(128), (27, 128)),
            "fc2.bias": rng.uniform(-0.1, 0.1, 27),
        }
        w["fc2.bias"][blocks[area[i]]] += 3.0  # node i's model favours its block's labels
        models.update({f"{k}.{i}": v.astype(np.float32) for k, v in w.items()})
        pool = np.flatnonzero(np.isin(labels, blocks[(area[i] + i % 2) % 3]))
        val[str(i)] = np.sort(rng.choice(pool, size=int(rng.integers(60, 300)), replace=False))
    return models, {k: v.tolist() for k, v in val.items()}, area


def _loss_job(ds: Dataset, work: Path, seed: int, data: Path) -> tuple[dict, dict]:
    models, val, _ = _fixed_models(ds, 49, seed)
    np.savez(work / f"models-{seed}.npz", **models)
    (work / f"val-{seed}.json").write_text(json.dumps(val))
    job = {"job": "ds", "seed": seed, "data": str(data), "models": str(work / f"models-{seed}.npz"),
           "val": str(work / f"val-{seed}.json")}
    return job, {"models": models, "val": val}


def _loss_rows(ds: Dataset, seed: int, inputs: dict, got: dict) -> list[Row]:
    models, val = inputs["models"], inputs["val"]
    n = len(val)
    pos = np.asarray(got["positions"])
    ref_pairs = {(i, j) for i, nb in enumerate(got["neighbours"]) for j in nb if i < j}
    ours = {tuple(map(int, p)) for p in pairs_within(pos, 1.15)}
    rows = [Row(
        CASE, f"neighbour pairs, 7 x 7 deformed lattice, radius 1.15 (seed {seed})",
        f"{len(ref_pairs)} pairs", f"{len(ours)} pairs ({len(ours ^ ref_pairs)} differ)",
        "identical sets", "agree" if ours == ref_pairs else "differs",
    )]
    graph = to_graph(_graph(got["neighbours"]))
    parts = [np.asarray(val[str(i)], np.int64) for i in range(n)]
    engine = _engine(ds, parts, seed=seed)
    keys = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    params = {i: _tensors({k: models[f"{k}.{i}"] for k in keys}) for i in range(n)}
    x, y = ds.x_train, ds.y_train

    def loss(j: int, i: int) -> float:  # L(D_i, nn_j), D_i in the reference's order
        idx = torch.from_numpy(parts[i])
        with torch.no_grad():
            per = F.cross_entropy(engine.logits(params[j], x[idx]), y[idx], reduction="none")
        return eq3_loss(per.double().numpy(), scale="batch_sum", batch=128)

    rc = list(zip(graph.rows.tolist(), graph.indices.tolist(), strict=True))
    ds_ours = dissimilarity_edges(graph, np.array([loss(j, i) for i, j in rc]))
    ds_ref = np.array([got["ds"][str(i)][str(j)] for i, j in rc])
    rel = float(np.max(np.abs(ds_ours - ds_ref) / ds_ref))
    rows.append(Row(
        CASE, f"ds(i, j) = L_ij + L_ji, {len(rc)} directed pairs, same models and data "
        f"(seed {seed})",
        f"{ds_ref.min():.3f} - {ds_ref.max():.3f}", f"max rel. diff {rel:.1e}",
        "max rel. diff <= 1e-5", "agree" if rel <= 1e-5 else "differs",
    ))
    for i in range(n):  # the policy's own path reads D_i in its seeded order
        engine.set_agent(i, params[i])
    policy = make_policy("psfl", settings=_settings(40.0, seed, batches=0.0))
    own = dissimilarity_edges(graph, np.array([policy._loss(engine, j, i) for i, j in rc]))
    rel_own = float(np.max(np.abs(own - ds_ref) / ds_ref))
    partial = sum(len(p) % 128 != 0 for p in parts)
    rows.append(Row(
        CASE, f"ds through the psfl policy's own loss (seed {seed})",
        f"{ds_ref.mean():.3f} (mean)", f"{own.mean():.3f} (mean), max rel. diff {rel_own:.1e}",
        "max rel. diff <= 1e-5, or explained",
        "agree" if rel_own <= 1e-5 else ("explained" if rel_own <= 0.25 else "differs"),
        "" if rel_own <= 1e-5 else (
            "the policy reads D_i in a seeded random order (engine.loss_order), the reference "
            "in its Subset order: with a partial last batch of 128 "
            f"({partial} of {n} nodes) the sum of batch means groups the samples differently"
        ),
    ))
    return rows


# --- 3: leaders and federations for the same distances ----------------------------------------
ROUNDS = 60


def _synthetic(blocks: int, seed: int) -> np.ndarray:
    """Symmetric 49 x 49 distances: cheap inside a block of the 7 x 7 lattice, dear across."""
    rng = np.random.default_rng([seed, 0xE1, blocks])
    cells = np.array([(i // 7, i % 7) for i in range(49)])
    side = int(math.sqrt(blocks))
    block = (cells[:, 0] * side // 7) * side + cells[:, 1] * side // 7
    same = block[:, None] == block[None, :]
    m = np.where(same, rng.uniform(2, 8, (49, 49)), rng.uniform(30, 60, (49, 49)))
    return np.triu(m, 1) + np.triu(m, 1).T


def _elect_job(seed: int, ds_job: int) -> tuple[dict, list[tuple[str, float]]]:
    cases, keys = [], []
    for sigma in SIGMAS:
        cases.append({"from_job": ds_job, "threshold": sigma})
        keys.append(("loss-based distances of the ds check", sigma))
    for blocks in (4, 9):
        m = _synthetic(blocks, seed).tolist()
        for sigma in SIGMAS:
            cases.append({"matrix": m, "threshold": sigma})
            keys.append((f"synthetic, {blocks} blocks", sigma))
    return {"job": "elect", "seed": seed, "rounds": ROUNDS, "cases": cases}, keys


def follow_lowest_potential(graph: Graph, potential: np.ndarray, leaders: np.ndarray,
                            *, rounds: int = 200) -> np.ndarray:
    """Federation of every node under phyelds' ``broadcast``: each non-leader takes the value of
    the neighbour (itself included) with the lowest potential G(j), the first in id order on
    a tie -- not the neighbour on the shortest path (lowest G(j) + ds(i, j)) that
    :func:`mobidfl.model.maths.psfl.gradient_field` follows. Iterated to its fixed point."""
    n = graph.n
    fed = np.where(leaders, np.arange(n), -1)
    choice = np.arange(n)
    for i in range(n):
        cand = np.sort(np.append(graph.indices[graph.indptr[i]:graph.indptr[i + 1]], i))
        choice[i] = cand[int(np.argmin(potential[cand]))]
    for _ in range(rounds):
        nxt = np.where(leaders, np.arange(n), fed[choice])
        if np.array_equal(nxt, fed):
            break
        fed = nxt
    return fed


class _Event:
    """An event of phyelds' simulator heap: ordered by its time only (equal times tie)."""

    __slots__ = ("node", "time")

    def __init__(self, time: float, node: int) -> None:
        self.time, self.node = time, node

    def __lt__(self, other: _Event) -> bool:
        return self.time < other.time


def simulator_order(n: int, ticks: int, *, observer: float = 0.5) -> list[np.ndarray]:
    """Order in which phyelds' ``Simulator`` runs n programs per tick (rule 1 of
    :func:`phyelds_election`): written from reading its event queue, a ``heapq`` of events
    compared by time only, so equal-time events leave in the heap's own order, not by id.

    Node events are pushed at time 0 in id order, then one observer event at ``observer``
    (the validation driver's, once per tick); every event, when run, pushes itself 1.0 later.
    Returns the node ids run in each of the first ``ticks`` ticks.
    """
    queue: list[_Event] = []
    for i in range(n):
        heapq.heappush(queue, _Event(0.0, i))
    heapq.heappush(queue, _Event(observer, -1))
    out: list[np.ndarray] = []
    tick: list[int] = []
    while len(out) < ticks:
        e = heapq.heappop(queue)
        if e.node < 0:
            out.append(np.asarray(tick, np.int64))
            tick = []
        else:
            tick.append(e.node)
        heapq.heappush(queue, _Event(e.time + 1.0, e.node))
    return out


@dataclass(frozen=True)
class PhyeldsElection:
    """Per tick (rows) and node (columns): what the election probe returns after each tick."""

    leader: np.ndarray  # bool: elect_leaders(threshold, distances)
    potential: np.ndarray  # float: distance_to(leader, distances)
    federation: np.ndarray  # int: broadcast(leader, local_id(), distances)


def phyelds_election(graph: Graph, weights: np.ndarray, sigma: float, *, priority: np.ndarray,
                     order: list[np.ndarray] | int) -> PhyeldsElection:
    """The election rule of phyelds' ``elect_leaders`` (as ``psfl_client`` calls it), followed by
    ``distance_to(leader)`` and ``broadcast(leader, id)``: written from reading that library.

    It departs from the paper's reading (PSFL Sec. III-B: "each node proclaims its candidacy",
    a competition on "the accumulated error metric and the node identifier"; ScaFi's ``S``,
    :func:`mobidfl.model.maths.psfl.elect_leaders`) in three named points:

    1. **asynchronous, in the simulator's order**: node ``order[t][k]`` runs k-th in tick t and
       reads each neighbour's latest export (this tick's if it already ran, none before its
       first run), not the previous round's; an int ``order`` = that many ticks in
       :func:`simulator_order` (the heap's order of equal-time events);
    2. **a node is no candidate of its own competition**: node i keeps lead = the smallest
       (priority, id) lead of the neighbours j with G(j) + ds(i, j) < sigma / 2; its own
       (priority, id) only when none qualifies (or a neighbour hands its lead back);
    3. **random priorities** (``random_uuid``: ``random.random()`` drawn once), id only on ties.

    Per node i in turn: source = (lead == own (priority, id)), G(i) = 0 at a source, else the
    minimum of G(j) + ds(i, j) over the neighbours that ran (inf without any); lead = own if
    G(i) > sigma, "none" (inf, i) if G(i) >= sigma / 2, else the competition of point 2; leader
    = lead is its own, finite. Then the probe's potential P(i) (the same gradient from the
    leaders) and its federation: the value of the neighbour (itself included, P(i) just
    computed, its federation of the last tick) with the lowest P, first in id order, or its own
    id at a leader (:func:`follow_lowest_potential` at the fixed point). ``weights`` are aligned
    with ``graph.rows`` / ``graph.indices`` (ds(i, j) as node i holds it). Sequential by nature
    (validation only, 49 nodes).
    """
    if isinstance(order, int):
        order = simulator_order(graph.n, order)
    step = PhyeldsStepper(graph, sigma, priority=priority)
    out_l, out_p, out_f = [], [], []
    for tick in order:
        step.tick(tick, weights)
        out_l.append(step.leader.copy())
        out_p.append(step.pot.copy())
        out_f.append(step.fed.copy())
    return PhyeldsElection(np.array(out_l), np.array(out_p), np.array(out_f))


class PhyeldsStepper:
    """:func:`phyelds_election` one tick at a time, its exports kept between ticks, so the
    distances may change from tick to tick (a whole run: ds is measured anew each tick)."""

    def __init__(self, graph: Graph, sigma: float, *, priority: np.ndarray) -> None:
        n = graph.n
        self.graph, self.sigma = graph, float(sigma)
        self.prio = np.asarray(priority, float)
        self.ran = np.zeros(n, bool)
        self.lead_p, self.lead_id = self.prio.copy(), np.arange(n)
        self.g = np.full(n, np.inf)
        self.pot = np.full(n, np.inf)
        self.fed = np.arange(n)
        self.leader = np.zeros(n, bool)

    def tick(self, order: np.ndarray, weights: np.ndarray) -> None:
        """Run every node of ``order``, one after another, on ``weights`` (ds per edge)."""
        graph, sigma, prio = self.graph, self.sigma, self.prio
        ran, lead_p, lead_id, g = self.ran, self.lead_p, self.lead_id, self.g
        pot, fed, leader = self.pot, self.fed, self.leader
        w = np.asarray(weights, float)
        half = 0.5 * sigma
        for i in (int(v) for v in order):
            lo, hi = graph.indptr[i], graph.indptr[i + 1]
            nb, d = graph.indices[lo:hi], w[lo:hi]
            nb, d = nb[ran[nb]], d[ran[nb]]
            source = lead_id[i] == i and lead_p[i] == prio[i]
            g[i] = 0.0 if source else (float(np.min(g[nb] + d)) if nb.size else np.inf)
            ok = nb[g[nb] + d < half]
            if g[i] > sigma:
                lead = (prio[i], i)
            elif g[i] >= half:
                lead = (np.inf, i)
            elif ok.size:
                lead = min(zip(lead_p[ok].tolist(), lead_id[ok].tolist(), strict=True))
            else:
                lead = (prio[i], i)
            lead_p[i], lead_id[i] = lead
            leader[i] = lead_id[i] == i and np.isfinite(lead_p[i])
            pot[i] = 0.0 if leader[i] else (float(np.min(pot[nb] + d)) if nb.size else np.inf)
            cand = np.sort(np.append(nb, i))
            fed[i] = i if leader[i] else fed[cand[int(np.argmin(pot[cand]))]]
            ran[i] = True


def _same_ticks(emu: PhyeldsElection, hist: list) -> int:
    """Ticks at which the emulation returns exactly the reference probe's (leader, potential,
    federation) on every node."""
    lead = np.array([[r[0] for r in h] for h in hist], bool)
    pot = np.array([[r[1] for r in h] for h in hist], float)
    fed = np.array([[r[2] for r in h] for h in hist], np.int64)
    m = min(len(hist), emu.leader.shape[0])
    same = ((emu.leader[:m] == lead[:m]).all(1) & (emu.federation[:m] == fed[:m]).all(1)
            & ((emu.potential[:m] == pot[:m]) | (np.abs(emu.potential[:m] - pot[:m]) <= 1e-9))
            .all(1))
    return int(same.sum())


def _elect_rows(seed: int, keys: list[tuple[str, float]], got: dict) -> list[Row]:
    graph = to_graph(_graph(got["neighbours"]))
    rows = []
    for (name, sigma), case in zip(keys, got["cases"], strict=True):
        w = np.array([case["ds"][str(i)][str(j)] for i, j in zip(
            graph.rows.tolist(), graph.indices.tolist(), strict=True)])
        hist = case["history"]
        last = hist[-1]
        settled = all(h == last for h in hist[-10:])
        ref_lead = np.array([r[0] for r in last], bool)
        ref_pot = np.array([r[1] for r in last], float)
        ref_fed = np.array([r[2] for r in last])
        uuid = np.asarray(case["uuid"], float)
        el = elect_leaders(graph, w, sigma, priority=uuid)
        ours = gradient_field(graph, w, el.is_leader)
        # Same leaders (the reference's): MobiDFL's field, and phyelds' broadcast rule.
        field = gradient_field(graph, w, ref_lead)
        pot_diff = float(np.max(np.abs(field.G - ref_pot)))
        shortest = int((field.leader_of != ref_fed).sum())
        lowest = follow_lowest_potential(graph, field.G, ref_lead)
        rule = int((lowest != ref_fed).sum())
        covered = bool((ours.G <= sigma).all() and (ref_pot <= sigma).all())
        # The same distances under phyelds' own rule, in its simulator's heap order (and is
        # that the order the simulator ran the nodes in?).
        emu = phyelds_election(graph, w, sigma, priority=uuid, order=len(hist))
        heap = simulator_order(graph.n, len(hist))
        order_same = len(heap) == len(case["order"]) and all(
            np.array_equal(a, b) for a, b in zip(heap, case["order"], strict=False))
        ticks = _same_ticks(emu, hist)
        policy_same = np.array_equal(ref_lead, el.is_leader)
        rule_same = np.array_equal(ref_lead, emu.leader[-1])
        rows.append(Row(
            CASE, f"leaders, {name}, sigma {sigma:g} (seed {seed})",
            f"{int(ref_lead.sum())} leaders" + ("" if settled else " (not settled)"),
            f"psfl policy: {int(el.is_leader.sum())} leaders "
            f"({int((ref_lead != el.is_leader).sum())} flags differ); phyelds rule: "
            f"{int(emu.leader[-1].sum())} leaders ({int((ref_lead != emu.leader[-1]).sum())} "
            f"flags differ), {ticks}/{len(hist)} ticks identical; run order = heap order: "
            f"{order_same}",
            "identical leader set (psfl policy; else under the named rule)",
            "agree" if policy_same else ("explained" if rule_same and order_same else "differs"),
            "" if policy_same else (
                "phyelds' elect_leaders (validation.psfl.phyelds_election) departs from the "
                "paper's 'each node proclaims its candidacy' and its competition on 'the "
                "accumulated error metric and the node identifier' (Sec. III-B), which the "
                "psfl policy follows with ScaFi's S: a node is no candidate of its own "
                "competition (own lead only when no neighbour qualifies), priorities are "
                "random, and nodes run one after another in the simulator's heap order, "
                "reading this tick's exports; "
                + ("under that rule the leaders are identical" if rule_same else
                   "under that rule still "
                   f"{int((ref_lead != emu.leader[-1]).sum())} flags apart")
                + f"; both sides leave every node within sigma of a leader: {covered}"
            ),
        ))
        rows.append(Row(
            CASE, f"federations for the reference's leaders, {name}, sigma {sigma:g} "
            f"(seed {seed})",
            f"{len(set(ref_fed.tolist()))} federations; potential = G",
            f"G max diff {pot_diff:.1e}; shortest path: {shortest} members differ; "
            f"lowest-G neighbour: {rule}",
            "G <= 1e-9; memberships identical (under the named rule)",
            "agree" if pot_diff <= 1e-9 and shortest == 0 else (
                "explained" if pot_diff <= 1e-9 and rule == 0 else "differs"),
            "" if shortest == 0 else (
                "phyelds' broadcast takes the value of the neighbour with the lowest potential "
                "G(j), MobiDFL's gradient_field follows the shortest path (lowest G(j) + "
                "ds(i, j)); with the lowest-G rule the memberships are "
                + ("identical" if rule == 0 else f"still {rule} apart")
            ),
        ))
    return rows


# --- 4-5: whole runs --------------------------------------------------------------------------
IMPULSE_EVERY = 5
"""The later code's update period (``PSFLClient.py``: ``impulsesEvery = 5``, at tick 0, 5, ...)."""
IMPULSE_OWN = 0.1
"""Its weight on the node's own model (``average_weights([evolved, area], [0.1, 0.9])``)."""

READINGS: dict[str, str] = {
    "alg1": "the reading of record: every member takes its federation's FedAvg model (weights "
            "|D_k|) each round (Alg. 1 lines 6-9)",
    "impulse": "the later code's update: a member keeps its trained model; at ticks 0, 5, 10, "
               "... it becomes 0.1 x its own + 0.9 x the federation's FedAvg model",
    "equal": "FedAvg with equal weights (the later code's average_weights over the collected "
             "models)",
    "val_ds": "eq. 3 on the node's validation split in its own order, the sum of batch-128 "
              "means (the later code's loss_based_distances)",
    "phyelds": "leaders by phyelds' rule (PhyeldsStepper, the simulator's heap order, one "
               "random priority per node), federations by its broadcast (lowest potential)",
    "random_priority": "the policy's election (ScaFi's S) with one random priority per node, "
                       "as ScaFi and phyelds draw it, instead of the lowest id winning",
    "broadcast": "the policy's leaders; federations by phyelds' broadcast (each node follows "
                 "the neighbour of lowest potential G, not the shortest path)",
    "start_merged": "the reading of record, but in ticks 0-2 every node takes the FedAvg of "
                    "all nodes (one federation, as the reference has from tick 3)",
}
"""MobiDFL's side of a whole run: the reading of record and one controlled change each."""


def _settings(sigma: float, seed: int, *, batches: float) -> SimpleNamespace:
    return SimpleNamespace(
        psfl_sigma=sigma, seed=seed, psfl_loss="batch_sum", psfl_loss_batch=128,
        psfl_loss_batches=batches, psfl_walker=False, eval_every=10**9, steps=None,
    )


class _ValidationSplitLoss(PsflPolicy):
    """The ``psfl`` policy with L(D_i, nn_j) of eq. 3 read on node i's validation split, in
    the reference's subset order, as the sum of batch-128 means (``PSFLClient.
    loss_based_distances`` -> ``model_evaluation(m, validation_data, 128)[1]``)."""

    def __init__(self, *, settings: SimpleNamespace, val: list[np.ndarray], ds: Dataset) -> None:
        super().__init__(settings=settings)
        self._val = [torch.from_numpy(v) for v in val]
        self._x, self._y = ds.x_train, ds.y_train

    def _loss(self, engine, model: int, on_agent: int) -> float:
        idx = self._val[on_agent]
        params = [p[int(model)] for p in engine.params]
        with torch.no_grad():
            per = F.cross_entropy(engine.logits(params, self._x[idx]), self._y[idx],
                                  reduction="none")
        return eq3_loss(per.double().numpy(), scale="batch_sum", batch=128)


def _accuracy(engine, params, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float((engine.logits(params, x).argmax(1) == y).double().mean())


def _fedavg(engine, groups: list[np.ndarray], *, weights: str) -> dict:
    """Every member of a federation of two or more gets its average (``weights``: ``size`` =
    |D_k|, ``equal``)."""
    assign = {}
    for ids in groups:
        if ids.size < 2:
            continue
        w = fedavg_within(np.arange(ids.size), engine.data_sizes[ids]) if weights == "size" \
            else None
        average = engine.average(agents=ids, weights=w)
        assign.update({int(i): average for i in ids})
    return assign


def apply_update(engine, assign: dict, *, tick: int, rule: str) -> None:
    """Give the members their federation's model (``assign``) under ``rule``: ``replace``
    (Alg. 1 lines 6-9, every tick) or ``impulse`` (the later code: at ticks 0, 5, 10, ...
    0.1 x own + 0.9 x the federation's model, otherwise the own model is kept)."""
    if rule == "replace":
        for i, p in assign.items():
            engine.set_agent(i, p)
    elif rule == "impulse":
        if tick % IMPULSE_EVERY == 0:
            for i, p in assign.items():
                engine.set_agent(i, engine.combine([engine.snapshot(i), p],
                                                   [IMPULSE_OWN, 1.0 - IMPULSE_OWN]))
    else:
        raise ConfigError("rule", rule, "replace or impulse")


def _mobidfl_run(ds: Dataset, run: dict, *, reading: str = "alg1") -> dict:
    """MobiDFL's ``psfl`` policy on the reference run's lattice, data and initial model, under
    ``reading`` (:data:`READINGS`: the reading of record or one controlled change)."""
    if reading not in READINGS:
        raise ConfigError("reading", reading, "one of " + ", ".join(READINGS))
    t0, c0 = time.perf_counter(), time.process_time()
    n = len(run["nodes"])
    nodes = [run["nodes"][str(i)] for i in range(n)]
    train = [np.asarray(d["train"], np.int64) for d in nodes]
    val = [np.asarray(d["val"], np.int64) for d in nodes]
    test = [np.asarray(d["test"], np.int64) for d in nodes]
    steps = 2 * int(np.median([math.ceil(t.size / 128) for t in train]))
    engine = _engine(ds, train, seed=int(run["seed"]), local_steps=steps)
    init = _tensors(dict(np.load(run["init"])))
    for i in range(n):
        engine.set_agent(i, init)
    batches = float(np.mean([math.ceil(v.size / 128) for v in val]))
    sigma, seed = float(run["threshold"]), int(run["seed"])
    if reading == "val_ds":
        policy = _ValidationSplitLoss(settings=_settings(sigma, seed, batches=0.0), val=val, ds=ds)
    else:
        policy = make_policy("psfl", settings=_settings(sigma, seed, batches=batches))
    adjacency = _graph([d["neighbours"] for d in nodes])
    area = np.asarray(run["area"], np.int64)  # the reference's areas (distribute_nodes_spatially)
    n_areas = int(run["areas"])
    table = AgentTable(
        kind=np.array(["sensor"] * n), speed=np.zeros(n), data_size=engine.data_sizes,
        area=area, label_hist=engine.label_hist, hm=np.zeros(n, bool),
        pos=np.asarray([d["position"] for d in nodes]),
    )
    if reading == "random_priority":
        policy.priority = np.random.default_rng([seed, 0x9E]).random(n)
    rng = np.random.default_rng(seed)
    ticks = len(run["federations_csv"])
    if reading == "phyelds":
        stepper = PhyeldsStepper(to_graph(adjacency), sigma,
                                 priority=np.random.default_rng([seed, 0x9E]).random(n))
        order = simulator_order(n, ticks)
    leaders, acc, ds_in, ds_out = [], [], [], []
    for t in range(ticks):
        engine.train()
        acc.append([_accuracy(engine, engine.snapshot(i), ds.x_train[val[i]], ds.y_train[val[i]])
                    for i in range(n)])
        if t == ticks - 1:
            test_acc = [_accuracy(engine, engine.snapshot(i), ds.x_test[test[i]],
                                  ds.y_test[test[i]]) for i in range(n)]
        ctx = ExchangeContext(step=t + 1, members=np.arange(n), adjacency=adjacency,
                              engine=engine, agents=table, rng=rng)
        out = policy.exchange(ctx)
        assign = out.assign
        count = int(policy.state.is_leader.sum())
        if reading == "equal":
            assign = _fedavg(engine, federations(policy.last_field.leader_of), weights="equal")
        elif reading == "phyelds":
            stepper.tick(order[t], policy.last_ds)
            assign = _fedavg(engine, [np.flatnonzero(stepper.fed == f)
                                      for f in np.unique(stepper.fed)], weights="size")
            count = int(stepper.leader.sum())
        elif reading == "broadcast":
            field = policy.last_field
            fed = follow_lowest_potential(policy.last_graph, field.G, policy.state.is_leader)
            assign = _fedavg(engine, [np.flatnonzero(fed == f) for f in np.unique(fed[fed >= 0])],
                             weights="size")
        elif reading == "start_merged" and t < 3:
            assign = _fedavg(engine, [np.arange(n)], weights="size")
        apply_update(engine, assign, tick=t, rule="impulse" if reading == "impulse" else "replace")
        leaders.append(count)
        ds_in.append(out.metrics["ds_intra_mean"])
        ds_out.append(out.metrics["ds_inter_mean"])
    acc_a = np.asarray(acc)
    return {
        "reading": reading, "leaders": leaders, "val_acc": np.nanmean(acc_a, 1).tolist(),
        "val_acc_area": [[float(np.nanmean(row[area == a])) for a in range(n_areas)]
                         for row in acc_a],
        "test_acc": test_acc, "test_acc_mean": float(np.mean(test_acc)),
        "ds_intra": ds_in, "ds_inter": ds_out, "local_steps": steps, "loss_batches": batches,
        "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
    }


def _spread(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, float)
    return float(a.mean()), float(a.std(ddof=1)) if a.size > 1 else 0.0


def run_tag(seed: int, areas: int, threshold: float) -> str:
    """The reference's own name of a run (``simulation.py``'s CSV names)."""
    return f"seed-{seed}_regions-{areas}_threshold-{float(threshold)}"


def _json_once(path: Path, make) -> dict:
    """``path``'s JSON, or ``make()`` written there first: a long sweep resumes per run."""
    if path.is_file():
        return json.loads(path.read_text())
    got = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(got))
    return got


def _reference_run(data: Path, seed: int, areas: int, threshold: float, folder: Path) -> dict:
    """One whole reference run, read back when an earlier call finished it (the driver writes
    ``run-<tag>.json`` per run), with the wall and CPU time of the call that ran it."""
    done = folder / f"run-{run_tag(seed, areas, threshold)}.json"
    if not done.is_file():
        t0 = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        _reference({"jobs": [{"job": "run", "data": str(data),
                              "runs": [[seed, areas, threshold]]}]}, folder)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        got = json.loads(done.read_text())
        got["wall_s"] = time.perf_counter() - t0
        got["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        write_text_atomic(done, json.dumps(got))
    return json.loads(done.read_text())


def whole_runs(ds: Dataset, data: Path, out: Path, *, seeds: int,
               cells: list[tuple[int, float]], readings: tuple[str, ...] = ("alg1",)
               ) -> list[dict]:
    """The reference and MobiDFL (each of ``readings``) on every (seed, areas, sigma), seed
    by seed (seed 0 of every cell first), each run kept under ``out`` as it ends and read back
    on the next call: a sweep stopped at any point resumes from the last finished run."""
    got = []
    for s in range(seeds):
        for a, th in cells:
            ref = _reference_run(data, s, a, th, out / "reference-runs")
            tag = run_tag(s, a, th)
            ours = {r: _json_once(out / "mobidfl-runs" / f"{r}-{tag}.json",
                                  lambda r=r, ref=ref: _mobidfl_run(ds, ref, reading=r))
                    for r in readings}
            got.append({"seed": s, "areas": a, "threshold": th, "reference": ref, **ours})
    return got


def _run_rows(runs: list[dict], cells: list[tuple[int, float]]) -> tuple[list[Row], dict]:
    rows, raw = [], []
    for a, th in cells:
        these = [r for r in runs if r["areas"] == a and r["threshold"] == th]
        refs, ours = [r["reference"] for r in these], [r["alg1"] for r in these]
        tail = max(1, len(refs[0]["federations_csv"]) // 4)
        ref_f = [float(np.mean(r["federations_csv"][-tail:])) for r in refs]
        our_f = [float(np.mean(o["leaders"][-tail:])) for o in ours]
        (rm, rs), (om, osd) = _spread(ref_f), _spread(our_f)
        tol = max(1.0, 2 * math.hypot(rs, osd))
        rows.append(Row(
            CASE, f"federations (leaders), last {tail} ticks, {a} areas, sigma {th:g}",
            f"{rm:.2f} ± {rs:.2f}", f"{om:.2f} ± {osd:.2f}",
            "within max(1, 2 x seed spread)",
            "agree" if abs(rm - om) <= tol else "differs",
            f"{len(these)} seeds",
        ))
        ref_acc = np.array([[np.nanmean(t["val_acc"]) for t in r["ticks"]] for r in refs])
        our_acc = np.array([o["val_acc"] for o in ours])
        m = min(ref_acc.shape[1], our_acc.shape[1])
        gap = np.abs(ref_acc[:, :m].mean(0) - our_acc[:, :m].mean(0))
        sd = (lambda v: v.std(0, ddof=1)) if len(these) > 1 else (lambda v: np.zeros(v.shape[1]))
        band = 2 * np.hypot(sd(ref_acc[:, :m]), sd(our_acc[:, :m]))
        inside = float(np.mean(gap <= np.maximum(band, 0.02)))
        (ra, rsd) = _spread(ref_acc[:, m - tail:m].mean(1).tolist())
        (oa, osd2) = _spread(our_acc[:, m - tail:m].mean(1).tolist())
        rows.append(Row(
            CASE, f"validation accuracy over {m} ticks, {a} areas, sigma {th:g}",
            f"last {tail}: {ra:.3f} ± {rsd:.3f}", f"last {tail}: {oa:.3f} ± {osd2:.3f}",
            ">= 90 % of ticks within 2 x seed spread (or 0.02)",
            "agree" if inside >= 0.9 else "differs",
            f"{inside:.0%} of ticks inside; {len(these)} seeds",
        ))
        raw.append({"areas": a, "threshold": th,
                    "reference": [{k: r[k] for k in ("seed", "federations_csv",
                                                      "test_acc_mean", "val_acc_mean_csv")}
                                  for r in refs],
                    "mobidfl": ours})
    return rows, {"runs": raw}


def run(*, size: str, seeds: int, out: Path, parts: tuple[str, ...] = ("fixed", "runs")
        ) -> list[Row]:
    """Every PSFL quantity at ``size`` (``ci``, ``small``, ``full``), one row each.

    ``seeds`` (>= 2; at least 3 for ``small`` and ``full``) seeds run every check; ``parts``
    picks the fixed-input checks (neighbourhood, ds, elections) and / or the whole runs. The
    whole runs resume: each finished run (either side) is kept under ``out`` and read back.
    """
    if size not in SIZES:
        raise ConfigError("--size", size, "one of " + ", ".join(SIZES))
    if find_python313() is None:
        return [Row(CASE, "all quantities", "-", "-", "-", "skipped",
                    "no Python 3.13 here (the reference needs ^3.13): install one under pyenv "
                    "or set MOBIDFL_PYTHON313")]
    n_seeds = max(seeds, SIZES[size]["seeds"])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    ds = _images(size)
    data = _export(ds, out / "data.npz")
    jobs, plan = [], []
    if "fixed" in parts:
        for s in range(n_seeds):
            job, inputs = _loss_job(ds, out, s, data)
            jobs.append(job)
            plan.append(("ds", s, inputs))
            job, keys = _elect_job(s, len(jobs) - 1)
            jobs.append(job)
            plan.append(("elect", s, keys))
    got = _reference({"jobs": jobs}, out / "reference")["results"] if jobs else []
    rows: list[Row] = []
    raw: dict = {}
    for (kind, s, extra), res in zip(plan, got, strict=True):
        if kind == "ds":
            rows += _loss_rows(ds, s, extra, res)
        else:
            rows += _elect_rows(s, extra, res)
    if "runs" in parts:
        cfg = SIZES[size]
        cells = [(a, th) for a in cfg["areas"] for th in cfg["thresholds"]]
        runs = whole_runs(ds, data, out, seeds=n_seeds, cells=cells)
        got_rows, raw = _run_rows(runs, cells)
        rows += got_rows
    write_text_atomic(out / "psfl.json", json.dumps(
        {"dataset": ds.name, "size": size, "rows": [r.__dict__ for r in rows], **raw}, indent=1))
    print(f"psfl: data set {ds.name} ({ds.n_train} train / {int(ds.y_test.shape[0])} test "
          "images)", file=sys.stderr)
    return rows
