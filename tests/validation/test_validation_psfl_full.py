"""PSFL's full-size grid and its 9-area sigma 20 study (validation/psfl_full.py).

* the tables of ``docs/validation/psfl.md`` equal what the published CSVs under
  ``published/validation/psfl`` give, and a changed number in those CSVs changes them;
* the Fig. 5 rules judge made-up counts as written;
* a run folder (the reference's and MobiDFL's per-run JSON) becomes per-run, per-tick and
  per-area tables, per area from the reference's node areas;
* a finished run is read back, not run again (a stopped sweep resumes);
* the two model-update rules of :func:`validation.psfl.apply_update`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from mobidfl.errors import ConfigError
from validation import psfl, psfl_full

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "published" / "validation" / "psfl"
PAGE = ROOT / "docs" / "validation" / "psfl.md"


def test_page_tables_equal_the_published_data():
    got = psfl_full.blocks(DATA)
    assert set(got) == {"full", "mechanism", "full_readings"}
    text = PAGE.read_text(encoding="utf-8")
    for name, body in got.items():
        assert psfl_full.page_block(text, name) == body, (
            f"docs/validation/psfl.md's {name} table drifted from {DATA}: run "
            "python -m validation.psfl_full page --data published/validation/psfl "
            "--page docs/validation/psfl.md")


def test_a_changed_number_in_the_data_changes_the_tables(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    before = psfl_full.blocks(data)
    for name in ("full", "mechanism"):
        runs = pd.read_csv(data / f"{name}_runs.csv")
        runs.loc[runs.index[0], "federations_tail"] += 3.0
        runs.to_csv(data / f"{name}_runs.csv", index=False)
    after = psfl_full.blocks(data)
    assert after["full"] != before["full"] and after["mechanism"] != before["mechanism"]


def _grid(count) -> pd.DataFrame:
    rows = []
    for side, reading in (("reference", "code"), ("mobidfl", "alg1")):
        for a in (3, 5, 9):
            for s in (20.0, 40.0, 80.0):
                fed, acc = count(side, a, s)
                rows.append({"side": side, "reading": reading, "seed": 0, "areas": a,
                             "sigma": s, "federations_tail": fed, "val_acc_tail": acc})
    return pd.DataFrame(rows)


def test_fig5_rules_on_made_up_counts():
    # reference: one federation per area at sigma 20, half as many at 40, one at 80, accuracy
    # falling with sigma: every claim holds. MobiDFL: one federation everywhere, accuracy flat.
    def count(side, a, s):
        if side == "mobidfl":
            return 1.0, 0.9
        return {20.0: float(a), 40.0: a / 2, 80.0: 1.0}[s], 1.0 - s / 1000

    verdicts = psfl_full.fig5_verdicts(_grid(count))
    assert [v[0] for v in verdicts] == list(psfl_full.FIG5_CLAIMS)
    assert all(v[2].startswith("**holds**") for v in verdicts)
    mobidfl = [v[3].split("**")[1] for v in verdicts]
    # 1 >= 1 >= 1 but not 1 > 1; 1 < 3 - 0.5; 1 < 9; 0.9 >= 0.9
    assert mobidfl == ["fails", "fails", "holds", "holds"]
    missing = _grid(count)
    missing = missing[~((missing["areas"] == 5) & (missing["sigma"] == 40.0))]
    assert psfl_full.fig5_verdicts(missing)[0][2].startswith("**not run**")


def _fake_run_folder(root: Path) -> None:
    (root / "reference-runs").mkdir(parents=True)
    (root / "mobidfl-runs").mkdir()
    area = [0, 0, 1, 1]
    ticks = [{"leader": [True, False, True, False], "val_acc": [0.5, 0.7, 0.2, 0.4]}] * 3
    ref = {"federations_csv": [4.0, 2.0, 2.0], "ticks": ticks, "area": area,
           "test_acc": [1.0, 0.8, 0.6, 0.2], "wall_s": 10.0, "cpu_s": 5.0}
    tag = psfl.run_tag(0, 2, 20.0)
    (root / "reference-runs" / f"run-{tag}.json").write_text(json.dumps(ref))
    ours = {"reading": "alg1", "leaders": [3, 1, 1], "val_acc": [0.1, 0.2, 0.3],
            "val_acc_area": [[0.1, 0.1], [0.2, 0.2], [0.5, 0.1]], "test_acc": [1, 1, 0, 0],
            "ds_intra": [1.0, 1.0, 2.0], "ds_inter": [9.0, 9.0, 30.0], "wall_s": 4.0,
            "cpu_s": 3.0}
    (root / "mobidfl-runs" / f"alg1-{tag}.json").write_text(json.dumps(ours))


def test_a_run_folder_becomes_per_run_tick_and_area_tables(tmp_path):
    _fake_run_folder(tmp_path)
    got = psfl_full.tables(tmp_path)
    runs = got["runs"].set_index("side")
    assert runs.loc["reference", "federations_tail"] == pytest.approx(8 / 3)  # all 3 ticks
    assert runs.loc["mobidfl", "federations_final"] == 1.0
    assert runs.loc["reference", "test_acc"] == pytest.approx(0.65)
    assert runs.loc["mobidfl", "ds_inter_tail"] == pytest.approx(16.0)
    assert np.isnan(runs.loc["reference", "ds_inter_tail"])  # not recorded by the driver
    areas = got["areas"].set_index(["side", "area"])
    # the reference's areas: nodes 0, 1 in area 0, nodes 2, 3 in area 1
    assert areas.loc[("reference", 0), "test_acc"] == pytest.approx(0.9)
    assert areas.loc[("reference", 1), "val_acc_tail"] == pytest.approx(0.3)
    assert areas.loc[("mobidfl", 0), "val_acc_tail"] == pytest.approx(0.8 / 3)
    assert areas.loc[("mobidfl", 1), "test_acc"] == 0.0
    assert len(got["ticks"]) == 6
    with pytest.raises(ConfigError):
        psfl_full.tables(tmp_path / "nothing")


@pytest.mark.parametrize("damage", ["cut", "bytes", "foreign"])
def test_a_damaged_run_file_is_refused_in_one_line_naming_it(tmp_path, damage):
    # Prepare: a good run folder, then one of its reference runs damaged
    _fake_run_folder(tmp_path)
    path = sorted((tmp_path / "reference-runs").glob("run-*.json"))[0]
    text = path.read_bytes()
    path.write_bytes({"cut": text[: len(text) // 2], "bytes": b"\xff\xfe" + text[2:],
                      "foreign": b'{"ticks": []}'}[damage])
    # Execute / Assert: one ConfigError naming the file, no JSON or key error
    with pytest.raises(ConfigError) as info:
        psfl_full.tables(tmp_path)
    assert path.name in str(info.value) and "\n" not in str(info.value)


def test_a_finished_run_is_read_back_not_run_again(tmp_path):
    path = tmp_path / "mobidfl-runs" / "alg1-x.json"
    assert psfl._json_once(path, lambda: {"ran": 1}) == {"ran": 1}

    def again() -> dict:
        raise AssertionError("ran a second time")

    assert psfl._json_once(path, again) == {"ran": 1}


class _Engine:
    """The two calls of the learning engine apply_update uses, on one float per agent."""

    def __init__(self, values: list[float]) -> None:
        self.values = [torch.tensor([v]) for v in values]

    def snapshot(self, i: int) -> tuple[torch.Tensor]:
        return (self.values[i].clone(),)

    def set_agent(self, i: int, tensors) -> None:
        self.values[i] = tensors[0].clone()

    def combine(self, snaps, weights) -> tuple[torch.Tensor]:
        return (sum(w * s[0] for s, w in zip(snaps, weights, strict=True)),)


def test_replace_every_tick_impulse_every_fifth():
    fed = {0: (torch.tensor([10.0]),), 1: (torch.tensor([10.0]),)}
    e = _Engine([0.0, 2.0, 5.0])
    psfl.apply_update(e, fed, tick=3, rule="replace")
    assert [float(v) for v in e.values] == [10.0, 10.0, 5.0]  # node 2 is in no federation
    e = _Engine([0.0, 2.0, 5.0])
    psfl.apply_update(e, fed, tick=3, rule="impulse")  # not a multiple of 5: own kept
    assert [float(v) for v in e.values] == [0.0, 2.0, 5.0]
    psfl.apply_update(e, fed, tick=10, rule="impulse")  # 0.1 x own + 0.9 x federation
    assert [float(v) for v in e.values] == pytest.approx([9.0, 9.2, 5.0])
    with pytest.raises(ConfigError):
        psfl.apply_update(e, fed, tick=0, rule="blend")


def test_sweep_cells_parse_and_bad_ones_are_refused():
    assert psfl_full.parse_cells("9:20, 3:80") == [(9, 20.0), (3, 80.0)]
    assert sorted(psfl_full.SWEEP_CELLS) == [(a, s) for a in (3, 5, 9) for s in psfl.SIGMAS]
    for bad in ("", "4:20", "9:30", "9", "x:y"):
        with pytest.raises(ConfigError):
            psfl_full.parse_cells(bad)


def _lattice_run(tmp_path: Path, ds, *, areas: int, ticks: int) -> dict:
    """A whole run as the driver records it, made here: 7 x 7 lattice, 4-neighbourhood, each
    area's nodes holding its own labels (a 'Hard' split), 50-80 training images, one MLP."""
    n, side = 49, 7
    rng = np.random.default_rng(0)
    cell = np.arange(n)
    area = (cell // side) * areas // side  # bands of rows
    labels = ds.y_train.numpy()
    blocks = np.array_split(np.arange(10), areas)
    nodes = {}
    for i in range(n):
        pool = np.flatnonzero(np.isin(labels, blocks[area[i]]))
        pick = rng.choice(pool, size=100, replace=False)
        test = np.flatnonzero(np.isin(ds.y_test.numpy(), blocks[area[i]]))[:20]
        r, c = divmod(i, side)
        nb = [j for j, (dr, dc) in ((i - side, (-1, 0)), (i + side, (1, 0)), (i - 1, (0, -1)),
                                    (i + 1, (0, 1))) if 0 <= r + dr < side and 0 <= c + dc < side]
        k = 50 + 10 * (i % 4)  # |D_k| differs: FedAvg's weights are not all equal
        nodes[str(i)] = {"train": pick[:k].tolist(), "val": pick[80:].tolist(),
                         "test": test.tolist(), "position": [c, r], "neighbours": sorted(nb)}
    net = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.Linear(128, 27))
    torch.manual_seed(0)
    init = {"fc1.weight": net[0].weight, "fc1.bias": net[0].bias,
            "fc2.weight": net[1].weight, "fc2.bias": net[1].bias}
    np.savez(tmp_path / "init.npz", **{k: v.detach().numpy() for k, v in init.items()})
    return {"seed": 0, "areas": areas, "threshold": 20.0, "nodes": nodes,
            "init": str(tmp_path / "init.npz"), "area": area.tolist(),
            "federations_csv": [0.0] * ticks}


@pytest.mark.slow
def test_every_reading_runs_and_changes_only_what_it_names(tmp_path):
    ds = psfl._images("ci")
    run = _lattice_run(tmp_path, ds, areas=3, ticks=3)
    got = {r: psfl._mobidfl_run(ds, run, reading=r) for r in psfl.READINGS}
    for r, out in got.items():
        assert len(out["leaders"]) == 3 and np.asarray(out["val_acc_area"]).shape == (3, 3), r
        assert len(out["test_acc"]) == 49, r
    # the update, the weights, the membership and the forced start act after the election: the
    # first tick's leaders are the reading of record's; the models they leave differ, as the
    # loss-based distances of the later ticks show (continuous: an accuracy, a count of right
    # answers, can stay the same when the models do not; it did on one machine)
    def later_ds(out: dict) -> list[float]:
        return out["ds_intra"][1:] + out["ds_inter"][1:]

    for r in ("impulse", "equal", "broadcast", "start_merged"):
        assert got[r]["leaders"][0] == got["alg1"]["leaders"][0], r
        assert later_ds(got[r]) != later_ds(got["alg1"]), r
    assert got["alg1"]["val_acc"][0] == got["impulse"]["val_acc"][0]  # same models at tick 0
    with pytest.raises(ConfigError):
        psfl._mobidfl_run(ds, run, reading="blend")
