"""Street graphs as flat numpy arrays, so thousands of agents move without per-agent Python.

An agent on the network is an ``(edge, offset)`` pair. Edge geometries are stored once as
one array of points; positions are interpolated with a single ``searchsorted`` over all
agents. Turn choices at intersections follow the Manhattan mobility model (Cached-DFL,
"Mobile DFL Simulation"; Bai, Sadagopan & Helmy 2003): straight / left / right with
configured probabilities, never back the way it came unless at a dead end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from scipy.spatial import cKDTree

STRAIGHT, LEFT, RIGHT, BACK = 0, 1, 2, 3
_MIN_LENGTH = 0.01


@dataclass(frozen=True)
class TurnTable:
    """Next-edge distribution for every incoming edge, flattened for vectorised sampling.

    ``cum[ptr[e]:ptr[e+1]]`` holds ``e + cumulative probability`` so one ``searchsorted``
    over all agents picks every next edge at once.
    """

    ptr: np.ndarray
    nxt: np.ndarray
    prob: np.ndarray
    turn: np.ndarray
    cum: np.ndarray

    def sample(self, edges: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        keys = edges + np.minimum(uniforms, 1.0 - 1e-12)
        idx = np.searchsorted(self.cum, keys, side="right")
        idx = np.clip(idx, self.ptr[edges], self.ptr[edges + 1] - 1)
        return self.nxt[idx]


@dataclass
class StreetNetwork:
    """A projected street graph (metres) as arrays; ``directed=False`` is the walk network."""

    node_xy: np.ndarray
    node_ids: np.ndarray
    edge_u: np.ndarray
    edge_v: np.ndarray
    edge_len: np.ndarray
    pts_xy: np.ndarray
    pts_key: np.ndarray
    edge_base: np.ndarray
    edge_pt0: np.ndarray
    edge_pt1: np.ndarray
    crs: str
    directed: bool
    out_ptr: np.ndarray
    out_edges: np.ndarray
    _tables: dict = field(default_factory=dict, repr=False)
    _edge_tree: cKDTree | None = field(default=None, repr=False)

    @classmethod
    def from_graph(cls, graph: nx.MultiDiGraph, *, directed: bool = True) -> StreetNetwork:
        """Build the arrays from the largest strongly connected component of ``graph``."""
        work = nx.MultiDiGraph(graph)
        if not directed:
            for u, v, data in list(graph.edges(data=True)):
                if not work.has_edge(v, u):
                    rev = dict(data)
                    geom = data.get("geometry")
                    if geom is not None:
                        rev["geometry"] = type(geom)(list(geom.coords)[::-1])
                    work.add_edge(v, u, **rev)
        component = max(nx.strongly_connected_components(work), key=len)
        work = work.subgraph(component).copy()
        node_ids = np.array(list(work.nodes), dtype=object)
        index = {n: i for i, n in enumerate(node_ids)}
        node_xy = np.array([[work.nodes[n]["x"], work.nodes[n]["y"]] for n in node_ids], float)
        us, vs, lens, pts, pt0, pt1 = [], [], [], [], [], []
        n_points = 0
        for u, v, data in work.edges(data=True):
            geom = data.get("geometry")
            coords = (
                np.asarray(geom.coords, float)[:, :2]
                if geom is not None
                else np.array([node_xy[index[u]], node_xy[index[v]]])
            )
            coords[0], coords[-1] = node_xy[index[u]], node_xy[index[v]]
            seg = np.hypot(*np.diff(coords, axis=0).T)
            keep = np.concatenate([[True], seg > 1e-9])
            coords = coords[keep] if keep.sum() >= 2 else coords[[0, -1]]
            us.append(index[u])
            vs.append(index[v])
            pt0.append(n_points)
            pts.append(coords)
            n_points += len(coords)
            pt1.append(n_points)
            lens.append(max(float(np.hypot(*np.diff(coords, axis=0).T).sum()), _MIN_LENGTH))
        edge_u, edge_v = np.array(us), np.array(vs)
        edge_len = np.array(lens)
        edge_base = np.concatenate([[0.0], np.cumsum(edge_len + 1.0)[:-1]])
        local = [
            np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(p, axis=0).T))]) for p in pts
        ]
        pts_key = np.concatenate([edge_base[e] + s for e, s in enumerate(local)])
        order = np.argsort(edge_u, kind="stable")
        out_ptr = np.searchsorted(edge_u[order], np.arange(len(node_ids) + 1))
        return cls(
            node_xy=node_xy,
            node_ids=node_ids,
            edge_u=edge_u,
            edge_v=edge_v,
            edge_len=edge_len,
            pts_xy=np.concatenate(pts),
            pts_key=pts_key,
            edge_base=edge_base,
            edge_pt0=np.array(pt0),
            edge_pt1=np.array(pt1),
            crs=str(graph.graph.get("crs", "EPSG:32618")),
            directed=directed,
            out_ptr=out_ptr,
            out_edges=order,
        )

    # --- geometry ------------------------------------------------------------------
    @property
    def n_edges(self) -> int:
        return len(self.edge_u)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        lo, hi = self.pts_xy.min(axis=0), self.pts_xy.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])

    def xy(self, edges: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Positions of agents at ``offsets`` metres along ``edges`` (vectorised)."""
        keys = self.edge_base[edges] + offsets
        k = np.searchsorted(self.pts_key, keys, side="right") - 1
        k = np.clip(k, self.edge_pt0[edges], self.edge_pt1[edges] - 2)
        a, b = self.pts_xy[k], self.pts_xy[k + 1]
        span = np.maximum(self.pts_key[k + 1] - self.pts_key[k], 1e-12)
        t = np.clip((keys - self.pts_key[k]) / span, 0.0, 1.0)[:, None]
        return a + t * (b - a)

    def heading(self, edge: int, *, at_end: bool) -> np.ndarray:
        p0, p1 = self.edge_pt0[edge], self.edge_pt1[edge]
        seg = self.pts_xy[p1 - 1] - self.pts_xy[p1 - 2] if at_end else (
            self.pts_xy[p0 + 1] - self.pts_xy[p0]
        )
        return seg / max(float(np.hypot(*seg)), 1e-12)

    def distance_to_network(self, xy: np.ndarray) -> np.ndarray:
        """Distance (m) from each point to the nearest edge geometry (for tests/checks)."""
        a_all = self.pts_xy[:-1]
        b_all = self.pts_xy[1:]
        valid = np.ones(len(a_all), bool)
        valid[self.edge_pt1[:-1] - 1] = False
        a, b = a_all[valid], b_all[valid]
        mids = (a + b) / 2
        half = np.hypot(*(b - a).T) / 2
        if self._edge_tree is None:
            self._edge_tree = cKDTree(mids)
        out = np.empty(len(xy))
        reach = float(half.max())
        for i, p in enumerate(xy):
            cand = self._edge_tree.query_ball_point(p, r=reach + 50.0)
            if not cand:
                cand = [int(self._edge_tree.query(p)[1])]
            ca, cb = a[cand], b[cand]
            d = cb - ca
            t = np.clip(np.einsum("ij,ij->i", p - ca, d) / np.maximum((d * d).sum(1), 1e-12), 0, 1)
            out[i] = np.hypot(*(ca + t[:, None] * d - p).T).min()
        return out

    # --- Manhattan turns -----------------------------------------------------------
    def turn_table(
        self,
        probs: tuple[float, float, float],
        *,
        allowed_nodes: np.ndarray | None = None,
    ) -> TurnTable:
        """Next-edge probabilities by turn angle (Cached-DFL, Manhattan mobility model).

        At the end of edge ``u -> v`` every out-edge ``v -> w`` (``w != u``) is classed by
        its turn angle: straight (|a| <= 45°), left (45° < a), right (a < -45°). Each class
        present gets its configured probability, renormalised over the classes present, and
        split equally among its edges. The U-turn is used only at a dead end. With
        ``allowed_nodes`` (area-restricted agents) edges leading outside are never chosen,
        unless that leaves no choice.

        Args:
            probs: (straight, left, right) probabilities.
            allowed_nodes: optional boolean mask of nodes the agent may drive to.
        """
        key = (tuple(probs), None if allowed_nodes is None else allowed_nodes.tobytes())
        if key in self._tables:
            return self._tables[key]
        ptr, nxt, prob, turn = [0], [], [], []
        for e in range(self.n_edges):
            v = self.edge_v[e]
            outs = self.out_edges[self.out_ptr[v] : self.out_ptr[v + 1]]
            candidates = [f for f in outs if self.edge_v[f] != self.edge_u[e]]
            if allowed_nodes is not None:
                inside = [f for f in candidates if allowed_nodes[self.edge_v[f]]]
                candidates = inside or (
                    [] if any(allowed_nodes[self.edge_v[f]] for f in outs) else candidates
                )
            if not candidates:
                back = [f for f in outs if self.edge_v[f] == self.edge_u[e]]
                candidates = back or list(outs)
            h_in = self.heading(e, at_end=True)
            classes = [self._classify(h_in, self.heading(f, at_end=False)) for f in candidates]
            weights = np.array([probs[c] if c != BACK else 0.0 for c in classes])
            counts = {c: classes.count(c) for c in set(classes)}
            weights = weights / np.array([counts[c] for c in classes])
            if weights.sum() <= 0:
                weights = np.ones(len(candidates))
            weights = weights / weights.sum()
            nxt.extend(candidates)
            prob.extend(weights)
            turn.extend(classes)
            ptr.append(len(nxt))
        ptr_a, prob_a = np.array(ptr), np.array(prob)
        cum = np.empty_like(prob_a)
        for e in range(self.n_edges):
            cum[ptr_a[e] : ptr_a[e + 1]] = e + np.cumsum(prob_a[ptr_a[e] : ptr_a[e + 1]])
            cum[ptr_a[e + 1] - 1] = e + 1.0
        table = TurnTable(ptr_a, np.array(nxt), prob_a, np.array(turn), cum)
        self._tables[key] = table
        return table

    @staticmethod
    def _classify(h_in: np.ndarray, h_out: np.ndarray) -> int:
        cross = h_in[0] * h_out[1] - h_in[1] * h_out[0]
        angle = np.degrees(np.arctan2(cross, float(h_in @ h_out)))
        if abs(angle) <= 45.0:
            return STRAIGHT
        if abs(angle) >= 160.0:
            return BACK
        return LEFT if angle > 0 else RIGHT

    def random_edges(
        self, count: int, rng: np.random.Generator, *, allowed_nodes: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Uniform random positions on the network (edge chosen ∝ length)."""
        weights = self.edge_len.copy()
        if allowed_nodes is not None:
            inside = allowed_nodes[self.edge_u] & allowed_nodes[self.edge_v]
            if inside.any():
                weights = np.where(inside, weights, 0.0)
        edges = rng.choice(self.n_edges, size=count, p=weights / weights.sum())
        return edges, rng.random(count) * self.edge_len[edges]

    def advance(
        self,
        edges: np.ndarray,
        offsets: np.ndarray,
        distances: np.ndarray,
        tables: list[TurnTable],
        table_of: np.ndarray,
        rng: np.random.Generator,
        *,
        decisions: list[np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Move agents ``distances`` metres; leftover distance carries into the next edge.

        Args:
            edges, offsets: current positions (not modified).
            distances: metres to travel per agent.
            tables: turn tables; agent ``i`` uses ``tables[table_of[i]]``.
            rng: draws one uniform per intersection decision.
            decisions: if given, ``[in_edge, out_edge]`` pairs are appended (for tests).

        Returns:
            New ``(edges, offsets)``.
        """
        edges, offsets = edges.copy(), offsets.astype(float).copy()
        remaining = np.asarray(distances, float).copy()
        active = np.arange(len(edges))
        while active.size:
            room = self.edge_len[edges[active]] - offsets[active]
            ends = remaining[active] > room
            stay = active[~ends]
            offsets[stay] += remaining[stay]
            remaining[stay] = 0.0
            active = active[ends]
            if not active.size:
                break
            remaining[active] -= room[ends]
            new = np.empty(active.size, dtype=edges.dtype)
            uniforms = rng.random(active.size)
            for t in np.unique(table_of[active]):
                sel = table_of[active] == t
                new[sel] = tables[t].sample(edges[active[sel]], uniforms[sel])
            if decisions is not None:
                decisions.append(np.stack([edges[active], new], axis=1))
            edges[active] = new
            offsets[active] = 0.0
        return edges, offsets
