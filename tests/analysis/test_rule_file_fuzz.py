"""Fuzz what `--describe WORLD --rule FILE` reads: any regime_rule.json, of either schema,
mutated at random, is read whole (and predicts only registered policies) or refused with one
ConfigError line, never another exception (issue: a NaN cut predicting 'gossip' was printed
as a recommendation)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mobidfl.analysis.answer import load_answer, recommend
from mobidfl.analysis.regime_map import load_rule
from mobidfl.errors import ConfigError
from mobidfl.plugins import POLICIES

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "old": ROOT / "published" / "benchmark" / "mobility_skew" / "regime_rule.json",
    "v3": ROOT / "analysis" / "scenarios" / "studies" / "mobility_regimes.rule.json",
}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                   st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                   st.sampled_from(["psfl", "gossip", "dpsgd", "", "lo,lo"]),
                   st.lists(st.integers(-3, 3), max_size=3), st.just({}))


def _paths(data: object) -> list[tuple[object, ...]]:
    """Every key path into a JSON value (dicts and lists), the root excluded."""
    out: list[tuple[object, ...]] = []
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((k,))
            out += [(k, *p) for p in _paths(v)]
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((i,))
            out += [(i, *p) for p in _paths(v)]
    return out


def _set(data: object, path: tuple[object, ...], value: object) -> None:
    for key in path[:-1]:
        data = data[key]  # type: ignore[index]
    data[path[-1]] = value  # type: ignore[index]


def _read(path: Path) -> None:
    """What --describe --rule does with a file: the schema-3 answer, else the old rule."""
    answer = load_answer(str(path))
    if answer is not None:
        got = recommend(answer, {"neighbours_per_step": 3.0, "label_skew": 0.5,
                                 "samples_per_agent": 500.0})
        for rule in got["rules"].values():
            assert rule["policy"] in POLICIES and rule["constant"] in POLICIES
        return
    rule = load_rule(str(path))
    assert math.isfinite(rule.x_cut) and math.isfinite(rule.y_cut)
    assert all(p in POLICIES for p in rule.predict.values())


@pytest.mark.parametrize("which", sorted(SHIPPED))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_mutated_rule_file_is_read_whole_or_refused_in_one_line(which, data, tmp_path):
    # Prepare: the shipped file with one to three values replaced, or keys dropped
    base = json.loads(SHIPPED[which].read_text())
    mutated = copy.deepcopy(base)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(mutated)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        if data.draw(st.booleans()):
            _set(mutated, path, data.draw(VALUES))
        else:
            parent = mutated
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict):
                del parent[path[-1]]
    file = tmp_path / "rule.json"
    file.write_text(json.dumps(mutated, allow_nan=True))
    # Execute / Assert
    try:
        _read(file)
    except ConfigError as exc:
        assert "\n" not in str(exc) and "'--rule'" in str(exc)
