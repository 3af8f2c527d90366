"""Verdicts under controlled floating-point perturbations (setting ``perturb``).

The perturbations change rounding only (checked here bit by bit), and the published verdict
of a DAM claim at CI scale survives both of them (``published/reproduction/stability.csv``,
written by ``python -m mobidfl.analysis.stability --publish``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch

from mobidfl.analysis.stability import (
    CHAOTIC,
    STABILITY_CSV,
    STABLE,
    claim_stability,
    merged_rows,
    seeds_for_sign,
    stability,
)
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.params import (
    average_stacks,
    combine_snapshots,
    mix_stacks,
    mix_stacks_fp64,
)
from mobidfl.model.learning.partition import partition_shards
from mobidfl.model.maths.mixing import dpsgd_weights


def _engine(ds, perturb: str):
    parts = partition_shards(ds.train_labels, 4, rng=np.random.default_rng(0))
    t = TrainingSettings(net="mlp", lr=0.05, batch_size=16, local_steps=2, seed=3,
                         perturb=perturb)  # fmt: skip
    return make_engine("loop", t, dataset=ds, parts=parts)


def test_init_last_bit_is_numpy_nextafter_toward_inf_on_every_initial_parameter(ds):
    # Execute
    plain, nudged = _engine(ds, "none"), _engine(ds, "init_last_bit")
    # Assert: every value is exactly one ulp up, as numpy.nextafter(x, +inf) gives it
    for a, b in zip(plain.params, nudged.params, strict=True):
        want = np.nextafter(a.numpy(), np.float32(np.inf))
        assert np.array_equal(b.numpy(), want)
        assert not torch.equal(a, b)


def test_fp64_aggregate_rounds_the_float64_product_once_and_changes_only_rounding(ds):
    # Prepare: four different models and a ring's D-PSGD weights
    e = _engine(ds, "none")
    e.train()
    n = 4
    ring = np.roll(np.eye(n, dtype=bool), 1, axis=1)
    w = dpsgd_weights(sp.csr_matrix(ring | ring.T))
    fp32 = [p.clone() for p in e.params]
    fp64 = [p.clone() for p in e.params]
    # Execute
    mix_stacks(fp32, w, device=torch.device("cpu"))
    mix_stacks_fp64(fp64, w, device=torch.device("cpu"))
    # Assert: the float64 product rounded once, within a few ulps of the float32 mix
    dense = torch.tensor(w.toarray(), dtype=torch.float64)
    for old, x32, x64 in zip(e.params, fp32, fp64, strict=True):
        want = (dense @ old.reshape(n, -1).double()).reshape(old.shape).float()
        assert torch.equal(x64, want)
        assert torch.allclose(x32, x64, rtol=1e-5, atol=1e-7)


def test_fp64_average_and_combine_round_the_float64_sum_once(ds) -> None:
    e = _engine(ds, "none")
    e.train()
    cpu = torch.device("cpu")
    weights = np.array([3.0, 1.0, 2.0, 5.0])
    avg = average_stacks(e.params, np.arange(4), weights, device=cpu, fp64=True)
    snaps = [tuple(p[i].clone() for p in e.params) for i in range(4)]
    comb = combine_snapshots(snaps, list(weights / weights.sum()), n_layers=len(e.params),
                             device=cpu, fp64=True)  # fmt: skip
    w64 = torch.tensor(weights / weights.sum(), dtype=torch.float64)
    for layer, p in enumerate(e.params):
        want = torch.tensordot(w64, p.double(), dims=1).float()
        assert torch.equal(avg[layer], want) and torch.equal(comb[layer], want)
        assert avg[layer].dtype == torch.float32


def test_perturb_is_a_run_setting_and_refuses_other_values() -> None:
    assert Config.from_settings({"perturb": "fp64_aggregate"}).perturb == "fp64_aggregate"
    with pytest.raises(ConfigError, match="perturb"):
        Config.from_settings({"perturb": "last_bit"})


def test_claim_stability_marks_a_verdict_that_moves() -> None:
    assert claim_stability("holds", {"init_last_bit": "holds", "fp64_aggregate": "holds"}) == STABLE
    moved = {"init_last_bit": "holds", "fp64_aggregate": "direction only"}
    assert claim_stability("holds", moved) == CHAOTIC


def test_seeds_for_sign_worked_by_hand() -> None:
    # effects 1 and 3: mean 2, sd sqrt(2). t_{0.975} sqrt(2) / sqrt(n) <= 2 first at n = 5:
    # n = 4: 3.182 x 1.414 / 2 = 2.25; n = 5: 2.776 x 1.414 / 2.236 = 1.76
    assert seeds_for_sign([1.0, 3.0]) == "5"
    assert seeds_for_sign([1.0, -1.0]) == ""  # mean 0: nothing to estimate
    assert seeds_for_sign([2.0, 2.0, 2.0]) == "3"  # no spread: the fewest seeds a verdict reads
    # mean -0.05, sd 1.48: about (2 x 1.48 / 0.05)^2 = 3,500 seeds
    assert seeds_for_sign([1.0, -1.1]) == "> 100"
    # mean 0.0032, sd 0.0123: (t x 0.0123 / 0.0032)^2 crosses n at 61
    assert seeds_for_sign([0.01, -0.011, 0.0105]) == "61"


def test_dam_claim_keeps_its_published_verdict_under_both_perturbations(tmp_path) -> None:
    # Prepare: the published CI-scale verdict of "DAM over Random" and its seeds
    torch.set_num_threads(1)
    published = pd.read_csv(STABILITY_CSV, keep_default_na=False, dtype=str)
    row = published[(published.paper == "dam_001") & (published.scale == "ci")
                    & (published.claim == "DAM over Random (alpha = 0.05)")].iloc[0]  # fmt: skip
    seeds = [int(s) for s in row.seeds.split()]
    assert len(seeds) >= 2
    # Execute: the claim's two variants, unperturbed and under each perturbation
    table = stability("dam_001", out=tmp_path, scale="ci", seeds=seeds,
                      claims=["DAM over Random"])  # fmt: skip
    # Assert: each arm really ran other arithmetic (a loss differs in some bit) ...
    def losses(arm: str) -> np.ndarray:
        files = sorted((tmp_path / arm / "runs" / "DAM" / "runs").glob("*.parquet"))
        return np.concatenate([pd.read_parquet(f)["loss_mean"].to_numpy() for f in files])

    for arm in ("init_last_bit", "fp64_aggregate"):
        assert not np.array_equal(losses("none"), losses(arm), equal_nan=True), arm
    # ... and the verdict is the published one in every arm
    (got,) = table.to_dict("records")
    assert got["verdict"] == row.verdict
    assert got["verdict init_last_bit"] == row.verdict
    assert got["verdict fp64_aggregate"] == row.verdict
    assert got["stability"] == STABLE
    assert got["arms that changed the runs"] == "init_last_bit, fp64_aggregate"


def test_stability_page_is_generated_from_the_published_data(monkeypatch) -> None:
    # The page's tables are regenerated from published/ (stability.csv, cross-CPU records)
    from mobidfl.analysis.stability import main
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    assert main(["--page", "--check"]) == 0, "run python -m mobidfl.analysis.stability --page"


def test_chaotic_claims_are_bold_on_the_page(tmp_path) -> None:
    from mobidfl.analysis.stability import stability_table

    rows = pd.DataFrame([{"claim": "a", "stability": STABLE}, {"claim": "b", "stability": CHAOTIC}])
    rows.to_csv(tmp_path / "s.csv", index=False)
    table = stability_table(tmp_path / "s.csv")
    assert f"| b | **{CHAOTIC}** |" in table and "| a | stable |" in table


def test_cross_cpu_record_names_the_machine_and_refuses_a_bad_device(capsys) -> None:
    from validation.cross_cpu import machine, main, slug

    info = machine("cpu")
    assert info["model"] and isinstance(info["flags"], list) and info["torch_threads"] >= 1
    assert slug({"model": "Intel(R) Xeon(R) Processor"}) == "intel_r_xeon_r_processor"
    assert main(["--device", "tpu"]) == 2
    assert "--device" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["--device", "cuda"]) == 2


def test_cross_cpu_table_lists_per_claim_the_machines_that_agree(tmp_path) -> None:
    import json

    from mobidfl.analysis.stability import cross_cpu_table

    def record(name: str, verdict: str) -> dict:
        claim = {"paper": "dam_001", "claim": "DAM over Random", "published": "holds",
                 "verdict": verdict}  # fmt: skip
        return {"cpu": {"model": name}, "claims": [claim]}

    (tmp_path / "a.json").write_text(json.dumps(record("Zen 3", "holds")))
    (tmp_path / "b.json").write_text(json.dumps(record("Zen 5", "fails")))
    table = cross_cpu_table(tmp_path)
    assert "| dam_001 | DAM over Random | holds | Zen 3 (holds) | Zen 5 (fails) |" in table
    assert cross_cpu_table(tmp_path / "none").startswith("No CPU")


def test_publishing_one_scale_keeps_the_rows_of_another(tmp_path) -> None:
    # Prepare: a published table of two claims at ci and one at small
    path = tmp_path / "stability.csv"
    pd.DataFrame({"paper": ["dam_001", "dam_001", "dam_001"], "claim": ["a", "b", "a"],
                  "scale": ["ci", "ci", "small"], "verdict": ["holds", "fails", "undecided"]}
                 ).to_csv(path, index=False)
    # Execute: claim a measured again at small
    new = pd.DataFrame({"paper": ["dam_001"], "claim": ["a"], "scale": ["small"],
                        "verdict": ["direction only"]})
    merged = merged_rows(new, path)
    # Assert: both ci rows kept as they were, the small row replaced, nothing duplicated
    assert merged.values.tolist() == [["dam_001", "a", "ci", "holds"],
                                       ["dam_001", "b", "ci", "fails"],
                                       ["dam_001", "a", "small", "direction only"]]
    assert merged_rows(new, tmp_path / "none.csv") is new  # nothing published yet


def test_the_published_small_check_is_its_runs_verdicts() -> None:
    # Prepare: the small-scale rows of the stability table and the arms' published folders
    published = pd.read_csv(STABILITY_CSV, keep_default_na=False, dtype=str)
    small = published[published.scale == "small"]
    root = STABILITY_CSV.parent / "stability_small"
    assert len(small), "the DAM/DCM small-scale check is published"
    for _, row in small.iterrows():
        for arm, column in (("none", "verdict"), ("init_last_bit", "verdict init_last_bit"),
                            ("fp64_aggregate", "verdict fp64_aggregate")):
            # Execute: the arm's own verdicts.csv, written by its reproduction
            verdicts = pd.read_csv(root / row["paper"] / arm / "verdicts.csv",
                                   keep_default_na=False, dtype=str).set_index("claim")
            # Assert: the table says what each arm's runs gave
            assert verdicts.loc[row["claim"], "verdict"] == row[column]
        none = pd.read_csv(root / row["paper"] / "none" / "verdicts.csv",
                           keep_default_na=False, dtype=str).set_index("claim")
        assert none.loc[row["claim"], "MobiDFL (mean ± std)"] == row["effect (mean ± std)"]
