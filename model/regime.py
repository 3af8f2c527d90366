"""Is this run a mobility study at all? Contact density and the contact regime.

Both ends make a mobility study moot: *saturated* (every agent meets most of the fleet each
step, so every policy sees nearly the same complete graph) and *isolated* (no agent ever met
another, so every agent trained alone). The CLI and sweeps warn with these; static agents
out of range of each other are counted by :func:`static_groups`.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

World = Any
"""The running :class:`mobidfl.model.world.MobiDFLModel` (not imported: that module imports this
one)."""

SATURATED_SHARE = 0.3
"""Mean neighbours above this share of the fleet: everyone meets everyone, mobility is moot."""


def density_summary(model: World) -> tuple[str, bool]:
    """One line on contact density over the steps so far, and whether it is saturated.

    Saturated = on average an agent is in contact with more than :data:`SATURATED_SHARE`
    of the fleet each step: then every policy sees nearly the same complete graph and
    mobility effects cannot appear (use a larger map, fewer agents or a shorter ``radius_m``).
    """
    table = model.model_table()
    moving = table[table["step"] > 0]
    if moving.empty:
        return "density: no step run yet", False
    neighbours = float(moving["neighbours_mean"].mean())
    share = float(moving["neighbours_share"].mean())
    met = float(table["met_share"].iloc[-1])
    text = (
        f"density: {neighbours:.2f} neighbours per agent per step ({share:.1%} of the "
        f"fleet), {met:.1%} of the fleet met by step {model.steps}"
    )
    per_kind = same_kind_shares(moving)
    if per_kind:
        text += "; same-kind: " + ", ".join(f"{k} {v:.1%}" for k, v in per_kind.items())
    return text, saturated(moving)


def contact_regime(model: World) -> str:
    """``"saturated"``, ``"isolated"`` or ``"mixing"``, over the steps run so far.

    Saturated: see :func:`density_summary`. Isolated: no agent was in range of another at
    any step, so every agent trained alone and no exchange policy ever ran (e.g. a preset's
    radius on a map far larger than its paper's world: use a smaller map, more agents or a
    larger ``radius_m``).
    """
    table = model.model_table()
    moving = table[table["step"] > 0]
    if moving.empty:
        return "mixing"
    if saturated(moving):
        return "saturated"
    if float(moving["neighbours_mean"].max()) == 0.0:
        return "isolated"
    return "mixing"


def static_groups(model: World) -> dict[str, int]:
    """Per kind whose agents never move: how many groups they form in the contact graph.

    Kinds whose policy no moving kind shares (DAM's UAVs carry models between static clients); the
    groups are those of the latest step's contact graph (one group = linked through in-range
    neighbours).

    Static agents out of range of each other can never exchange, whatever the policy, e.g.
    PSFL sensors placed over a real city's cells: its federations cannot span two groups,
    so they outnumber the areas (PSFL's grid is one group).
    """
    from scipy.sparse.csgraph import connected_components

    config = model.config
    moves = {  # a contact trace's agents stand still, but the trace carries them
        kind: mobility.max_step_distance(config.step_s) > 0
        or getattr(mobility, "gives_contacts", False)
        for kind, _, mobility in model.groups
    }
    carried = {config.policy_of(k) for k, moving in moves.items() if moving}
    groups = {}
    for kind, members, _ in model.groups:
        count = members.stop - members.start
        if count < 2 or moves[kind] or config.policy_of(kind) in carried:
            continue  # moving agents of the same policy carry models between groups
        block = model.adjacency[members, members]
        groups[kind] = int(connected_components(block, directed=False)[0])
    return groups


def saturated(moving: pd.DataFrame) -> bool:
    """Fleet or one kind above :data:`SATURATED_SHARE` on average.

    Over the ``model.csv`` rows of steps > 0.
    """
    shares = [float(moving["neighbours_share"].mean())]
    return max([*shares, *same_kind_shares(moving).values()]) > SATURATED_SHARE


def same_kind_shares(moving: pd.DataFrame) -> dict[str, float]:
    """Mean same-kind contact share per kind (the ``neighbours_share_<kind>`` columns)."""
    return {
        column.removeprefix("neighbours_share_"): float(moving[column].mean())
        for column in moving.columns
        if column.startswith("neighbours_share_") and moving[column].notna().any()
    }
