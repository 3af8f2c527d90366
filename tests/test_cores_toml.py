"""One home for core counts and for TOML values: their behaviour, and that the config and
sweep files round-trip through :mod:`tomllib`."""

from __future__ import annotations

import math
import os
import tomllib

import pytest

from mobidfl.cores import idle_cores, unloaded_cores, usable_cores
from mobidfl.toml_text import toml_value


def test_core_counts_are_bounded_by_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    usable = usable_cores()
    assert usable == len(os.sched_getaffinity(0))
    assert 0.0 <= idle_cores(window_s=0.02) <= usable
    monkeypatch.setattr(os, "getloadavg", lambda: (usable + 5.0, 0.0, 0.0))
    assert unloaded_cores() == 1  # a loaded machine still gets one
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert unloaded_cores() == usable


@pytest.mark.parametrize("value", [
    True, False, 0, -7, 2**63 - 1, 0.1, -2.5e-300, math.inf, -math.inf,
    "", "plain", 'quote " and \\ backslash', "new\nline\ttab\r", "\x00\x1f\x7f",
    "é ü 東京 😀", "[not a table]",
])
def test_every_value_reads_back(value: object) -> None:
    assert tomllib.loads(f"x = {toml_value(value)}\n")["x"] == value
