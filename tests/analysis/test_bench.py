"""``mobidfl bench``: scenarios, the same world for every policy, the ci table, plug-ins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest

from mobidfl.analysis.bench_scenarios import (
    build_cells,
    columns,
    load_scenario,
    policy_names,
    scenario_names,
    world_values,
)
from mobidfl.analysis.cli import main
from mobidfl.model.config import required_world
from mobidfl.model.policies.base import Exchange, ExchangeContext, ExchangePolicy
from mobidfl.plugins import POLICIES

ROOT = Path(__file__).resolve().parents[2]
MOFEL = ("mofel", "mofel_a1", "mofel_a2")
IGNORE_LINK = ("central_fedavg", "defedavg")


def test_the_set_has_the_regimes_the_papers_study():
    names = scenario_names()
    assert {"static_sensors", "pedestrians_walk", "cars_manhattan", "sumo_city", "uav_ferry",
            "mofel_routes"} <= set(names)
    worlds = {n: load_scenario(n) for n in names}
    for name, scenario in worlds.items():
        assert scenario.provenance and scenario.why and scenario.version >= 1, name
        assert all(setting in scenario.world for setting in required_world()), name
        assert all(scenario.notes[s] for s in ("ci", "small", "full")), name
    assert worlds["cars_manhattan"].world["map"] == "manhattan_cdfl"
    assert worlds["cars_manhattan"].world["vehicles"] == 100
    assert worlds["cars_manhattan"].world["vehicle.mobility"] == "manhattan"
    assert worlds["sumo_city"].world["vehicle.mobility"] == "sumo"
    assert worlds["pedestrians_walk"].world["map"] == "helsinki_walk"
    assert 0 < worlds["pedestrians_walk"].world["random_walk.hm_fraction"] < 1
    assert worlds["static_sensors"].world["sensor.mobility"] == "static"
    assert worlds["uav_ferry"].axes == {"uav.mobility": ["random_grid", "dam", "dcm"]}
    assert worlds["mofel_routes"].world["vehicle.mobility"] == "route"
    skews = [w.world for w in worlds.values()]
    assert any(w["partition"] == "dirichlet" and w["dirichlet_alpha"] <= 0.1 for w in skews)
    assert any(w["partition"] == "iid" for w in skews)


def _check_cells(scale: str) -> list:
    cols = columns(scenario_names(), scale=scale)
    cells = build_cells(cols, policy_names("all"))
    assert len(cells) == len(cols) * len(POLICIES.names())
    by_column: dict[str, list[dict[str, Any]]] = {}
    for cell in cells:
        mobile = {cell.column.settings[f"{k}.mobility"] for k in ("vehicle", "pedestrian",
                  "sensor", "uav") if cell.column.settings[k + "s"] > 0}
        if cell.policy in MOFEL:
            assert bool(cell.refusal) == (mobile != {"route"}), cell.key
            if cell.refusal:
                assert "'route'" in cell.refusal and cell.policy in cell.refusal
        elif cell.policy in IGNORE_LINK:
            assert bool(cell.refusal) == (cell.column.link != "ideal"), cell.key
            if cell.refusal:
                assert "ignores the link" in cell.refusal
        else:
            assert not cell.refusal, (cell.key, cell.refusal)
        if not cell.refusal:
            by_column.setdefault(cell.column.key, []).append(world_values(cell.config))
    for key, worlds in by_column.items():
        assert len(worlds) >= 2, key
        assert all(w == worlds[0] for w in worlds), key
    return cells


def test_every_policy_sees_the_same_world_in_every_column():
    """Config resolution only: every scenario x link x policy, small scale (the table)."""
    cells = _check_cells("small")
    # the world is what the scenario file says, whatever the policy
    for cell in cells:
        if cell.refusal:
            continue
        for name in ("map", "radius_m", "partition", "model", "dataset", "link.model"):
            written = cell.column.settings[name]
            resolved = cell.config.setting(name)
            assert resolved == written or written.startswith("auto:"), (cell.key, name)
        assert all(cell.config.partition_of(k) == cell.column.settings["partition"]
                   for k in ("vehicle", "pedestrian", "sensor", "uav"))


class _WorldChanger(ExchangePolicy):
    """A policy whose declarations would change the world if a scenario left them open."""

    name = "test_world_changer"
    honours_link = True
    defaults: ClassVar[dict[str, Any]] = {"radius_m": 999.0, "{kind}.partition": "iid",
                                          "contact": "end"}

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        return Exchange()


def test_a_policy_declaring_world_defaults_cannot_change_a_scenario():
    """Such a policy is refused in one line, or (where declarations are still applied) its
    declarations lose to the scenario's explicit world: never a different world."""
    POLICIES.register(_WorldChanger)
    try:
        cols = columns(["static_sensors"], scale="ci", links=["ideal"])
        cells = build_cells(cols, ["local", "test_world_changer"])
        if cells[1].refusal:
            assert "defaults" in cells[1].refusal and "\n" not in cells[1].refusal
        else:
            assert world_values(cells[0].config) == world_values(cells[1].config)
            assert cells[1].config.radius_m == 150.0 and cells[1].config.contact == "during"
    finally:
        POLICIES.unregister("test_world_changer")


def test_bad_names_are_refused_in_one_line(capsys, tmp_path):
    assert main(["bench", "--out", str(tmp_path / "a"), "--policies", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert main(["bench", "--out", str(tmp_path / "b"), "--scenarios", "atlantis"]) == 2
    err = capsys.readouterr().err
    assert "atlantis" in err and "static_sensors" in err and len(err.strip().splitlines()) == 1
    assert main(["bench", "--out", str(tmp_path / "c"), "--seeds", "1"]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_bench_ci_table(tmp_path, capsys):
    """The ci table in seconds: its shape, the refusals, central FedAvg above local, resume."""
    out = tmp_path / "bench"
    policies = "local,central_fedavg,mofel"
    argv = ["bench", "--scale", "ci", "--seeds", "2", "--processes", "0", "--quiet",
            "--policies", policies, "--out", str(out)]
    assert main(argv) == 0
    board = pd.read_csv(out / "leaderboard.csv", keep_default_na=False, na_values=[""])
    cols = columns(scenario_names(), scale="ci")
    assert len(board) == len(cols) * 3
    assert set(board["column"]) == {c.key for c in cols}
    refused = board[board["status"] == "refused"]
    assert set(refused["policy"]) == {"central_fedavg", "mofel"}
    assert (board.loc[board["policy"] == "local", "status"] == "ok").all()
    assert set(board.loc[(board["policy"] == "mofel") & (board["status"] == "ok"), "scenario"]) \
        == {"mofel_routes"}
    both = board.pivot_table(index="column", columns="policy", values="final_acc")
    both = both.dropna(subset=["local", "central_fedavg"])
    assert len(both) == len([c for c in cols if c.link == "ideal"])
    assert (both["central_fedavg"] >= both["local"]).all(), both
    ok = board[board["status"] == "ok"]
    assert ok["seeds_ok"].eq(2).all()
    # bytes in every column, counted at the ideal link; energy only where a link has a rate
    assert ok["bytes_per_agent"].notna().all()
    assert ok.loc[ok["link"] == "ideal", "energy_per_agent"].isna().all()
    assert ok.loc[ok["link"] == "dsrc", "energy_per_agent"].notna().all()
    assert ok.loc[ok["policy"] == "local", "bytes_per_agent"].eq(0).all()
    # central FedAvg: one upload per agent per step of the MLP (784-128-10, fp32, 64 B header)
    plan = json.loads((out / "manifest.json").read_text())
    steps = {c["key"]: c["world"]["steps"] for c in plan["columns"]}
    central = ok[ok["policy"] == "central_fedavg"]
    size = (784 * 128 + 128 + 128 * 10 + 10) * 4 + 64
    assert (central["bytes_per_agent"] == central["column"].map(steps) * size).all()
    # local sends nothing, so it is on every world's accuracy-bytes Pareto front
    assert ok.loc[ok["policy"] == "local", "pareto"].astype(bool).all()
    assert ok.loc[ok["policy"] == "local", "score"].abs().max() < 1e-9
    md = (out / "leaderboard.md").read_text()
    assert "| local |" in md and "ignores the link" in md and "heatmap.png" in md
    assert "MB to target / agent" in md and "comm_static_sensors.png" in md and " ◆" in md
    for name in ("heatmap.png", "manifest.json", "accuracy_static_sensors.png",
                 "accuracy_uav_ferry-dcm.png", "comm_static_sensors.png"):
        assert (out / name).stat().st_size > 0, name
    # resume: a lost run is the only one run again
    runs = sorted(out.glob("cells/*/runs/*.parquet"))
    assert len(runs) == 2 * len(ok)
    victim, other = runs[0], runs[-1]
    kept = other.stat().st_mtime_ns
    victim.unlink()
    capsys.readouterr()
    assert main(argv) == 0
    assert victim.exists() and other.stat().st_mtime_ns == kept
    again = pd.read_csv(out / "leaderboard.csv", keep_default_na=False, na_values=[""])
    pd.testing.assert_series_equal(again["final_acc"], board["final_acc"])


def _tutorial_plugin(folder: Path) -> Path:
    """The plug-in tutorial's package (its titled blocks), installed as the tutorial does."""
    page = (ROOT / "docs" / "tutorials" / "plugin-policy.md").read_text()
    for title, body in re.findall(r'^```\w+ title="([^"]+)"\n(.*?)^```', page, re.M | re.S):
        path = folder / title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    target = folder / "plugins"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(folder / "mobidfl-lazy")],
        check=True, capture_output=True, timeout=240,
    )
    return target


@pytest.mark.slow
def test_the_tutorial_plugin_enters_the_bench_as_its_own_row(tmp_path):
    plugins = _tutorial_plugin(tmp_path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugins), str(ROOT),
                                                      env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "mobidfl.analysis.cli", "bench", "--scale", "ci", "--seeds", "2",
         "--scenarios", "static_sensors", "--links", "ideal", "--processes", "1", "--quiet",
         "--policies", "local,central_fedavg,lazy_dpsgd", "--out", str(out)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    board = pd.read_csv(out / "leaderboard.csv")
    row = board[board["policy"] == "lazy_dpsgd"]
    assert len(row) == 1 and row.iloc[0]["status"] == "ok"
    assert row.iloc[0]["seeds_ok"] == 2
    assert "| lazy_dpsgd" in (out / "leaderboard.md").read_text()


def test_acc_p10_is_the_agents_10th_percentile():
    import numpy as np

    from mobidfl.model.world import MobiDFLModel

    model = MobiDFLModel(map="grid:4x4:100", vehicles=0, pedestrians=0, sensors=9, uavs=0,
                         steps=2, test_size=50, local_steps=1, seed=3).run()
    accuracy = model.evaluation.accuracy
    last = model.model_table().iloc[-1]
    assert last["acc_p10"] == pytest.approx(float(np.percentile(accuracy, 10.0)))
    assert accuracy.min() <= last["acc_p10"] <= accuracy.max()
    assert last["acc_min"] == pytest.approx(accuracy.min())


def test_seeds_are_added_world_by_world_until_the_half_width_or_the_cap(tmp_path, capsys):
    """--until-half-width: each world's policies get the same added seeds (still paired), up
    to --max-seeds; the manifest keeps them, the page says why each world stopped, and the
    same command resumes without running anything again."""
    out = tmp_path / "bench"
    argv = ["bench", "--scale", "ci", "--seeds", "2", "--processes", "0", "--quiet",
            "--scenarios", "cars_manhattan", "--links", "ideal", "--policies",
            "local,dpsgd", "--out", str(out), "--until-half-width", "0.0001",
            "--max-seeds", "3"]
    assert main(argv) == 0
    assert "seeds added until the 95 % half-width" in capsys.readouterr().err
    plan = json.loads((out / "manifest.json").read_text())
    assert plan["seeds"] == [0, 1] and plan["until_half_width"] == {
        "half_width": 0.0001, "max_seeds": 3}
    assert list(plan["column_seeds"].values()) == [[0, 1, 2]]
    assert all(len(cell["runs"]) == 3 for cell in plan["cells"])
    board = pd.read_csv(out / "leaderboard.csv")
    assert board["seeds_ok"].eq(3).all()
    assert "3 seeds" in (out / "leaderboard.md").read_text()
    assert "cap 3 reached" in (out / "leaderboard.md").read_text()
    runs = sorted(out.glob("cells/*/runs/*.parquet"))
    assert len(runs) == 6
    stamps = [p.stat().st_mtime_ns for p in runs]
    assert main(argv) == 0  # resumed: the grown plan is this bench's, nothing runs again
    assert [p.stat().st_mtime_ns for p in runs] == stamps
    # a loose target adds nothing
    loose = tmp_path / "loose"
    assert main([*argv[:-5], str(loose), "--until-half-width", "0.9"]) == 0
    plan = json.loads((loose / "manifest.json").read_text())
    assert plan["column_seeds"] == {} and len(list(loose.glob("cells/*/runs/*.parquet"))) == 4
    assert main([*argv[:-5], str(tmp_path / "x"), "--until-half-width", "0.02",
                 "--max-seeds", "1"]) == 2
    assert "--max-seeds" in capsys.readouterr().err
