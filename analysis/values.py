"""Checks of one value read from a file the bench wrote (a rule's cut, a predicted policy).

A leaf of :mod:`mobidfl.analysis`: the readers of ``regime_rule.json``
(:mod:`mobidfl.analysis.regime_map`, :mod:`mobidfl.analysis.answer`) and of the other
bench files (:mod:`mobidfl.analysis.bench_files`) share these without importing each other.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite_number", "registered_policy"]


def finite_number(value: Any, where: str) -> float:
    """``value`` as a finite float (a JSON number, not a bool); else ValueError saying why."""
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(float(value)):
        raise ValueError(f"{where} = {value!r} is not a finite number")
    return float(value)


def registered_policy(name: Any, where: str) -> str:
    """``name`` if it is a registered policy (plug-ins included); else ValueError saying why.

    WHY: a rule predicting a policy that does not exist would be printed as a recommendation.
    """
    from mobidfl.plugins import POLICIES

    if not isinstance(name, str) or name not in POLICIES:
        raise ValueError(f"{where} = {name!r} is not a registered policy ("
                         + ", ".join(POLICIES.names()) + ")")
    return name
