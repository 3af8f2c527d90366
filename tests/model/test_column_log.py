"""The run's step-by-step row logs (contacts, agent records) give the tables a list of
per-step DataFrames gave, while holding one array per column (no per-step objects)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mobidfl.model.outputs import ColumnLog


def _blocks(rng: np.random.Generator, count: int) -> list[dict[str, np.ndarray]]:
    out = []
    for step in range(count):
        rows = int(rng.integers(0, 4))  # empty steps too
        out.append({
            "step": np.full(rows, step, np.int64),
            "a": rng.integers(0, 9, rows),
            "d": rng.random(rows),
            "cls": np.where(rng.random(rows) < 0.5, "HM", "LM"),
        })
    return out


@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_log_equals_the_concatenated_frames(chunk: int) -> None:
    blocks = _blocks(np.random.default_rng(chunk), 40)
    log = ColumnLog(("step", "a", "d", "cls"), chunk=chunk)
    for b in blocks:
        log.append(b)
    want = pd.concat([pd.DataFrame(b) for b in blocks], ignore_index=True)
    pd.testing.assert_frame_equal(log.frame(), want)
    assert len(log) == len(want)
    # a checkpoint's blocks rebuild the same log, and it keeps growing from there
    again = ColumnLog(chunk=chunk)
    for b in log.blocks():
        again.append(b)
    more = _blocks(np.random.default_rng(99), 5)
    for b in more:
        again.append(b)
        log.append(b)
    pd.testing.assert_frame_equal(again.frame(), log.frame())


def test_columns_are_joined_every_chunk_appends() -> None:
    log = ColumnLog(chunk=4)
    for b in _blocks(np.random.default_rng(1), 9):
        log.append(b)
    assert len(log._pending) == 1  # 9 = 2 x 4 joined + 1 waiting
    assert set(log.blocks()[0]) == {"step", "a", "d", "cls"}


def test_an_empty_log_gives_the_columns_without_rows() -> None:
    frame = ColumnLog(("step", "a")).frame()
    assert list(frame.columns) == ["step", "a"] and len(frame) == 0
    assert ColumnLog().blocks() == []
