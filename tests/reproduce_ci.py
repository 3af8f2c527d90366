"""Run a ``mobidfl reproduce`` spec at its ``ci`` scale for the tests' direction checks.

WHY: the paper experiments are specs in :mod:`mobidfl.analysis.reproduce`; the tests run the same
specs (at the scale made for them) instead of scripts of their own, so what a test checks is
what ``mobidfl reproduce`` reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from mobidfl.analysis.reproduce import claim_effects, paper_spec, reproduce


def run_ci(paper: str, *, seeds: Sequence[int], folder: Path) -> pd.DataFrame:
    """``per_run.csv`` of ``paper`` reproduced at scale ``ci`` over ``seeds`` in ``folder``."""
    torch.set_num_threads(1)
    reproduce(paper, out=folder, scale="ci", seeds=seeds, processes=0, progress=False,
              check_first=False)  # fmt: skip
    return pd.read_csv(folder / "per_run.csv")


def effects(paper: str, per_run: pd.DataFrame, claim_text: str) -> np.ndarray:
    """The per-seed effects of the one claim of ``paper`` whose text contains ``claim_text``."""
    claims = [c for c in paper_spec(paper).claims if claim_text in c.text]
    assert len(claims) == 1, f"{claim_text!r} names {len(claims)} claims of {paper}"
    return claim_effects(claims[0], per_run)


def value(per_run: pd.DataFrame, variant: str, seed: int, metric: str) -> float:
    """One run's metric."""
    row = per_run[(per_run.variant == variant) & (per_run.seed == seed)]
    assert len(row) == 1, (variant, seed)
    return float(row[metric].iloc[0])
