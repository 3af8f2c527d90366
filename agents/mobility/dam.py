"""Distribution-aware mobility of mobile clients on the grid (Reza et al.: DAM and DCM).

Reza et al. (§IV-B) let mobile clients (UAVs) steer by the static clients' data:
from every cell ``L`` a mobile client would see the pooled label distribution of the static
clients within ``R_c`` plus its own (eq. 4); it draws a destination with probability
proportional to how far that distribution is from the one where it stands (eqs. 5-6, DAM) or,
for DCM, only among the cluster centres of Alg. 1 (eq. 9); it keeps the destination until it
gets there (eq. 8) and flies toward it at most ``R_m`` cells per step (eq. 7).

As in the paper, mobile clients know the static clients' cells and label histograms (read
through the world view: groups with a ``static`` mobility, ``label_hist``;
:mod:`mobidfl.agents.views`). Radii: ``R_c = radius_m / cell_m`` and ``R_m = dam.rm_cells``; both in
cells, Euclidean between cell centres. The maths lives in
:mod:`mobidfl.agents.mobility.distribution`; this file only wires it to the model.
"""

from __future__ import annotations

from typing import Any, cast, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, register_mobility
from mobidfl.agents.mobility.distribution import (
    DistributionDistance,
    dam_probabilities,
    dcm_centres,
    dcm_probabilities,
    label_distribution_at_cells,
    next_destination,
    step_toward,
)
from mobidfl.agents.mobility.random_grid import GridMobility
from mobidfl.agents.views import WorldView
from mobidfl.errors import ConfigError

NO_DESTINATION = -1
"""Destination entry before the first draw (eq. 8's first round draws at once)."""

RC_SLACK = 1e-9
"""Relative slack on ``radius_m / cell_m``: a cell exactly ``R_c`` away counts as in range
(the paper's ``<= R_c``) even when metres-to-cells division rounds just below."""


def world_of(ctx: MobilityContext, name: str) -> WorldView:
    """The context's world view; DAM/DCM cannot steer without one (they read C_s)."""
    if ctx.world is None:
        msg = f"mobility {name!r} reads the static clients: advance it with a world view"
        raise ValueError(msg)
    return ctx.world


class DistributionAwareGrid(GridMobility):
    """Shared machinery of DAM and DCM: eq. 4 distributions, eq. 8 memory, eq. 7 steps.

    Subclasses say where destinations may lie and with which probabilities
    (:meth:`destination_choices`).

    Attributes
    ----------
    destination
        ``(count,)`` cell each member heads for (``NO_DESTINATION`` before the
        first step).
    """

    name = "distribution_aware_base"
    # Kinds it fits: Reza et al.: DAM/DCM steer mobile clients (UAVs) over the cells of static ones.
    kinds = frozenset({"uav"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.settings.learning:
            raise ConfigError(
                f"{self.kind}.mobility",
                self.name,
                "random_grid or static when learning = false (dam/dcm steer by the clients' "
                "label histograms)",
            )
        self.destination = np.full(self.count, NO_DESTINATION, dtype=np.int64)
        self._distributions: np.ndarray | None = None  # (count, cells, Y), built once

    # --- what the mobile clients know (Reza et al. §IV-B assumption) -------------------------
    @property
    def rc_cells(self) -> float:
        """Communication radius ``R_c`` in cells (``radius_m / cell_m``)."""
        return float(self.settings.radius_m) / float(self.world.grid.cell_m) * (1.0 + RC_SLACK)

    @property
    def distance(self) -> DistributionDistance:
        """Eq. 5 distance (setting ``dam.distance``; paper: ``l2``)."""
        return cast(DistributionDistance, self.options.distance)

    def members_in(self, world: WorldView) -> np.ndarray:
        """Agent indices of this group in the model's arrays (one group per kind)."""
        members = world.members_of(self.kind)
        if members.size == 0:
            raise ConfigError(f"{self.kind}.mobility", self.name, "a mobility group of the model")
        return members

    @staticmethod
    def static_clients(world: WorldView) -> np.ndarray:
        """Indices of the static clients ``C_s``: members of groups with ``static`` mobility."""
        groups = [
            np.arange(group.members.start, group.members.stop)
            for group in world.groups
            if group.static
        ]
        return np.concatenate(groups) if groups else np.empty(0, dtype=np.int64)

    def static_cells(self, world: WorldView) -> np.ndarray:
        """Cell of every static client (their initial location ``L_j^(0)``)."""
        idx = self.static_clients(world)
        return self.world.grid.cell_of(world.position[idx]).astype(np.int64)

    def distributions(self, world: WorldView) -> np.ndarray:
        """``(count, cells, Y)``: eq. 4 from every cell, one slice per member.

        Built on first use and kept: static clients do not move and label histograms do not
        change during a run.
        """
        if self._distributions is None:
            if world.label_hist is None:
                raise ConfigError(
                    f"{self.kind}.mobility", self.name, "a model with learning = true"
                )
            hist = np.asarray(world.label_hist, dtype=np.float64)
            static = self.static_clients(world)
            cells = self.static_cells(world)
            self._distributions = np.stack(
                [
                    label_distribution_at_cells(
                        cells,
                        hist[static],
                        hist[i],
                        grid=self.grid_shape,
                        rc=self.rc_cells,
                    )
                    for i in self.members_in(world)
                ]
            )
        return self._distributions

    # --- movement -------------------------------------------------------------------------
    def destination_choices(
        self, ctx: MobilityContext, member: int, distributions: np.ndarray, cell: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Candidate cells and their probabilities for a fresh destination draw."""
        raise NotImplementedError

    def next_cells(self, ctx: MobilityContext) -> np.ndarray:
        """Eq. 8 (keep or redraw the destination), then eq. 7 (one step of at most R_m)."""
        dists = self.distributions(world_of(ctx, self.name))
        rm = float(self.options.rm_cells)
        new = np.empty(self.count, dtype=np.int64)
        for i in range(self.count):
            cell = int(self.cell[i])
            previous = int(self.destination[i])
            if previous in (NO_DESTINATION, cell):
                candidates, probs = self.destination_choices(ctx, i, dists[i], cell)
                target = next_destination(
                    cell,
                    None if previous == NO_DESTINATION else previous,
                    candidates=candidates,
                    probabilities=probs,
                    rng=ctx.rng,
                )
            else:
                target = previous
            self.destination[i] = target
            new[i] = step_toward(cell, target, rm_cells=rm, grid=self.grid_shape)
        return new

    # --- checkpoints ----------------------------------------------------------------------
    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "destination": self.destination.copy()}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.destination = np.asarray(state["destination"], dtype=np.int64).copy()


@register_mobility
class DAM(DistributionAwareGrid):
    """Reza et al., eqs. 4-8: destinations anywhere on the grid, ``p(L) ∝ d(L, L_cur)`` (eq. 6)."""

    name = "dam"

    @override
    def destination_choices(
        self, ctx: MobilityContext, member: int, distributions: np.ndarray, cell: int
    ) -> tuple[np.ndarray, np.ndarray]:
        probs = dam_probabilities(distributions, cell, distance=self.distance)
        return np.arange(distributions.shape[0]), probs


@register_mobility
class DCM(DistributionAwareGrid):
    """Reza et al., Alg. 1 + eq. 9: destinations only at the static clients' cluster centres.

    The centres are computed once, on the first step (static clients never move), with the
    model's generator for Alg. 1's random tie-breaks, and kept in the checkpoint state.
    """

    name = "dcm"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.centres: np.ndarray | None = None

    def cluster_centres(self, ctx: MobilityContext) -> np.ndarray:
        """Alg. 1 centres over the static clients' cells (computed on first use)."""
        if self.centres is None:
            cells = self.static_cells(world_of(ctx, self.name))
            if cells.size == 0:
                raise ConfigError(
                    f"{self.kind}.mobility",
                    self.name,
                    "at least one static client (Alg. 1 clusters static clients), e.g. sensors",
                )
            self.centres = np.asarray(
                dcm_centres(cells, grid=self.grid_shape, rc=self.rc_cells, rng=ctx.rng),
                dtype=np.int64,
            )
        return self.centres

    @override
    def destination_choices(
        self, ctx: MobilityContext, member: int, distributions: np.ndarray, cell: int
    ) -> tuple[np.ndarray, np.ndarray]:
        centres = self.cluster_centres(ctx)
        probs = dcm_probabilities(distributions, cell, centres, distance=self.distance)
        return centres, probs

    @override
    def state_dict(self) -> dict[str, Any]:
        centres = None if self.centres is None else self.centres.copy()
        return {**super().state_dict(), "centres": centres}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        centres = state.get("centres")
        self.centres = None if centres is None else np.asarray(centres, np.int64).copy()


# Lower-case aliases: the registry names (``uav.mobility=dam`` / ``dcm``).
dam = DAM
dcm = DCM
