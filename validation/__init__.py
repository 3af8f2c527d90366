"""Differential validation: the seed papers' own code run beside MobiDFL on the same inputs.

Each case module (``validation/<case>.py``) exposes ``run(*, size: str, seeds: int, out: Path)
-> list[Row]`` and its reference's name in ``REFERENCE``. ``python -m validation`` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass

CASES: tuple[str, ...] = ("cached_dfl", "heredia", "ns3_link", "psfl")
"""Case modules, in the order the report prints them."""


@dataclass(frozen=True)
class Row:
    """One compared quantity: the reference's value, MobiDFL's, and the verdict.

    ``tolerance`` says what "agree" means for this quantity (e.g. "within 5 %", "within x1.25",
    "max abs diff <= 1e-5"); ``verdict`` is ``agree``, ``differs`` or ``explained`` (differs by a
    named, cited mechanism written in ``note``) or ``skipped`` (the reference cannot run here,
    e.g. an optional extra not installed; ``note`` says how to get it).
    """

    case: str
    quantity: str
    reference: str
    mobidfl: str
    tolerance: str
    verdict: str
    note: str = ""
