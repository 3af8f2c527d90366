"""Reza et al. experiment at CI scale: the direction of Fig. 2 (analysis/experiments/dam_001.py)."""

from __future__ import annotations

import math

import torch

from analysis.experiments import dam_001


def test_ci_scale_shows_static_random_dam_dcm_order() -> None:
    # Prepare
    torch.set_num_threads(1)
    # Execute: Fig. 2 at CI size (10 x 10 grid, 10 clients of which 3 mobile, R_m = inf).
    frame = dam_001.run(scale="ci", seeds=(0,))
    # Assert: one run per pattern, accuracies are fractions, and the paper's direction
    # Static < Random < DAM <= DCM (Reza et al., Fig. 2).
    fig2 = frame[frame["figure"] == "fig2"].set_index("pattern")["accuracy"]
    assert sorted(fig2.index) == ["DAM", "DCM", "Random", "Static"]
    assert all(0.0 < v < 1.0 for v in fig2)
    assert fig2["Static"] < fig2["Random"] < fig2["DAM"] <= fig2["DCM"]
    # Mobile clients meet more static clients than static ones do (the mechanism).
    met = frame.set_index("pattern")["met_static"]
    assert met["Static"] < min(met["Random"], met["DAM"], met["DCM"])
    # The printed table has the paper's rows and the paired differences.
    shown = dam_001.table(frame, "fig2")
    assert list(shown.index[:4]) == ["Static", "Random", "DAM", "DCM"]
    assert shown.columns.tolist() == ["a=0.05 Rm=inf"]
    assert math.isclose(
        float(shown.loc["DCM - Random"].iloc[0]),
        100 * (fig2["DCM"] - fig2["Random"]),
        abs_tol=0.051,
    )
