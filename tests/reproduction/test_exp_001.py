"""Reza et al. (``mobidfl reproduce dam_001 --scale ci``): the direction of Fig. 2."""

from __future__ import annotations

from tests.reproduce_ci import effects, run_ci, value

PAPER = "dam_001"


def test_ci_scale_shows_static_random_dam_dcm_order(tmp_path) -> None:
    # Execute: Fig. 2 at CI size (10 x 10 grid, 10 clients of which 3 mobile, R_m unbounded).
    per_run = run_ci(PAPER, seeds=(0,), folder=tmp_path)
    # Assert: one run per pattern, accuracies are percentages, and the paper's direction
    # Static < Random < DAM <= DCM (Reza et al., Fig. 2).
    assert sorted(per_run.variant) == ["DAM", "DCM", "Random", "Static"]
    assert all(0.0 < value(per_run, v, 0, "final_acc") < 100.0 for v in per_run.variant)
    assert (effects(PAPER, per_run, "moving at random beat all-static") > 0).all()
    assert (effects(PAPER, per_run, "DAM over Random") > 0).all()
    assert (effects(PAPER, per_run, "DCM at least as good as DAM") >= 0).all()
    # The report says so too.
    assert "| Fig. 2 | DAM over Random" in (tmp_path / "reproduction.md").read_text()
