"""``--batch-runs`` (issue 22 item 4): runs of a sweep as one program give each run's
``model.csv`` as the same run alone, with per-run early stops and learning-rate schedules."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import torch

from mobidfl.analysis.cli import main
from mobidfl.analysis.reproduce import paper_spec, reproduce, variant_settings
from mobidfl.analysis.sweep import Sweep, load_runs, read_manifest, run_sweep
from mobidfl.errors import ConfigError
from mobidfl.model.learning.backends import Hyper, hyper_stretches
from mobidfl.model.learning.multirun import (
    CUDA_SAMPLES_PER_CALL,
    RunGroup,
    group_chunk,
    lockstep,
    plan_groups,
)
from mobidfl.model.world import MobiDFLModel

SEEDS = (0, 1)
VARIANTS = ("LRU", "DFL")
TINY = {
    "vehicles": 8, "test_size": 100, "steps": 8, "eval_every": 1,
    # Cached-DFL's early stop and ReduceLROnPlateau, with patience short enough that the
    # four runs stop at different epochs and end with different learning rates.
    "early_stop_patience": 2, "lr_plateau_patience": 1,
}  # fmt: skip


def settings(variant: str, backend: str) -> dict:
    return variant_settings(paper_spec("003"), variant, scale="ci", extra={**TINY,
                            "backend": backend})  # fmt: skip


def alone(backend: str) -> dict[tuple[str, int], tuple[pd.DataFrame, float]]:
    """Each run built and run by itself: its model.csv and final learning rate."""
    torch.set_num_threads(1)
    out = {}
    for variant in VARIANTS:
        for seed in SEEDS:
            model = MobiDFLModel(**settings(variant, backend), seed=seed).run()
            out[variant, seed] = (model.model_table(), model.learner.engine.lr)
    return out


def assert_same(batched: pd.DataFrame, single: pd.DataFrame) -> None:
    """Same steps and columns; accuracies (every float) within 1e-5, the rest equal."""
    table = batched[single.columns].sort_values("step").reset_index(drop=True)
    assert list(table["step"]) == list(single["step"])
    for column in single.columns:
        a, b = table[column].to_numpy(), single[column].to_numpy()
        if a.dtype.kind == "f":
            # accuracies are counts of 100 test samples (a mean over 8 agents moves by
            # >= 1.25e-3 per sample), so 1e-5 asks for the same counts; loss_mean and
            # consensus may differ by the float32 order of runs batched together: measured
            # bit-equal on all of make test-cpu-matrix's 8 dispatches
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, equal_nan=True, err_msg=column)
        else:
            assert list(a) == list(b), column


def test_reproduce_batch_runs_equals_each_run_alone_on_the_loop_backend(tmp_path):
    # Arrange: 2 variants x 2 seeds of Cached-DFL's spec, each run alone
    single = alone("loop")
    ends = {key: int(t["step"].max()) for key, (t, _) in single.items()}
    assert len(set(ends.values())) > 1, ends  # the runs stop early at different epochs
    # Act: the same four runs as one program
    reproduce("003", out=tmp_path, scale="ci", seeds=SEEDS, variants=VARIANTS, processes=0,
              progress=False, check_first=False, extra={**TINY, "backend": "loop"},
              batch_runs=True)  # fmt: skip
    # Assert
    assert "--batch-runs" in (tmp_path / "reproduction.md").read_text()
    for variant in VARIANTS:
        folder = tmp_path / "runs" / variant
        rows = load_runs(folder)
        assert set(read_manifest(folder)["worker"].str.split(" ", n=1).str[1]) == {"batch of 4"}
        for seed in SEEDS:
            assert_same(rows[rows["seed"] == seed], single[variant, seed][0])


def test_sweep_batch_runs_on_the_batched_backend_keeps_each_runs_lr_and_stop(tmp_path):
    # Arrange: the same runs with vmap over runs x agents; each run's own lr at the end
    single = alone("batched")
    lrs = {key: lr for key, (_, lr) in single.items()}
    assert len(set(lrs.values())) > 1, lrs  # the plateau schedules differ between runs
    sweep = Sweep.from_dict({"base": settings("LRU", "batched"),
                             "grid": {"policy": ["cached_lru", "defedavg"]}, "seeds": list(SEEDS)})
    # Act
    manifest = run_sweep(sweep, tmp_path, batch_runs=True, progress=False)
    # Assert: one group of four, each run's table as alone
    assert set(manifest["status"]) == {"ok"}
    rows = load_runs(tmp_path)
    for policy, variant in (("cached_lru", "LRU"), ("defedavg", "DFL")):
        for seed in SEEDS:
            mine = rows[(rows["policy"] == policy) & (rows["seed"] == seed)]
            assert_same(mine, single[variant, seed][0])


def test_runs_without_a_shared_program_run_alone_and_a_failing_run_stops_no_other():
    # Arrange: two runs with the same learning settings, one with another batch size
    torch.set_num_threads(1)
    base = {**settings("DFL", "loop"), "steps": 3, "early_stop_patience": 0}
    models = [MobiDFLModel(**base, seed=0), MobiDFLModel(**base, seed=1),
              MobiDFLModel(**{**base, "batch_size": 8}, seed=2)]  # fmt: skip
    # Act
    together, single = plan_groups(models)
    group = RunGroup([models[i].learner.engine for i in together[0]])
    broken = models[together[0][0]]

    def fail() -> None:
        raise RuntimeError("a policy bug")

    broken.step = fail  # the first run fails at its first step
    errors: list = []
    worker = threading.Thread(target=lambda: errors.extend(
        lockstep([(models[i], 3) for i in together[0]], group)))
    worker.start()
    worker.join(timeout=120)
    # Assert
    assert (together, single) == ([[0, 1]], [2])
    assert not worker.is_alive()  # no deadlock: the failed run left the group
    assert "a policy bug" in errors[0] and errors[1] is None
    assert models[1].steps == 3 and group.calls["train"] == 3


def test_hyper_stretches_cut_rows_where_the_settings_change():
    a, b = Hyper(0.1, 0.0, 0.0, 0.0), Hyper(0.01, 0.0, 0.0, 0.0)
    assert hyper_stretches(a, 0, 5) == [(slice(0, 5), a)]
    rows = [a, a, b, b, b, a]
    assert hyper_stretches(rows, 0, 6) == [(slice(0, 2), a), (slice(2, 5), b), (slice(5, 6), a)]
    assert hyper_stretches(rows, 3, 3) == [(slice(0, 2), b), (slice(2, 3), a)]


def test_batch_runs_needs_the_local_backend(tmp_path):
    sweep = Sweep.from_dict({"base": {"steps": 1}, "seeds": [0]})
    with pytest.raises(ConfigError, match="batch-runs"):
        run_sweep(sweep, tmp_path, backend="ray", batch_runs=True, progress=False)


def test_reproduce_device_flag_clashing_with_set_device_fails_in_one_line(tmp_path, capsys):
    out = tmp_path / "never"
    code = main(["reproduce", "003", "--scale", "ci", "--out", str(out), "--batch-runs",
                 "--device", "cpu", "--set", "device=cpu", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--device" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_groups_vmap_on_cuda_covers_whole_runs_up_to_a_sample_budget():
    # Cached-DFL: 100 cars, batch 64 -> 512 agents per call (5 runs), never fewer than a run
    assert group_chunk(None, device="cuda", width=64, largest=100) == 512
    assert group_chunk(None, device="cuda", width=5000, largest=100) == 100  # full batches
    assert group_chunk(None, device="cpu", width=64, largest=100) == 64
    assert group_chunk(7, device="cuda", width=64, largest=100) == 7
    assert CUDA_SAMPLES_PER_CALL // 64 == 512
