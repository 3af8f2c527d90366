"""de Heredia (TU Delft 2024) beside MobiDFL: the thesis' own decentralizepy code, unmodified.

The reference is de Heredia's fork of decentralizepy (``asturnox/decentralizepy``), pinned in
:mod:`validation.refcache`: ``generate_graph.py`` (run as a script) draws the initial graph,
``MobilityGraph.next_graph(i)`` advances it one iteration (chained, as the fork's
``simulate_graph`` does: ``graphs[-1].next_graph(i)`` for i = 0, 1, ...),
``MobilityGraph.neighbors(uid)`` gives M_i(t_k) (any of 100 time-aligned sample points
within the radius), and ``MobilityAwareSharing.averaging_weights`` gives the weights of
Sec. 5.4. MobiDFL side: the ``mobility_000`` preset (``random_walk``, ``contact = during``),
:func:`mobidfl.model.contacts.contact_matrix` and
:func:`mobidfl.model.maths.mixing.mobility_aware_weights`.

Two kinds of comparison:

* **same positions**: the authors' sample points, speeds and neighbour sets are fed to
  MobiDFL's step rule (eq. 2), neighbour test and weight function; the weights must agree
  to 1e-12;
* **same settings**: both simulators run with their own random numbers (N clients, p = 0.2,
  500 x 500 box, R = 45, s_max = 50, beta = 1.75); neighbours per step, distinct and
  cumulative neighbours over a window (the thesis' App. B, Figs. 7-8) and the HM / LM
  speed distributions are compared over seeds.

Shim (the only one): ``MobilityAwareSharing.py`` subclasses ``decentralizepy.sharing.Sharing``,
which needs the rest of decentralizepy (communication, mappings, datasets) to import. An empty
stand-in class is put in ``sys.modules`` under that name before the import, and
``averaging_weights`` (whose body reads only ``self.alpha``) is called on an instance made
with ``object.__new__``; no line of the authors' code is changed.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy import stats

from mobidfl.agents.mobility.random_walk import DIRECTIONS, reflect
from mobidfl.atomic import write_text_atomic
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config
from mobidfl.model.contacts import contact_matrix, pairs_within, symmetric_adjacency
from mobidfl.model.maths.mixing import member_pairs, mobility_aware_weights
from mobidfl.model.world import MobiDFLModel
from validation import Row
from validation.refcache import ensure

REFERENCE = "heredia"
CASE = "heredia"

BOX = 500.0
"""Side of the authors' square world (``MobilityGraph.width/height``; generate_graph ``size``)."""
RADIUS = 45.0
"""``coverage_area_radius`` hard-coded in generate_graph.py."""
S_MAX = 50.0
"""LM speeds U(0, size * velocity_step) = U(0, 50) per iteration (generate_graph.py)."""
BETA = 1.75
"""HM speeds U(50, 100) x 1.75 (generate_graph.py ``velocity_mul``)."""
HM_PROPORTION = 0.2
"""generate_graph.py's default ``--highMobilityProportion`` (Tables 1-2 grid value p = 20 %)."""
ALPHAS = (0.0, 0.1, 0.2, 0.3, 0.4, 1.0)
"""The thesis' alpha values (Tables 3, 4, 7, 8) and 0 (plain averaging, Sec. 5.3)."""
CODE_ALPHA = 2.0
"""``MobilityAwareSharing``'s default alpha (outside MobiDFL's [0, 1]; see :func:`run`)."""
WEIGHT_TOL = 1e-12

SIZES: dict[str, dict[str, int]] = {
    "ci": {"nodes": 20, "steps": 10, "window": 10, "stat_seeds": 4},
    "small": {"nodes": 32, "steps": 20, "window": 20, "stat_seeds": 20},
    "full": {"nodes": 128, "steps": 30, "window": 30, "stat_seeds": 10},
}
"""N clients, iterations simulated, App. B window (iterations), and how many seeds the
same-settings statistics use at least. ``full`` is the thesis' N = 128 (generate_graph.py's
default); ``ci`` is what tests/validation/test_validation_heredia.py runs.

WHY ``stat_seeds``: the seed-to-seed spread of a mean neighbour count is large at small N, and
three seeds estimate it badly (``--size small --seeds 3`` once put a +10.7 % chance difference
at 4.7 estimated standard errors; 40 seeds of the same size show none). Seeds beyond
``--seeds`` run the authors' mobility code (``generate_graph.py``, ``next_graph``,
``get_sim_path_points``) with the neighbours taken from their 100 sample points by
:func:`mobidfl.model.contacts.pairs_within`, which gives exactly ``MobilityGraph.neighbors``' sets
(checked on the ``--seeds`` runs, row "test at the authors' 100 sample times"), without its
O(N^2 x 100) Python loop."""
STAT_REL_TOL = 0.10
"""Same-settings statistics agree when the seed means differ by at most 10 % of the
reference or by 3 standard errors of the difference (whichever is larger)."""


# --- the authors' code -------------------------------------------------------------------
def reference_classes(folder: Path) -> tuple[type, type]:
    """``(MobilityGraph, MobilityAwareSharing)`` imported from the pinned cache folder.

    The folder goes first on ``sys.path`` (it holds ``decentralizepy/graphs`` and
    ``decentralizepy/sharing`` as namespace packages); ``decentralizepy.sharing.Sharing`` is
    the stub base class of the module docstring.
    """
    root = str(folder)
    if root not in sys.path:
        sys.path.insert(0, root)
    name = "decentralizepy.sharing.Sharing"
    if name not in sys.modules:
        stub = types.ModuleType(name)
        stub.Sharing = type("Sharing", (), {"__doc__": "validation shim: empty base class"})
        sys.modules[name] = stub
    from decentralizepy.graphs.MobilityGraph import MobilityGraph
    from decentralizepy.sharing.MobilityAwareSharing import MobilityAwareSharing

    return MobilityGraph, MobilityAwareSharing


def author_weights(sharing_class: type, speeds: np.ndarray, alpha: float) -> np.ndarray:
    """The authors' ``averaging_weights([own speed, neighbour speeds...])`` at ``alpha``."""
    obj = object.__new__(sharing_class)
    obj.alpha = alpha
    return np.asarray(obj.averaging_weights(list(speeds)), dtype=np.float64)


@dataclass
class Run:
    """One simulator's iterations 1..K: contacts per iteration, speeds and HM flags."""

    adjacency: list[sp.csr_matrix]
    speeds: np.ndarray
    hm: np.ndarray
    seconds: float
    paths: list[np.ndarray] | None = None
    """Reference only: the authors' 100 sample points of each iteration, ``[100, N, 2]``."""
    starts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
    """Reference only: (previous position, direction index, position) of each iteration."""


def sample_contacts(path: np.ndarray) -> sp.csr_matrix:
    """Pairs within :data:`RADIUS` at any of the sample points ``path`` (``[T, N, 2]``)."""
    found = [pairs_within(xy, RADIUS) for xy in path]
    pairs = np.concatenate(found) if found else np.empty((0, 2), np.int64)
    return symmetric_adjacency(pairs.astype(np.int64).reshape(-1, 2), path.shape[1])


def reference_run(
    folder: Path, *, seed: int, nodes: int, steps: int, work: Path, exact: bool = True
) -> Run:
    """Run ``generate_graph.py`` and ``next_graph`` for ``steps`` iterations; neighbours from
    ``MobilityGraph.neighbors`` (``exact``) or from the same sample points by
    :func:`sample_contacts` (the extra statistics seeds of :data:`SIZES`)."""
    graph_class, _ = reference_classes(folder)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"graph_seed{seed}_n{nodes}.txt"
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, str(folder / "generate_graph.py"), "--seed", str(seed),
         "--nodes", str(nodes), "--highMobilityProportion", str(HM_PROPORTION),
         "--file", str(path)],
        check=True, capture_output=True, cwd=work, timeout=120,
    )
    g = graph_class()
    g.read_graph_from_file(str(path))
    speeds = np.array([node.velocity for node in g.nodes])
    adjacency, paths, starts = [], [], []
    for i in range(steps):
        g = g.next_graph(i)  # the fork's simulate_graph: graphs[-1].next_graph(i)
        path = np.stack(
            [np.array(n.get_sim_path_points(g.width, g.height)) for n in g.nodes], axis=1
        )
        if exact:
            pairs = [(n.uid, j) for n in g.nodes for j in g.neighbors(n.uid) if n.uid < j]
            adjacency.append(
                symmetric_adjacency(np.array(pairs, np.int64).reshape(-1, 2), nodes)
            )
        else:
            adjacency.append(sample_contacts(path))
        paths.append(path)
        starts.append((
            np.array([n.previous_pos_vec for n in g.nodes]),
            np.array([n.previous_dir.value for n in g.nodes]),
            np.array([n.pos_vec for n in g.nodes]),
        ))
    # generate_graph.py: HM clients draw at least beta * s_max, LM ones at most s_max.
    return Run(adjacency, speeds, speeds > S_MAX, time.perf_counter() - t0, paths, starts)


def mobidfl_run(*, seed: int, nodes: int, steps: int) -> Run:
    """The ``mobility_000`` preset (learning off) with ``nodes`` pedestrians, p = 0.2."""
    t0 = time.perf_counter()
    config = Config.from_settings({
        "preset": "mobility_000", "learning": False, "pedestrians": nodes,
        "random_walk.hm_fraction": HM_PROPORTION, "seed": seed,
    })
    for name, want in (("radius_m", RADIUS), ("random_walk.s_max", S_MAX),
                       ("random_walk.beta", BETA), ("contact", "during"), ("step_s", 1.0)):
        if config.setting(name) != want:
            raise ConfigError(name, config.setting(name), f"{want!r} (the authors' value)")
    model = MobiDFLModel(config=config)
    west, south, east, north = model.world_map.bounds
    if not (math.isclose(east - west, BOX) and math.isclose(north - south, BOX)):
        raise ConfigError("map", config.map, f"a {BOX:g} m square box (the authors' world)")
    adjacency = []
    for _ in range(steps):
        model.step()
        adjacency.append(model.adjacency.copy())
    return Run(adjacency, model.speed.copy(), model.hm.copy(), time.perf_counter() - t0)


# --- quantities --------------------------------------------------------------------------
def neighbour_stats(run: Run, *, window: int) -> dict[str, float]:
    """Neighbours per iteration (all / HM / LM) and over the first ``window`` iterations:
    distinct neighbours and cumulative neighbours (sum of |M_i| - 1, App. B Figs. 7-8)."""
    degree = np.stack([np.asarray(a.sum(axis=1)).ravel() for a in run.adjacency])
    union = run.adjacency[0].astype(bool)
    for a in run.adjacency[1:window]:
        union = union + a.astype(bool)
    distinct = np.asarray(union.astype(bool).sum(axis=1)).ravel()
    cumulative = degree[:window].sum(axis=0)
    hm, lm = run.hm, ~run.hm
    return {
        "neighbours per iteration": float(degree.mean()),
        "neighbours per iteration, HM": float(degree[:, hm].mean()) if hm.any() else math.nan,
        "neighbours per iteration, LM": float(degree[:, lm].mean()),
        "distinct neighbours over the window, HM": float(distinct[hm].mean()),
        "distinct neighbours over the window, LM": float(distinct[lm].mean()),
        "cumulative neighbours over the window, HM": float(cumulative[hm].mean()),
        "cumulative neighbours over the window, LM": float(cumulative[lm].mean()),
    }


def pair_sets(adj: sp.csr_matrix) -> set[tuple[int, int]]:
    return set(map(tuple, member_pairs(adj).tolist()))


def same_position_checks(ref: Run, sharing_class: type) -> dict[str, Any]:
    """Feed the authors' positions, neighbours and speeds to MobiDFL's functions."""
    n = len(ref.speeds)
    ref_pairs = samples_pairs = chord_pairs = extra = missing = sample_mismatch = 0
    step_err = path_err = 0.0
    for adj, path, (prev, direction, pos) in zip(ref.adjacency, ref.paths, ref.starts,
                                                 strict=True):
        want = pair_sets(adj)
        ref_pairs += len(want)
        # MobiDFL's test at the same 100 sample times (cKDTree, distance <= R).
        at_samples = set()
        for xy in path:
            at_samples |= {tuple(p) for p in pairs_within(xy, RADIUS).tolist()}
        samples_pairs += len(at_samples)
        sample_mismatch += len(at_samples ^ want)
        # MobiDFL's "during" rule (exact closest approach on the chords between samples).
        got = pair_sets(contact_matrix(path, radius_m=RADIUS, mode="during"))
        chord_pairs += len(got)
        extra += len(got - want)
        missing += len(want - got)
        # Eq. 2 on the same start, direction and speed: random_walk.reflect vs advance().
        free = prev + DIRECTIONS[direction] * ref.speeds[:, None]
        mine = np.stack([reflect(free[:, 0], 0.0, BOX), reflect(free[:, 1], 0.0, BOX)], axis=1)
        step_err = max(step_err, float(np.abs(mine - pos).max()))
        # Sub-step positions: the authors' path points at t = k/100 vs the folded line.
        t = (np.arange(1, path.shape[0] + 1) / path.shape[0])[:, None, None]
        line = prev[None] + DIRECTIONS[direction][None] * ref.speeds[None, :, None] * t
        folded = np.stack([reflect(line[..., 0], 0.0, BOX), reflect(line[..., 1], 0.0, BOX)], -1)
        path_err = max(path_err, float(np.abs(folded - path).max()))
    # Weights of Sec. 5.4 on the authors' neighbour sets and speeds.
    weight_err = {a: 0.0 for a in ALPHAS}
    rows = negative_rows = 0
    for adj in ref.adjacency:
        csr = sp.csr_matrix(adj)
        mine = {a: sp.csr_matrix(mobility_aware_weights(csr, ref.speeds, a)) for a in ALPHAS}
        for i in range(n):
            peers = csr.indices[csr.indptr[i]:csr.indptr[i + 1]]
            if peers.size == 0:
                for a in ALPHAS:  # the authors keep the model (_averaging, no peers)
                    weight_err[a] = max(weight_err[a], abs(mine[a][i, i] - 1.0))
                continue
            rows += 1
            order = np.concatenate([[i], np.sort(peers)])
            for a in ALPHAS:
                theirs = author_weights(sharing_class, ref.speeds[order], a)
                ours = mine[a][i].toarray().ravel()[order]
                weight_err[a] = max(weight_err[a], float(np.abs(theirs - ours).max()))
            negative_rows += int((author_weights(sharing_class, ref.speeds[order],
                                                 CODE_ALPHA) < 0).any())
    return {
        "ref_pairs": ref_pairs, "samples_pairs": samples_pairs, "sample_mismatch": sample_mismatch,
        "chord_pairs": chord_pairs, "extra": extra, "missing": missing, "step_err": step_err,
        "path_err": path_err, "weight_err": weight_err, "rows": rows,
        "negative_rows": negative_rows, "max_speed_step": float(ref.speeds.max()) / 100,
    }


def speed_checks(ref: list[Run], mine: list[Run]) -> dict[str, Any]:
    """HM counts, speed ranges and two-sample KS tests of the pooled HM and LM speeds."""
    out: dict[str, Any] = {}
    out["hm_counts"] = ([int(r.hm.sum()) for r in ref], [int(r.hm.sum()) for r in mine])
    for label, pick in (("HM", lambda r: r.speeds[r.hm]), ("LM", lambda r: r.speeds[~r.hm])):
        a = np.concatenate([pick(r) for r in ref])
        b = np.concatenate([pick(r) for r in mine])
        out[label] = (a, b, float(stats.ks_2samp(a, b).pvalue))
    return out


# --- verdicts ----------------------------------------------------------------------------
def _fmt(values: list[float]) -> str:
    v = np.asarray(values, float)
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return f"{v.mean():.3f} ± {sd:.3f}"


def stat_verdict(ref: list[float], mine: list[float]) -> str:
    """``agree`` when the seed means differ by <= 10 % of the reference or <= 3 standard
    errors of the difference (:data:`STAT_REL_TOL`), else ``differs``."""
    a, b = np.asarray(ref, float), np.asarray(mine, float)
    diff = abs(b.mean() - a.mean())
    se = math.sqrt(
        (a.var(ddof=1) / a.size if a.size > 1 else 0.0)
        + (b.var(ddof=1) / b.size if b.size > 1 else 0.0)
    )
    return "agree" if diff <= max(STAT_REL_TOL * abs(a.mean()), 3.0 * se) else "differs"


def compare(
    *, size: str, seeds: int, out: Path | None = None, folder: Path | None = None
) -> dict[str, Any]:
    """Run both sides for seeds 0..seeds-1 and return every number :func:`rows` reports.

    ``out`` is not written here (:func:`run` writes); ``folder`` defaults to the pinned cache.
    """
    if size not in SIZES:
        raise ConfigError("--size", size, f"one of {', '.join(SIZES)}")
    if seeds < 1:
        raise ConfigError("--seeds", seeds, "an integer >= 1")
    folder = folder or ensure(REFERENCE)
    _, sharing_class = reference_classes(folder)
    p = SIZES[size]
    refs, mines, checks = [], [], []
    stat_seeds = max(seeds, p["stat_seeds"])
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(stat_seeds):
            ref = reference_run(folder, seed=seed, nodes=p["nodes"], steps=p["steps"],
                                work=Path(tmp), exact=seed < seeds)
            refs.append(ref)
            if seed < seeds:
                checks.append(same_position_checks(ref, sharing_class))
            mines.append(mobidfl_run(seed=seed, nodes=p["nodes"], steps=p["steps"]))
    return {
        "size": size, "params": p, "seeds": seeds, "stat_seeds": stat_seeds,
        "ref_stats": [neighbour_stats(r, window=p["window"]) for r in refs],
        "mine_stats": [neighbour_stats(r, window=p["window"]) for r in mines],
        "checks": checks, "speeds": speed_checks(refs, mines),
        "seconds": (sum(r.seconds for r in refs), sum(r.seconds for r in mines)),
    }


def rows(result: dict[str, Any]) -> list[Row]:
    """The compared quantities of :func:`compare` as :class:`~validation.Row`, with verdicts."""
    p, checks = result["params"], result["checks"]
    tag = f"N = {p['nodes']}, {p['steps']} iterations, {result['seeds']} seeds"
    out: list[Row] = []

    ref_pairs = sum(c["ref_pairs"] for c in checks)
    mism = sum(c["sample_mismatch"] for c in checks)
    out.append(Row(
        CASE, f"neighbour pairs, same positions, test at the authors' 100 sample times ({tag})",
        f"{ref_pairs} pairs", f"{sum(c['samples_pairs'] for c in checks)} pairs ({mism} differ)",
        "identical sets", "agree" if mism == 0 else "differs",
    ))
    extra = sum(c["extra"] for c in checks)
    missing = sum(c["missing"] for c in checks)
    chord = sum(c["chord_pairs"] for c in checks)
    verdict = "agree" if extra == missing == 0 else ("explained" if missing == 0 else "differs")
    out.append(Row(
        CASE, "neighbour pairs, same positions, MobiDFL's 'during' rule (contact_matrix)",
        f"{ref_pairs} pairs", f"{chord} pairs (+{extra}, -{missing})",
        "reference ⊆ MobiDFL", verdict,
        "" if extra == 0 else
        f"{extra} pair(s) come within R only between two of the authors' 100 sample points "
        "(MobiDFL tests the exact closest approach on each chord, the thesis' ∃τ of Sec. 5.1; "
        "MobilityGraph.neighbors tests the sample points only)",
    ))
    step_err = max(c["step_err"] for c in checks)
    out.append(Row(
        CASE, "position after one iteration, same start/direction/speed (eq. 2)",
        "MobilityNode.advance", f"random_walk.reflect: max |Δ| = {step_err:.1e} m",
        "<= 1e-9 m", "agree" if step_err <= 1e-9 else "differs",
    ))
    path_err = max(c["path_err"] for c in checks)
    bound = 2.0 * max(c["max_speed_step"] for c in checks)
    out.append(Row(
        CASE, "sub-step positions (the 100 sample points), same start/direction/speed",
        "MobilityNode.get_sim_path_points", f"folded straight line: max |Δ| = {path_err:.3g} m",
        f"<= 2 x fastest speed / 100 = {bound:.3g} m",
        "agree" if path_err <= 1e-9 else ("explained" if path_err <= bound + 1e-9 else "differs"),
        "" if path_err <= 1e-9 else
        "get_sim_path_points reverses the velocity one sample late: the sample after a wall "
        "lies up to s/100 outside the box, then is clamped to the wall, so the path lags the "
        "exactly reflected one by the overshoot (< 2 s/100 at the sample outside, < s/100 "
        "after) and its end point differs from the same node's advance(); MobiDFL folds "
        "exactly (eq. 2). Same neighbour sets on these points (rows above)",
    ))
    rows_n = sum(c["rows"] for c in checks)
    for a in ALPHAS:
        err = max(c["weight_err"][a] for c in checks)
        out.append(Row(
            CASE, f"mixing weights eq. 5.4, alpha = {a:g}, same neighbours and speeds",
            f"averaging_weights, {rows_n} rows", f"mobility_aware_weights: max |Δ| = {err:.1e}",
            f"<= {WEIGHT_TOL:g}", "agree" if err <= WEIGHT_TOL else "differs",
        ))
    neg = sum(c["negative_rows"] for c in checks)
    out.append(Row(
        CASE, f"mixing weights at the code's default alpha = {CODE_ALPHA:g}",
        f"{neg} of {rows_n} rows have a negative weight", "refused (ConfigError: alpha in [0, 1])",
        "documented", "explained",
        "MobilityAwareSharing defaults to alpha = 2; the thesis uses 0.1-0.4 and 1.0 "
        "(Tables 3, 4, 7, 8) and calls alpha = 1 the naive X_ij; MobiDFL keeps alpha in [0, 1] "
        "so weights stay non-negative",
    ))

    ref_s, mine_s = result["ref_stats"], result["mine_stats"]
    for key in ref_s[0]:
        a = [s[key] for s in ref_s]
        b = [s[key] for s in mine_s]
        label = key.replace("the window", f"{p['window']} iterations")
        out.append(Row(
            CASE, f"{label} (same settings, own random numbers, {result['stat_seeds']} seeds)",
            _fmt(a), _fmt(b),
            "within 10 % or 3 s.e.", stat_verdict(a, b),
        ))
    sp_ = result["speeds"]
    ref_hm, mine_hm = sp_["hm_counts"]
    want = math.ceil(round(HM_PROPORTION * p["nodes"], 9))
    out.append(Row(
        CASE, f"HM clients per seed (p = {HM_PROPORTION:g})", str(ref_hm), str(mine_hm),
        f"= ceil(pN) = {want}",
        "agree" if set(ref_hm) == set(mine_hm) == {want} else "differs",
    ))
    for label, lo, hi in (("HM", BETA * S_MAX, 2 * BETA * S_MAX), ("LM", 0.0, S_MAX)):
        a, b, pval = sp_[label]
        inside = bool((a >= lo).all() and (a < hi).all() and (b >= lo).all() and (b < hi).all())
        out.append(Row(
            CASE, f"{label} speeds per iteration, U({lo:g}, {hi:g})",
            f"mean {a.mean():.1f}, range {a.min():.1f}-{a.max():.1f} (n = {a.size})",
            f"mean {b.mean():.1f}, range {b.min():.1f}-{b.max():.1f} (n = {b.size})",
            "inside the range; two-sample KS p >= 0.01",
            "agree" if inside and pval >= 0.01 else "differs",
            f"KS p = {pval:.2f}",
        ))
    return out


def run(*, size: str, seeds: int, out: Path) -> list[Row]:
    """``python -m validation`` entry point: compare, write ``heredia.md``, return the rows."""
    result = compare(size=size, seeds=seeds, out=out)
    found = rows(result)
    out.mkdir(parents=True, exist_ok=True)
    ref_s, mine_s = result["seconds"]
    write_text_atomic(
        out / "heredia.md",
        f"de Heredia, size {size}, {seeds} seeds: authors' code {ref_s:.1f} s, "
        f"MobiDFL {mine_s:.1f} s\n\n"
        + "\n".join(f"- {r.quantity}: reference {r.reference}; MobiDFL {r.mobidfl}; "
                    f"{r.verdict}" for r in found) + "\n"
    )
    return found
