"""One home for core counts, the CPU's name and TOML values: their behaviour, and that the
config and sweep files round-trip through :mod:`tomllib`."""

from __future__ import annotations

import math
import os
import platform
import tomllib
from pathlib import Path

import pytest

from mobidfl.cores import cpu_model, idle_cores, unloaded_cores, usable_cores
from mobidfl.toml_text import toml_value


def test_core_counts_are_bounded_by_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    usable = usable_cores()
    assert usable == len(os.sched_getaffinity(0))
    assert 0.0 <= idle_cores(window_s=0.02) <= usable
    monkeypatch.setattr(os, "getloadavg", lambda: (usable + 5.0, 0.0, 0.0))
    assert unloaded_cores() == 1  # a loaded machine still gets one
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert unloaded_cores() == usable


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="no /proc/cpuinfo")
def test_cpu_model_is_cpuinfo_s_model_name_else_the_platform_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Prepare: the first model name line, read here independently
    first = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name"))  # fmt: skip
    # Execute / Assert: the name after the colon, stripped, first
    assert cpu_model().startswith(first.split(":", 1)[1].strip())

    # Execute / Assert: a VM's bare name gets its family and model numbers
    def cpuinfo(self: Path, *args: object, **kwargs: object) -> str:
        return ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                "model name\t: AMD EPYC\n\nprocessor\t: 1\ncpu family\t: 99\n")

    monkeypatch.setattr(Path, "read_text", cpuinfo)
    assert cpu_model() == "AMD EPYC (family 25, model 17)"

    def unreadable(self: Path, *args: object, **kwargs: object) -> str:
        raise OSError("no such file")

    # Execute / Assert: no cpuinfo -> what platform says, else "unknown"
    monkeypatch.setattr(Path, "read_text", unreadable)
    monkeypatch.setattr(platform, "processor", lambda: "x86_64")
    assert cpu_model() == "x86_64"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert cpu_model() == "unknown"


@pytest.mark.parametrize("value", [
    True, False, 0, -7, 2**63 - 1, 0.1, -2.5e-300, math.inf, -math.inf,
    "", "plain", 'quote " and \\ backslash', "new\nline\ttab\r", "\x00\x1f\x7f",
    "é ü 東京 😀", "[not a table]",
])
def test_every_value_reads_back(value: object) -> None:
    assert tomllib.loads(f"x = {toml_value(value)}\n")["x"] == value
