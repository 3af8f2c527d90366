"""Energy of a device per step: compute per kind and a rotary-wing UAV's flight.

Pure functions, vectorised over agents. Radio energy (transmit/receive power x airtime)
is in :class:`mobidfl.model.links.LinkPlan`; this module adds

* **compute**: training FLOPs x joules per FLOP of the device's class
  (:data:`J_PER_FLOP`, one value per agent kind: :func:`compute_energy`);
* **flight**: the propulsion power of a rotary-wing UAV at forward speed V (Zeng, Xu and
  Zhang, "Energy Minimization for Wireless Communication With Rotary-Wing UAV", IEEE Trans.
  Wireless Commun. 18(4), 2019, eq. 12, with the parameters of its Table I:
  :func:`rotary_wing_power`, :data:`ZENG_2019`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mobidfl.settings import AGENT_KINDS, kinds_where

__all__ = [
    "J_PER_FLOP",
    "ZENG_2019",
    "RotaryWing",
    "compute_energy",
    "flight_energy",
    "parse_kind_values",
    "rotary_wing_power",
]

J_PER_FLOP: dict[str, float] = {k.name: k.j_per_flop for k in AGENT_KINDS}
"""Joules per training FLOP per agent kind, from peak FLOP/s and power of a device of the
kind's class (data sheets; real training reaches a fraction of peak, so these are lower
bounds: set ``link.kind_j_per_flop`` for your device)."""


def parse_kind_values(text: str, kinds: tuple[str, ...]) -> dict[str, float]:
    """``"vehicle:1e-11,sensor:1.5e-10"`` -> value per kind (kinds left out keep defaults).

    Raises :class:`ValueError` naming what is allowed (a kind twice, an unknown kind, a
    negative or non-finite value).
    """
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        kind, sep, value = part.partition(":")
        if not sep or kind not in kinds:
            raise ValueError(f"KIND:VALUE pairs of {', '.join(kinds)}, e.g. vehicle:1e-11")
        if kind in out:
            raise ValueError(f"each kind once ({kind} twice)")
        try:
            number = float(value)
        except ValueError:
            raise ValueError("a number after KIND:") from None
        if not (math.isfinite(number) and number >= 0):
            raise ValueError("finite values >= 0")
        out[kind] = number
    return out


def compute_energy(
    flops: np.ndarray, kinds: np.ndarray, j_per_flop: dict[str, float]
) -> np.ndarray:
    """Joules of ``flops`` per agent at its kind's ``j_per_flop`` (0 for a kind not listed)."""
    flops = np.asarray(flops, float)
    rate = np.zeros(flops.shape)
    kinds = np.asarray(kinds)
    for kind, value in j_per_flop.items():
        rate[kinds == kind] = value
    return flops * rate


@dataclass(frozen=True, kw_only=True)
class RotaryWing:
    """Parameters of the rotary-wing power model (Zeng, Xu, Zhang 2019, Table I)."""

    weight_n: float = 20.0  # W, aircraft weight (N)
    air_density: float = 1.225  # rho (kg/m^3)
    rotor_radius_m: float = 0.4  # R
    rotor_area_m2: float = 0.503  # A = pi R^2
    blade_speed_rad_s: float = 300.0  # Omega, blade angular velocity
    solidity: float = 0.05  # s, rotor solidity
    drag_ratio: float = 0.6  # d0, fuselage drag ratio
    induced_correction: float = 0.1  # k, incremental correction to induced power
    profile_drag: float = 0.012  # delta, profile drag coefficient

    @property
    def tip_speed(self) -> float:
        """U_tip = Omega R (120 m/s)."""
        return self.blade_speed_rad_s * self.rotor_radius_m

    @property
    def blade_profile_power(self) -> float:
        """P0 = delta/8 rho s A Omega^3 R^3 (eq. 64): 79.86 W with Table I."""
        return (
            self.profile_drag / 8.0 * self.air_density * self.solidity * self.rotor_area_m2
            * self.blade_speed_rad_s**3 * self.rotor_radius_m**3
        )

    @property
    def induced_power(self) -> float:
        """Pi = (1 + k) W^(3/2) / sqrt(2 rho A) (eq. 64): 88.63 W with Table I."""
        return (
            (1.0 + self.induced_correction) * self.weight_n**1.5
            / math.sqrt(2.0 * self.air_density * self.rotor_area_m2)
        )

    @property
    def hover_induced_velocity(self) -> float:
        """v0 = sqrt(W / (2 rho A)), the mean rotor induced velocity in hover (4.03 m/s)."""
        return math.sqrt(self.weight_n / (2.0 * self.air_density * self.rotor_area_m2))


ZENG_2019 = RotaryWing()
"""Table I of Zeng, Xu, Zhang 2019 (a 20 N multirotor; hover power P0 + Pi = 168.49 W)."""


def rotary_wing_power(speed: np.ndarray, wing: RotaryWing = ZENG_2019) -> np.ndarray:
    """Propulsion power (W) of a rotary-wing UAV in level flight at ``speed`` m/s.

    Zeng, Xu, Zhang 2019, eq. 12::

        P(V) = P0 (1 + 3 V^2 / U_tip^2)                                 blade profile
             + Pi (sqrt(1 + V^4 / (4 v0^4)) - V^2 / (2 v0^2))^(1/2)     induced
             + 1/2 d0 rho s A V^3                                       parasite

    At V = 0 it is the hover power P0 + Pi.
    """
    v = np.asarray(speed, float)
    v0 = wing.hover_induced_velocity
    blade = wing.blade_profile_power * (1.0 + 3.0 * v**2 / wing.tip_speed**2)
    induced = wing.induced_power * np.sqrt(
        np.sqrt(1.0 + v**4 / (4.0 * v0**4)) - v**2 / (2.0 * v0**2)
    )
    parasite = 0.5 * wing.drag_ratio * wing.air_density * wing.solidity * wing.rotor_area_m2 * v**3
    return blade + induced + parasite


def flight_energy(
    speed: np.ndarray, kinds: np.ndarray, *, seconds: float, wing: RotaryWing = ZENG_2019
) -> np.ndarray:
    """Joules each agent spends flying for ``seconds`` at ``speed``.

    The rotary-wing power for UAVs (airborne the whole step, hovering at speed 0), 0 for every other
    kind.
    """
    power = rotary_wing_power(speed, wing)
    return np.where(np.isin(np.asarray(kinds), sorted(kinds_where(flies=True))),
                    power * float(seconds), 0.0)  # fmt: skip
