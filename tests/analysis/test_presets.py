"""Paper presets, policies that bring what they need, and `mobidfl presets/reproduce` parts
(issue 12)."""

from __future__ import annotations

import re
import tomllib
from importlib import resources

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.cli import main
from mobidfl.analysis.reproduce import (
    PAPERS,
    Claim,
    claim_effects,
    claim_verdict,
    run_metrics,
    seeds_to_decide,
)
from mobidfl.analysis.stats import format_ci, mean_ci
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, load_preset, preset_names
from mobidfl.model.config.toml_files import _resolve_auto_dataset as resolve_auto_dataset
from mobidfl.model.world import MobiDFLModel

TINY = {"steps": 1, "test_size": 50, "model": "mlp", "local_steps": 1, "map": "nyc_uws",
        "vehicles": 0, "pedestrians": 0, "sensors": 0, "uavs": 0}


# --- policies and mobility models bring what they need ------------------------------------------
def test_fedavg_weighted_on_dirichlet_005_runs_with_the_default_batch():
    # Prepare: issue 12's first refusal (20 agents, default batch 16 > smallest partition)
    settings = dict(TINY, vehicles=20, policy="fedavg_weighted", partition="dirichlet",
                    dirichlet_alpha=0.05, batch_size=16)
    # Execute
    model = MobiDFLModel(**settings).run()
    # Assert: some agent holds fewer samples than B, and it trained with min(B, |D_i|)
    engine = model.learner.engine
    assert engine.data_sizes.min() < 16
    assert engine.batch_sizes.tolist() == np.minimum(engine.data_sizes, 16).tolist()
    assert np.isfinite(model.model_table().acc_mean.iloc[-1])


def test_mofel_without_route_mobility_is_refused_in_one_line_and_changes_nothing():
    # Execute: a policy never changes the world, so MoFeL does not bring its mobility
    with pytest.raises(ConfigError) as err:
        Config.from_settings({"vehicle.policy": "mofel", "vehicles": 10})
    config = Config.from_settings(
        {"vehicle.policy": "mofel", "vehicles": 10, "vehicle.mobility": "route"}
    )
    # Assert: one line naming the setting and what MoFeL needs; given, it runs as given
    message = str(err.value)
    assert message.startswith("setting 'vehicle.mobility' = 'manhattan' is not allowed: 'route'")
    assert "vehicle policy mofel" in message and "\n" not in message
    # nothing derived but the default data set's choice (auto:fashion_mnist|mnist5k)
    assert config.vehicle.mobility == "route" and config.derived_settings() <= {"dataset"}
    assert config.setting_origins()["vehicle.mobility"] == "user"


def test_explicit_contrary_mobility_fails_naming_the_one_setting():
    with pytest.raises(ConfigError) as err:
        Config.from_settings({"vehicle.policy": "mofel", "vehicle.mobility": "manhattan"})
    message = str(err.value)
    assert "'vehicle.mobility'" in message and "route" in message and "\n" not in message


def test_psfl_on_30_sensors_keeps_the_world_and_its_preset_writes_psfls():
    # Prepare: issue 12's third case, then the same sensors under their default policy
    config = Config.from_settings({"sensor.policy": "psfl", "sensors": 30, "vehicles": 0})
    base = Config.from_settings({"sensors": 30, "vehicles": 0})
    preset = Config.from_settings(preset="psfl_004")
    # Assert: the policy changed nothing else (partition, radius); PSFL's world is the
    # preset's, written there: area labels and the 8-neighbourhood, 1.5 cells
    assert config.sensor.mobility == "static"
    assert config.partition_of("sensor") == base.partition_of("sensor") == "shards"
    assert config.radius_m == base.radius_m == 100.0
    assert preset.partition_of("sensor") == "area"
    assert preset.radius_m == pytest.approx(1.5 * preset.cell_m)
    assert {"partition", "radius_m"} <= set(load_preset("psfl_004").settings)


def test_mofel_run_with_route_mobility_and_no_other_settings_starts():
    # Prepare / Execute: route mobility, which MoFeL needs, given; the rest defaults
    model = MobiDFLModel(**dict(TINY, vehicles=8), vehicle_policy="mofel", servers=2, areas=2,
                         vehicle_mobility="route")
    model.run()
    # Assert
    assert model.config.vehicle.mobility == "route"
    assert "ntc" in model.model_table()


# --- presets ------------------------------------------------------------------------------
def test_every_preset_resolves_and_every_value_names_its_source():
    for name in preset_names():
        # Prepare
        text = resources.files("mobidfl.model").joinpath("presets", f"{name}.toml").read_text()
        # Execute
        config = Config.from_settings(preset=name)
        # Assert: every setting line carries a comment (its source); all settings known
        for line in text.splitlines():
            if re.match(r"^[a-z_]+\s*=", line) and not line.startswith(
                ("description", "paper", "substitutes")
            ):
                assert "#" in line, f"{name}: no source for `{line}`"
        assert load_preset(name).description and load_preset(name).paper
        assert config.preset == name and config.dataset in ("mnist5k", "mnist", "cifar10",
                                                              "fashion_mnist", "emnist_letters")
    assert {"mobility_000", "dam_001", "mofel_002", "cached_dfl_003", "psfl_004"} <= set(
        preset_names()
    )


def test_explicit_values_override_the_preset_and_the_rest_come_from_it():
    # Execute
    config = Config.from_settings(preset="cached_dfl_003", lr=0.5)
    # Assert
    assert config.lr == 0.5
    assert (config.vehicles, config.cache_size, config.tau_max, config.batch_size) == (
        100, 10, 5, 64)
    assert config.updated(preset="").vehicles == Config().vehicles  # preset values undone


def test_auto_dataset_falls_back_to_the_offline_substitute(tmp_path):
    assert resolve_auto_dataset("auto:cifar10|mnist5k", str(tmp_path)) == "mnist5k"
    with pytest.raises(ConfigError, match="dataset"):
        resolve_auto_dataset("auto:imagenet|mnist5k", None)


def test_cli_run_with_preset_records_preset_and_resolved_values(tmp_path):
    # Prepare
    out = tmp_path / "run"
    # Execute: the DAM preset (full batch) shortened with --set
    code = main(["run", "--preset", "dam_001", "--out", str(out), "--quiet",
                 "--set", "steps=2", "--set", "model=mlp", "--set", "test_size=50"])
    # Assert
    assert code == 0
    written = tomllib.loads((out / "config.toml").read_text())
    assert written["preset"] == "dam_001" and written["batch_size"] == 0
    assert written["steps"] == 2 and written["uav"]["mobility"] == "dcm"
    again = Config.from_toml(out / "config.toml")  # re-runnable: same resolved values
    assert again.to_dict() == Config.from_settings(
        preset="dam_001", steps=2, model="mlp", test_size=50).to_dict()


def test_cli_presets_lists_each_preset_on_one_line(capsys):
    assert main(["presets"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(preset_names())
    assert all(line.split()[0] in preset_names() for line in lines)


def test_cli_unknown_preset_fails_with_one_line(tmp_path, capsys):
    code = main(["run", "--preset", "nope", "--out", str(tmp_path / "x"), "--quiet"])
    assert code == 2
    assert "setting 'preset' = 'nope'" in capsys.readouterr().err


# --- reproduce: verdicts from numbers ------------------------------------------------------
# The 95 % CIs worked by hand: mean ± t_{n-1, 0.975} s / sqrt(n), t_2 = 4.3027, t_4 = 2.7764.
@pytest.mark.parametrize(
    ("effects", "paper", "verdict", "ci"),
    [
        # mean 4, s 1: 4 ± 4.3027 / sqrt(3) = [1.52, 6.48] excludes 0; the paper's 4.64 inside
        ([4.0, 5.0, 3.0], 4.64, "holds", "[+1.52, +6.48]"),
        # mean 3, s sqrt(13) = 3.606: 3 ± 8.957 spans 0, the mean has the sign
        ([4.0, -1.0, 6.0], 4.64, "direction only", "[-5.96, +11.96]"),
        # mean 25, s 5: [12.58, 37.42] excludes 0, but 4.64 is outside it and x2 (ratio 5.4)
        ([20.0, 25.0, 30.0], 4.64, "direction only", "[+12.58, +37.42]"),
        # mean 5, s sqrt(8): 5 ± 2.7764 x 2.828 / sqrt(5) = [1.49, 8.51]: 2.0 is inside
        # (ratio 2.5, outside x2), 1.2 is outside both
        ([1.0, 5.0, 9.0, 5.0, 5.0], 2.0, "holds", "[+1.49, +8.51]"),
        ([1.0, 5.0, 9.0, 5.0, 5.0], 1.2, "direction only", "[+1.49, +8.51]"),
        # mean -4, s 1: [-6.48, -1.52] excludes 0 against the paper
        ([-3.0, -4.0, -5.0], 2.0, "fails", "[-6.48, -1.52]"),
        # mean -0.37 against the paper, s 0.71: [-2.13, +1.40] spans 0: nothing decided
        ([-1.0, -0.5, 0.4], 2.73, "undecided", "[-2.13, +1.40]"),
        # the paper's sign on every seed, but mean 0.2, s 0.1: [-0.05, +0.45] spans 0
        ([0.3, 0.1, 0.2], None, "direction only", "[-0.05, +0.45]"),
        ([3.0, 2.0, 2.5], None, "holds", "[+1.26, +3.74]"),  # mean 2.5, s 0.5: ± 1.24
        ([1.0, -1.0, 0.0], None, "undecided", "[-2.48, +2.48]"),  # a zero mean
        # a paper value below 0 reads the CI's upper end: [-6.48, -1.52] holds for -3 ...
        ([-3.0, -4.0, -5.0], -3.0, "holds", "[-6.48, -1.52]"),
        # ... mean -2, s 2: [-6.97, +2.97] spans 0 with the sign; mean +4: fails
        ([-4.0, -2.0, 0.0], -3.0, "direction only", "[-6.97, +2.97]"),
        ([3.0, 4.0, 5.0], -3.0, "fails", "[+1.52, +6.48]"),
        ([0.3, 0.1], None, "undecided", "[-1.07, +1.47]"),  # fewer than 3 seeds
        ([4.0], 4.64, "undecided", "n/a"),  # one lucky seed is not a result
        ([], None, "undecided", "n/a"),
    ],
)
def test_claim_verdict_reads_the_confidence_interval(effects, paper, verdict, ci):
    assert claim_verdict(effects, paper_value=paper)[0] == verdict
    assert format_ci(effects, signed=True) == ci


@pytest.mark.parametrize(
    ("mean", "std", "low", "high"),
    [(4.93, 2.59, -1.50, 11.36),  # de Heredia's gain at p = 5 %
     (12.99, 8.34, -7.73, 33.71),  # DCM over Random (keep)
     (8.665, 5.130, -4.08, 21.41),  # MoFeL's cycles over A2 at 30 m/min
     (21.695, 9.244, -1.27, 44.66)],  # Cached-DFL's LRU over DFL
)
def test_a_ci_that_spans_zero_never_holds(mean, std, low, high):
    # Prepare: three seeds with the reported mean and sample std (mean + std x [-1, 0, 1])
    effects = [mean - std, mean, mean + std]
    # Execute
    got = mean_ci(effects)
    verdict, reason = claim_verdict(effects, paper_value=mean, sign=1)
    # Assert: the interval worked by hand, and the paper's own number does not rescue it
    assert got == pytest.approx((low, high), abs=0.01)
    assert verdict == "direction only" and "spans 0" in reason


@pytest.mark.parametrize(
    ("effects", "needed"),
    [([0.3, 0.1, 0.2], 4),  # t/sqrt(n) < mean/s = 2: n = 4 gives 3.182 / 2 = 1.59
     ([4.0, -1.0, 6.0], 9),  # < 3 / 3.606 = 0.832: n = 8 gives 0.836, n = 9 0.769
     ([1.0, -1.0, 0.0], None), ([4.0], None)],  # zero mean; no spread from one seed
)
def test_seeds_to_decide_solves_the_interval_half_width_for_n(effects, needed):
    assert seeds_to_decide(effects) == needed


@pytest.mark.parametrize(
    ("effects", "verdict"),
    [([0.0, 0.0, 0.0], "holds"), ([0.0, 2.0, 0.0], "fails"), ([0.0], "undecided"),
     ([], "undecided")],
)
def test_claim_verdict_of_a_value_the_paper_states_as_zero(effects, verdict):
    # MoFeL's NFC = 0: holds only when zero on every seed (its CI is then [0, 0])
    assert claim_verdict(effects, paper_value=0.0, sign=0)[0] == verdict


def test_run_metrics_reads_mofel_final_cycle_and_frustration_counts():
    # Prepare: cumulative NTC / NFC per step, as MofelBase reports them
    table = pd.DataFrame({"step": [0, 1, 2], "ntc": [0.0, 1.0, 3.0], "nfc": [0.0, 2.0, 2.0]})
    # Execute
    metrics = run_metrics(table)
    # Assert: the counts at the end of the run
    assert metrics["ntc"] == 3.0 and metrics["nfc"] == 2.0


def test_claim_effects_are_paired_per_seed_and_run_metrics_reads_a_table():
    # Prepare: two variants, two seeds; one run's per-step table
    per_run = pd.DataFrame({"variant": ["A", "A", "B", "B"], "seed": [0, 1, 1, 0],
                            "final_acc": [80.0, 70.0, 60.0, 75.0]})
    claim = Claim("T", "A over B", "final_acc", "A", "B", 5.0, "q")
    table = pd.DataFrame({"step": [0, 1, 2, 3, 4], "acc_mean": [0.1, 0.5, 0.5, 0.7, 0.9]})
    # Execute
    effects = claim_effects(claim, per_run)
    metrics = run_metrics(table, window=2)
    # Assert
    assert sorted(effects.tolist()) == [5.0, 10.0]
    assert metrics["final_acc"] == pytest.approx(80.0)  # mean of the last 2 evaluations
    assert metrics["half_acc"] == pytest.approx(50.0)


def test_every_reproduction_spec_uses_a_shipped_preset_and_known_variants():
    for spec in PAPERS.values():
        assert spec.preset in preset_names()
        for claim in spec.claims:
            assert claim.a in spec.variants and (claim.b is None or claim.b in spec.variants)
        for variant in spec.variants:
            Config.from_settings({"preset": spec.preset, **spec.scales["small"],
                                  **spec.variants[variant]})


def test_app_preset_selector_fills_untouched_inputs_and_policies_bring_nothing():
    from mobidfl.analysis.app import AppModel, initial_settings, model_params

    # Prepare: the app's start inputs, as SolaraViz passes them on Reset
    start = initial_settings(model_params())
    # Execute
    with_preset = AppModel.model_settings(**dict(start, preset="dam_001", seed=4))
    with_mofel = AppModel.model_settings(**dict(start, vehicle_policy="mofel"))
    # Assert: only the touched inputs stay explicit
    assert with_preset == {"preset": "dam_001", "seed": 4}
    with pytest.raises(ConfigError, match="'vehicle.mobility' = 'manhattan'"):
        Config.from_settings(with_mofel)  # MoFeL needs routes; the policy does not bring them


def test_mofel_preset_keeps_the_papers_v_tau_over_d_ratios():
    # Prepare: the paper (Sec. 5.3): d_s mean 75 m, tau_max 20 min, v_min 1 m/min, the
    # middle scenario v_max 15 m/min; nyc_uws territories: ~500 m of road per visit
    from mobidfl.analysis.reproduce import MOFEL_SPEED_SCALE as SPEED_SCALE
    from mobidfl.analysis.reproduce import mofel_speed as mobidfl_speed

    config = Config.from_settings(preset="mofel_002")
    # Execute
    ratio = config.vehicle.speed * config.train_time_s / 500.0
    # Assert: v_max tau_max / d = 15 * 20 / 75 = 4, as in the paper; times literal
    assert SPEED_SCALE == pytest.approx(500.0 / 75.0)
    assert ratio == pytest.approx(15.0 * 20.0 / 75.0, rel=1e-3)
    assert config.vehicle.speed == pytest.approx(mobidfl_speed(15.0))
    assert config.route_speed_min == pytest.approx(1.0 * SPEED_SCALE / 60.0, rel=1e-3)
    assert (config.step_s, config.train_time_s, config.train_time_min_fraction) == (
        60.0, 1200.0, 0.05)


def test_every_spec_has_a_ci_scale_and_the_cli_runs_a_spec_by_its_own_name(
    tmp_path, monkeypatch
):
    import mobidfl.analysis.reproduce as reproduce_module
    from mobidfl.analysis.reproduce import CI, variant_settings

    # Assert: every spec has the tests' scale, says so, and its settings resolve
    for spec in PAPERS.values():
        assert spec.scale_notes["ci"].startswith(CI), spec.name
        for variant in spec.variants:
            Config.from_settings(variant_settings(spec, variant, scale="ci"))
    # Prepare: a reproduce that records what it was asked to run
    asked = {}

    def fake(paper, *, out, **kwargs):
        asked.update(paper=paper, scale=kwargs["scale"], variants=kwargs["variants"])
        out.mkdir(parents=True, exist_ok=True)  # as reproduce() does, once its checks pass
        pd.DataFrame([{"source": "s", "claim": "c", "paper": "p", "MobiDFL (mean ± std)": "m",
                       "verdict": "holds", "reason": ""}]).to_csv(out / "verdicts.csv")
        return out / "reproduction.md"

    monkeypatch.setattr(reproduce_module, "reproduce", fake)
    # Execute: the SUMO spec shares its preset with cached_dfl_003
    code = main(["reproduce", "sumo", "--scale", "ci", "--variants", "LRU sumo",
                 "--out", str(tmp_path / "o"), "--quiet"])
    # Assert: the spec itself is run, not the one its preset names
    assert code == 0
    assert asked == {"paper": "cached_dfl_003_sumo", "scale": "ci", "variants": ["LRU sumo"]}


def test_reproduce_set_and_variants_are_checked_before_any_run_and_reported(tmp_path):
    from mobidfl.analysis.cli import reproduce_overrides
    from mobidfl.analysis.reproduce import CACHED, chosen_variants, variant_settings, write_report
    from mobidfl.errors import ConfigError

    # Prepare: the GPU settings a user adds; a synthetic per-step table of two variants
    extra = reproduce_overrides(["backend=batched", "workers=1"], preset=CACHED.preset)
    steps = pd.DataFrame([
        {"variant": v, "seed": s, "step": t, "acc_mean": (0.5 if v == "LRU" else 0.4) + t / 100}
        for v in ("LRU", "DFL") for s in (0, 1) for t in range(4)
    ])
    resolved = {v: Config.from_settings(variant_settings(CACHED, v, scale="small", extra=extra))
                for v in ("LRU", "DFL")}  # fmt: skip
    # Execute
    path = write_report(CACHED, steps, tmp_path, resolved=resolved, scale="small",
                        seeds=[0, 1], extra=extra)  # fmt: skip
    text = path.read_text()
    # Assert: typed values on every variant, listed as not the paper's; unrun claims say so
    assert extra == {"backend": "batched", "workers": 1}
    assert resolved["DFL"].backend == "batched" and resolved["DFL"].policy == "defedavg"
    assert "--variants LRU,DFL --set backend=batched --set workers=1" in text
    assert "(not from the paper): `backend = batched`, `workers = 1`" in text
    # two seeds leave it undecided; with no spread, the third decides
    assert ("| +10.00 ± 0.00 | [+10.00, +10.00] | 2 | undecided | 2 seeds (a verdict needs "
            ">= 3) | 3 |") in text
    assert text.count("| not run |") == 3  # CFL and both Table 2 claims
    assert chosen_variants(CACHED, ["DFL", "LRU"], scale="small") == ["LRU", "DFL"]
    with pytest.raises(ConfigError, match="'--variants' = 'XX'"):
        chosen_variants(CACHED, ["LRU", "XX"], scale="small")
    with pytest.raises(ConfigError, match="device"):
        reproduce_overrides(["device=tpu"], preset=CACHED.preset)


def test_reproduce_runs_variants_side_by_side_when_processes_exceed_seeds(tmp_path):
    from mobidfl.analysis.reproduce import reproduce

    # Prepare: a tiny Cached-DFL world (2 variants x 1 seed, 2 processes: both at once)
    tiny = {"steps": 2, "vehicles": 4, "test_size": 20, "map": "grid:3x3:100"}
    # Execute
    path = reproduce("cached_dfl_003", out=tmp_path, scale="small", seeds=[5], processes=2,
                     progress=False, extra=tiny, variants=["LRU", "DFL"])  # fmt: skip
    per_run = pd.read_csv(tmp_path / "per_run.csv")
    # Assert: both variants ran to the end with the added settings
    assert sorted(per_run.variant) == ["DFL", "LRU"]
    assert (per_run.steps_run == 2).all() and (per_run.seed == 5).all()
    assert "`map = grid:3x3:100`" in path.read_text()


def test_reproduce_refuses_a_bad_set_before_any_run_and_reports_runs_that_failed(
    tmp_path, monkeypatch, capsys
):
    import mobidfl.analysis.reproduce as reproduce_module
    from mobidfl.analysis.cli import main

    # Prepare: a map file that does not exist, given the way a newcomer would
    missing = tmp_path / "my_city.graphml"
    out = tmp_path / "out"
    argv = ["reproduce", "psfl_004", "--seeds", "2", "--quiet", "--out", str(out),
            "--set", f"map={missing}"]
    # Execute: through the CLI; then with the preflight skipped, so every run fails
    code = main(argv)
    err = capsys.readouterr().err
    started = (out / "runs").exists()
    monkeypatch.setattr(reproduce_module, "preflight", lambda settings, *, seed: None)
    late = main(argv)
    late_err = capsys.readouterr().err
    # Assert: one line naming the map, exit 2, and no run started
    assert code == 2 and err.count("\n") == 1 and "setting 'map'" in err
    assert not started
    # without the preflight: one line naming the variant and the first error, exit 1
    assert late == 1 and late_err.count("\n") == 1
    assert "every run of variant 'PSFL' failed" in late_err and "manifest.csv" in late_err


def test_report_lists_runs_that_failed_beside_the_numbers(tmp_path):
    from mobidfl.analysis.reproduce import CACHED, variant_settings, write_report

    # Prepare: LRU and DFL on seeds 0-1; DFL seed 2 failed
    steps = pd.DataFrame([
        {"variant": v, "seed": s, "step": t, "acc_mean": 0.5 + t / 100}
        for v in ("LRU", "DFL") for s in (0, 1) for t in range(3)
    ])
    resolved = {v: Config.from_settings(variant_settings(CACHED, v, scale="small"))
                for v in ("LRU", "DFL")}  # fmt: skip
    failures = [{"variant": "DFL", "seed": 2, "error": "MemoryError: out of memory"}]
    # Execute
    text = write_report(CACHED, steps, tmp_path, resolved=resolved, scale="small",
                        seeds=[0, 1, 2], failures=failures).read_text()  # fmt: skip
    # Assert: named in the header and kept in failed_runs.csv; a clean rerun removes it
    assert "**1 run(s) failed and are not in the numbers:** DFL seed 2: MemoryError" in text
    assert pd.read_csv(tmp_path / "failed_runs.csv").seed.tolist() == [2]
    write_report(CACHED, steps, tmp_path, resolved=resolved, scale="small", seeds=[0, 1])
    assert not (tmp_path / "failed_runs.csv").exists()


def test_convergence_is_compared_at_the_same_epoch_when_an_early_stop_shortens_a_run():
    from mobidfl.analysis.reproduce import PAIRED_HALF

    # Prepare: A runs 10 epochs; B stops early after 4 (the paper's early stop), having
    # climbed faster at first. At "half of each own run" A (step 5) would meet B (step 2).
    a = pd.DataFrame({"step": range(11), "acc_mean": [None] + [0.1 * s for s in range(1, 11)]})
    b = pd.DataFrame({"step": range(5), "acc_mean": [None, 0.3, 0.4, 0.45, 0.45]})
    steps = pd.concat([a.assign(variant="A", seed=0), b.assign(variant="B", seed=0)])
    claim = Claim("T", "A converges faster", PAIRED_HALF, "A", "B", None, "q")
    # Execute
    effects = claim_effects(claim, pd.DataFrame(), steps)
    own_halves = run_metrics(a)["half_acc"] - run_metrics(b)["half_acc"]
    # Assert: both at epoch 2 (half of the shorter run): A 0.2 vs B 0.4
    assert effects.tolist() == pytest.approx([-20.0])
    assert own_halves == pytest.approx(50.0 - 40.0)  # the unfair comparison says the opposite
    assert claim_effects(claim, pd.DataFrame()).size == 0  # no curves, no effect
