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
import scipy.sparse as sp
import shapely
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from mobidfl.maps.edges import EdgeTable, ranges

STRAIGHT, LEFT, RIGHT, BACK = 0, 1, 2, 3
_MIN_LENGTH = 0.01
TURN_RULES = ("classes", "straightest")
"""How turn probabilities are read (:meth:`StreetNetwork.turn_table`)."""


def _straightest_weights(
    owner: np.ndarray, abs_angle: np.ndarray, per_edge: np.ndarray, straight: float
) -> np.ndarray:
    """Cached-DFL's turn rule on flat candidates.

    The straightest gets ``straight``, the others share ``1 - straight`` equally, a lone candidate
    gets 1 (``owner`` sorted).

    The authors' ``get_road_choice_probability`` gives ``straight`` to every candidate of the
    largest cosine (its probabilities do not sum to 1 on an exact tie); here the first of a
    tie gets it, so every distribution sums to 1.
    """
    n = per_edge[owner]
    start = np.concatenate([[0], np.cumsum(per_edge)[:-1]])
    has = per_edge > 0
    smallest = np.full(len(per_edge), np.inf)
    smallest[has] = np.minimum.reduceat(abs_angle, start[has])
    tied = abs_angle == smallest[owner]
    running = np.cumsum(tied)
    before = np.concatenate([[0], running])[start][owner]
    first = tied & (running - before == 1)
    others = (1.0 - straight) / np.maximum(n - 1, 1)
    return np.where(n == 1, 1.0, np.where(first, straight, others))


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
        """Next edge of each agent arriving on ``edges``, drawn with ``uniforms`` in [0, 1)."""
        keys = edges + np.minimum(uniforms, 1.0 - 1e-12)
        first = self.ptr[edges]
        if self._short_blocks:
            # the searchsorted below, block by block: the first entry above the key is the
            # block start plus the entries before the block's last that are <= the key
            # (cum rises within a block and ends at edge + 1 > key): a pass per slot
            # instead of a binary search over all edges (benchmarks/city_scale.py)
            idx = first.copy()
            last = self.ptr[edges + 1] - 1
            for slot in range(self._short_blocks - 1):
                at = first + slot
                idx += (at < last) & (self.cum.take(np.minimum(at, last)) <= keys)
            return self.nxt[idx]
        idx = np.searchsorted(self.cum, keys, side="right")
        idx = np.clip(idx, first, self.ptr[edges + 1] - 1)
        return self.nxt[idx]

    @property
    def _short_blocks(self) -> int:
        """The largest block when blocks are short and sorted enough to scan, else 0.

        Every block must be short (<= 8) and non-decreasing with values below ``edge + 1`` before
        its last; else 0 (then: ``searchsorted``).
        """
        cached = self.__dict__.get("_short")
        if cached is None:
            sizes = np.diff(self.ptr)
            owner = np.repeat(np.arange(len(sizes)), sizes)
            inner = np.ones(len(self.cum), bool)
            inner[self.ptr[1:][sizes > 0] - 1] = False
            rising = np.all(np.diff(self.cum)[inner[:-1]] >= 0) if len(self.cum) > 1 else True
            below = np.all(self.cum[inner] < owner[inner] + 1.0)
            ok = len(sizes) and sizes.max() <= 8 and rising and below
            cached = int(sizes.max()) if ok else 0
            object.__setattr__(self, "_short", cached)
        return cached


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
        return cls.from_table(table_from_graph(graph), directed=directed)

    @classmethod
    def from_table(cls, table: EdgeTable, *, directed: bool = True) -> StreetNetwork:
        """Build the arrays from an :class:`EdgeTable`, all edges at once (no per-edge Python).

        ``directed=False`` is the walk network: every street can be walked both ways, so the
        opposite direction is added wherever the table lacks it. Only the largest strongly
        connected component is kept, so an agent can never get stuck.
        """
        n = table.n_nodes
        if not directed:
            forward = table.edge_u.astype(np.int64) * n + table.edge_v
            backward = table.edge_v.astype(np.int64) * n + table.edge_u
            table = table.with_reverse(~np.isin(backward, forward))
        adjacency = sp.csr_matrix(
            (np.ones(table.n_edges, bool), (table.edge_u, table.edge_v)), shape=(n, n)
        )
        _, labels = connected_components(adjacency, directed=True, connection="strong")
        keep_node = labels == np.argmax(np.bincount(labels))
        keep_edge = keep_node[table.edge_u] & keep_node[table.edge_v]
        if keep_node.sum() < 2 or not keep_edge.any():
            raise ValueError("the street map has no connected streets (no strongly "
                             "connected part with two or more intersections)")
        table = table.subset(keep_edge)
        new_index = np.cumsum(keep_node) - 1
        node_xy = table.node_xy[keep_node]
        edge_u, edge_v = new_index[table.edge_u], new_index[table.edge_v]
        n_edges = len(edge_u)

        # Geometry: ends snapped onto their nodes, repeated points dropped.
        coords = table.coords.copy()
        first, last = table.ptr[:-1], table.ptr[1:] - 1
        coords[first] = node_xy[edge_u]
        coords[last] = node_xy[edge_v]
        edge_of_point = np.repeat(np.arange(n_edges), table.point_counts)
        keep = np.ones(len(coords), bool)
        keep[1:] = np.hypot(*np.diff(coords, axis=0).T) > 1e-9
        keep[first] = True
        short = np.bincount(edge_of_point, weights=keep, minlength=n_edges) < 2
        keep[last[short]] = True
        coords, edge_of_point = coords[keep], edge_of_point[keep]
        counts = np.bincount(edge_of_point, minlength=n_edges)
        pt1 = np.cumsum(counts)
        pt0 = pt1 - counts
        seg = np.zeros(len(coords))
        seg[1:] = np.hypot(*np.diff(coords, axis=0).T)
        seg[pt0] = 0.0
        edge_len = np.maximum(np.bincount(edge_of_point, weights=seg, minlength=n_edges),
                              _MIN_LENGTH)
        running = np.cumsum(seg)
        local = running - running[pt0][edge_of_point]
        edge_base = np.concatenate([[0.0], np.cumsum(edge_len + 1.0)[:-1]])
        order = np.argsort(edge_u, kind="stable")
        return cls(
            node_xy=node_xy,
            node_ids=np.asarray(table.node_ids)[keep_node] if len(table.node_ids) else
            np.flatnonzero(keep_node),
            edge_u=edge_u,
            edge_v=edge_v,
            edge_len=edge_len,
            pts_xy=coords,
            pts_key=edge_base[edge_of_point] + local,
            edge_base=edge_base,
            edge_pt0=pt0,
            edge_pt1=pt1,
            crs=table.crs,
            directed=directed,
            out_ptr=np.searchsorted(edge_u[order], np.arange(len(node_xy) + 1)),
            out_edges=order,
        )

    # --- persistence ---------------------------------------------------------------
    ARRAYS = ("node_xy", "node_ids", "edge_u", "edge_v", "edge_len", "pts_xy", "pts_key",
              "edge_base", "edge_pt0", "edge_pt1", "out_ptr", "out_edges")

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """Plain arrays (no pickled objects) for the map cache."""
        out = {f"{prefix}{name}": getattr(self, name) for name in self.ARRAYS}
        ids = self.node_ids
        if ids.dtype == object:
            ids = ids.astype(str)
        out[f"{prefix}node_ids"] = ids
        out[f"{prefix}meta"] = np.array([self.crs, "directed" if self.directed else "walk"])
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> StreetNetwork:
        """The network :meth:`to_arrays` wrote under ``prefix``."""
        crs, mode = (str(v) for v in arrays[f"{prefix}meta"])
        values = {name: np.asarray(arrays[f"{prefix}{name}"]) for name in cls.ARRAYS}
        return cls(**values, crs=crs, directed=mode == "directed")

    # --- geometry ------------------------------------------------------------------
    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return len(self.edge_u)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """``(west, south, east, north)`` of the network's points, in map metres."""
        lo, hi = self.pts_xy.min(axis=0), self.pts_xy.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])

    def xy(self, edges: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Positions of agents at ``offsets`` metres along ``edges`` (vectorised)."""
        keys = self.edge_base.take(edges) + offsets
        k = self.edge_pt0.take(edges)
        segments = self.edge_pt1.take(edges) - k - 1
        longest = int(segments.max(initial=1))
        if longest <= 4:
            # the searchsorted below within the edge: its first point plus the later inner
            # points at or before the key (strictly rising keys along an edge). A pass per
            # segment, none where all edges are straight (grids), instead of a binary search
            # over all points; curvier maps (Helsinki: up to 16 and more) keep the search.
            start = k.copy()
            for s in range(1, longest):
                at = np.minimum(start + s, self.edge_pt1.take(edges) - 1)
                k += (s < segments) & (self.pts_key.take(at) <= keys)
        else:
            k = np.searchsorted(self.pts_key, keys, side="right") - 1
            k = np.clip(k, self.edge_pt0[edges], self.edge_pt1[edges] - 2)
        # a + t * (b - a), t = clip((key - key_a) / max(key_b - key_a, 1e-12), 0, 1): the
        # same operations on take()s, in place
        after = k + 1
        key_a = self.pts_key.take(k)
        span = self.pts_key.take(after)
        span -= key_a
        np.maximum(span, 1e-12, out=span)
        keys -= key_a
        keys /= span
        np.clip(keys, 0.0, 1.0, out=keys)
        a = self.pts_xy.take(k, axis=0)
        b = self.pts_xy.take(after, axis=0)
        b -= a
        b *= keys[:, None]
        b += a
        return b

    def heading(self, edge: int, *, at_end: bool) -> np.ndarray:
        """Unit direction of ``edge`` at its start, or at its end with ``at_end``."""
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
        rule: str = "classes",
    ) -> TurnTable:
        """Next-edge probabilities by turn angle (Cached-DFL, Manhattan mobility model).

        At the end of edge ``u -> v`` every out-edge ``v -> w`` (``w != u``) is a candidate.
        ``rule="classes"``: each is classed by its turn angle: straight (|a| <= 45°), left
        (45° < a), right (a < -45°); each class present gets its configured probability,
        renormalised over the classes present, and split equally among its edges.
        ``rule="straightest"`` (Cached-DFL, "Mobile DFL Simulation": "0.5 to continue
        straight and 0.1667 per road among three options"; the authors' ``road_sim.py``
        ``get_road_choice_probability``): the candidate with the smallest turn angle gets
        ``probs[0]``, the others share ``1 - probs[0]`` equally, whatever their angles (the
        left/right entries are not read); a lone candidate gets 1. Either way the U-turn
        is used only at a dead end. With ``allowed_nodes`` (area-restricted agents) edges
        leading outside are never chosen, unless that leaves no choice.

        Parameters
        ----------
        probs
            (straight, left, right) probabilities.
        allowed_nodes
            optional boolean mask of nodes the agent may drive to.
        rule
            ``"classes"`` or ``"straightest"`` (above).
        """
        if rule not in TURN_RULES:
            raise ValueError(f"turn rule {rule!r}: one of {', '.join(TURN_RULES)}")
        key = (tuple(probs), None if allowed_nodes is None else allowed_nodes.tobytes(), rule)
        if key in self._tables:
            return self._tables[key]
        table = self._build_turn_table(np.asarray(probs, float), allowed_nodes, rule=rule)
        self._tables[key] = table
        return table

    def _build_turn_table(
        self, probs: np.ndarray, allowed_nodes: np.ndarray | None, *, rule: str = "classes"
    ) -> TurnTable:
        """All edges' next-edge distributions at once (candidates as one flat array)."""
        n_edges = self.n_edges
        v = self.edge_v
        outs_n = self.out_ptr[v + 1] - self.out_ptr[v]
        owner = np.repeat(np.arange(n_edges), outs_n)
        cand = self.out_edges[ranges(self.out_ptr[v], outs_n)]
        back = self.edge_v[cand] == self.edge_u[owner]
        use = ~back
        if allowed_nodes is not None:
            inside = allowed_nodes[self.edge_v[cand]]
            any_inside_forward = np.bincount(owner, weights=use & inside, minlength=n_edges) > 0
            any_inside = np.bincount(owner, weights=inside, minlength=n_edges) > 0
            restricted = any_inside_forward[owner]
            blocked = (~any_inside_forward & any_inside)[owner]
            use = np.where(restricted, use & inside, np.where(blocked, False, use))
        empty = np.bincount(owner, weights=use, minlength=n_edges) == 0
        has_back = np.bincount(owner, weights=back, minlength=n_edges) > 0
        fallback = empty[owner]
        use = np.where(fallback, np.where(has_back[owner], back, True), use)
        owner, cand = owner[use], cand[use]

        h_in = self._headings(at_end=True)[owner]
        h_out = self._headings(at_end=False)[cand]
        cross = h_in[:, 0] * h_out[:, 1] - h_in[:, 1] * h_out[:, 0]
        angle = np.degrees(np.arctan2(cross, (h_in * h_out).sum(1)))
        turn = np.where(
            np.abs(angle) <= 45.0,
            STRAIGHT,
            np.where(np.abs(angle) >= 160.0, BACK, np.where(angle > 0, LEFT, RIGHT)),
        )
        per_edge = np.bincount(owner, minlength=n_edges)
        if rule == "straightest":
            weights = _straightest_weights(owner, np.abs(angle), per_edge, float(probs[0]))
        else:
            class_count = np.bincount(owner * 4 + turn, minlength=4 * n_edges)[owner * 4 + turn]
            weights = np.where(turn == BACK, 0.0, np.append(probs, 0.0)[turn]) / class_count
        total = np.bincount(owner, weights=weights, minlength=n_edges)
        weights = np.where(total[owner] > 0, weights, 1.0)
        total = np.where(total > 0, total, per_edge)
        prob = weights / total[owner]
        ptr = np.concatenate([[0], np.cumsum(per_edge)])
        running = np.cumsum(prob)
        cum = owner + running - np.concatenate([[0.0], running])[ptr[:-1]][owner]
        cum[ptr[1:] - 1] = np.arange(n_edges) + 1.0
        return TurnTable(ptr, cand, prob, turn, cum)

    def _headings(self, *, at_end: bool) -> np.ndarray:
        """Unit direction of every edge where it starts (or ends)."""
        if at_end:
            seg = self.pts_xy[self.edge_pt1 - 1] - self.pts_xy[self.edge_pt1 - 2]
        else:
            seg = self.pts_xy[self.edge_pt0 + 1] - self.pts_xy[self.edge_pt0]
        return seg / np.maximum(np.hypot(*seg.T), 1e-12)[:, None]

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

        Parameters
        ----------
        edges, offsets
            current positions (not modified).
        distances
            metres to travel per agent.
        tables
            turn tables; agent ``i`` uses ``tables[table_of[i]]``.
        rng
            draws one uniform per intersection decision.
        decisions
            if given, ``[in_edge, out_edge]`` pairs are appended (for tests).

        Returns
        -------
        tuple[np.ndarray, np.ndarray]
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
            uniforms = rng.random(active.size)
            if len(tables) == 1:  # one turn table (Manhattan): no grouping
                new = tables[0].sample(edges[active], uniforms).astype(edges.dtype, copy=False)
            else:
                new = np.empty(active.size, dtype=edges.dtype)
                for t in np.unique(table_of[active]):
                    sel = table_of[active] == t
                    new[sel] = tables[t].sample(edges[active[sel]], uniforms[sel])
            if decisions is not None:
                decisions.append(np.stack([edges[active], new], axis=1))
            edges[active] = new
            offsets[active] = 0.0
        return edges, offsets


def table_from_graph(graph: nx.MultiDiGraph) -> EdgeTable:
    """An osmnx-style projected graph as an :class:`EdgeTable` (one pass over its edges).

    Edges without a ``geometry`` are straight; geometries are oriented from ``u`` to ``v``.
    """
    node_ids = np.array(list(graph.nodes), dtype=object)
    index = {node: i for i, node in enumerate(node_ids)}
    node_xy = np.array([(d["x"], d["y"]) for _, d in graph.nodes(data=True)], float).reshape(
        -1, 2
    )
    edges = list(graph.edges(data="geometry"))
    edge_u = np.array([index[u] for u, _, _ in edges], np.int64)
    edge_v = np.array([index[v] for _, v, _ in edges], np.int64)
    geoms = np.array([g for *_, g in edges], dtype=object)
    table = _with_geometries(node_ids, node_xy, edge_u, edge_v, geoms,
                             str(graph.graph.get("crs", "EPSG:32618")))
    return table.oriented()


def _with_geometries(node_ids, node_xy, edge_u, edge_v, geoms, crs) -> EdgeTable:
    """Attach polylines (shapely geometries or None = straight) to edges, vectorised."""
    has = np.array([g is not None for g in geoms], bool) if len(geoms) else np.zeros(0, bool)
    counts = np.full(len(edge_u), 2, np.int64)
    geom_coords, owner = (np.zeros((0, 2)), np.zeros(0, np.int64))
    if has.any():
        geom_coords, owner = shapely.get_coordinates(geoms[has], return_index=True)
        counts[has] = np.bincount(owner, minlength=int(has.sum()))
    ptr = np.concatenate([[0], np.cumsum(counts)])
    coords = np.empty((int(ptr[-1]), 2))
    straight = np.flatnonzero(~has)
    coords[ptr[straight]] = node_xy[edge_u[straight]]
    coords[ptr[straight] + 1] = node_xy[edge_v[straight]]
    curved = np.flatnonzero(has)
    coords[ranges(ptr[curved], counts[curved])] = geom_coords[:, :2]
    return EdgeTable(node_ids, node_xy, edge_u, edge_v, coords, ptr, crs)
