"""de Heredia's random walk with boundary reflection and high/low-mobility classes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, override

import numpy as np

from mobidfl.agents.mobility.base import MobilityContext, MobilityModel, register_mobility
from mobidfl.settings import PluginSettings, positive, setting, unit_interval


@dataclass(frozen=True, kw_only=True)
class RandomWalkSettings(PluginSettings):
    """de Heredia 2024's walk: direction probabilities and the two speed classes."""

    namespace: ClassVar[str] = "random_walk"
    q: str = setting(
        "0.25,0.25,0.25,0.25", "random_walk direction probabilities up,down,left,right",
        alias="walk_q",
    )
    hm_fraction: float = setting(
        0.0, "random_walk: proportion p of high-mobility agents (de Heredia 2024)", unit_interval,
        alias="hm_fraction",
    )
    s_max: float = setting(
        2.0, "random_walk: low-mobility speeds U(0, s_max) m/s", positive, alias="s_max"
    )
    beta: float = setting(
        1.75, "random_walk: high-mobility speeds U(beta s_max, 2 beta s_max)", alias="beta"
    )

    @property
    def walk_probabilities(self) -> tuple[float, ...]:
        """Probabilities of the directions up, down, left and right, parsed from ``q``."""
        return tuple(float(v) for v in self.q.split(","))

    @override
    def joint_check(self) -> tuple[tuple[str, ...], Any, str] | None:
        try:
            walk = self.walk_probabilities
        except ValueError:
            return ("q",), self.q, "four comma-separated numbers"
        if len(walk) != 4 or any(q < 0 for q in walk) or not math.isclose(sum(walk), 1.0):
            return ("q",), self.q, "four non-negative numbers that sum to 1"
        if self.beta <= 1.0:
            return ("beta",), self.beta, "a number > 1 (HM faster than LM, de Heredia 2024)"
        return None

# (dx, dy) for up, down, left, right: the order of q_i = [u_i, d_i, l_i, r_i]
# (de Heredia 2024, §5.1)
DIRECTIONS = np.array([[0.0, 1.0], [0.0, -1.0], [-1.0, 0.0], [1.0, 0.0]])


def reflect(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Fold positions back into [low, high]: de Heredia 2024, eq. 2, for any travelled distance.

    Eq. 2 reverses the velocity component when a move would cross a bound; folding the
    unbounded straight-line position is the same motion, also when one step crosses the
    box more than once.
    """
    width = high - low
    if width <= 0:
        return np.full_like(x, low)
    y = np.mod(x - low, 2.0 * width)
    return low + np.where(y > width, 2.0 * width - y, y)


def high_mobility_count(count: int, hm_fraction: float) -> int:
    """``ceil(p N)`` high-mobility clients (de Heredia's code; N = 48, p = 0.05 gives 3).

    The product is rounded to 9 decimals first so that float noise (0.2 * 45 =
    9.000000000000002) does not add a client.
    """
    return min(count, int(math.ceil(round(hm_fraction * count, 9))))


def draw_speeds(
    *, count: int, hm_fraction: float, s_max: float, beta: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Speeds by class (de Heredia 2024, §5.1 "Client speeds").

    Low mobility: U(0, s_max); high mobility: U(beta s_max, 2 beta s_max); a proportion
    ``hm_fraction`` (p) of the agents, chosen at random, is high-mobility: ``ceil(pN)``
    of them, as in the authors' code (:func:`high_mobility_count`).

    Returns
    -------
    tuple[np.ndarray, np.ndarray]
        (speeds, is_high_mobility)
    """
    hm = np.zeros(count, bool)
    hm[rng.choice(count, size=high_mobility_count(count, hm_fraction), replace=False)] = True
    low = rng.uniform(0.0, s_max, size=count)
    high = rng.uniform(beta * s_max, 2.0 * beta * s_max, size=count)
    return np.where(hm, high, low), hm


@register_mobility
class RandomWalk(MobilityModel):
    """de Heredia 2024, eqs. 1-2: a direction from q each step, constant speed, reflection.

    The box is the map's bounding box; positions start uniform in it (de Heredia's initial
    positions). Each step picks a direction with probabilities ``random_walk.q``, then moves
    ``s_i * step_s`` metres (eq. 1), reflecting at the bounds (eq. 2).
    """

    name = "random_walk"
    # Kinds it fits: de Heredia 2024: mobile clients (anything that moves).
    kinds = frozenset({"vehicle", "pedestrian", "uav"})
    settings_class = RandomWalkSettings
    options: RandomWalkSettings

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        rng = kwargs["rng"]
        west, south, east, north = self.world.bounds
        self.low = np.array([west, south])
        self.high = np.array([east, north])
        self.position = self.low + rng.random((self.count, 2)) * (self.high - self.low)
        self.speed, self.hm = draw_speeds(
            count=self.count,
            hm_fraction=self.options.hm_fraction,
            s_max=self.options.s_max,
            beta=self.options.beta,
            rng=rng,
        )

    # The MobilityModel hooks; each model fills them its own way (cf. dam.py).
    @override
    def speeds(self) -> np.ndarray:
        return self.speed

    @override
    def advance(self, ctx: MobilityContext) -> np.ndarray:
        q = np.asarray(self.options.walk_probabilities)
        direction = DIRECTIONS[ctx.rng.choice(4, size=self.count, p=q)]
        velocity = direction * self.speed[:, None]
        start = self.position
        out = np.empty((len(ctx.fractions), self.count, 2))
        for f, fraction in enumerate(ctx.fractions):
            free = start + velocity * (fraction * ctx.step_s)
            out[f, :, 0] = reflect(free[:, 0], self.low[0], self.high[0])
            out[f, :, 1] = reflect(free[:, 1], self.low[1], self.high[1])
        self.position = out[-1]
        return out

    @override
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "speed": self.speed.copy()}

    @override
    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.speed = np.asarray(state["speed"], float).copy()
