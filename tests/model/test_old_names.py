"""Old setting names are kept for this release with a DeprecationWarning (one line each).

A plug-in setting's old flat name (``psfl_sigma`` for ``psfl.sigma``) still works everywhere
a name does, and says once that it is old: in a script, as Python's default filters show a
DeprecationWarning (attributed to the user's line); in a command, as one ``mobidfl:0:`` line.
A per-kind name with an underscore (``vehicle_speed``) is how a keyword spells
``vehicle.speed`` and is not old.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from mobidfl.model.config import Config

ROOT = Path(__file__).resolve().parents[2]
MESSAGE = "setting 'psfl_sigma' is an old name of 'psfl.sigma'; it is accepted in this release only"


def deprecations(**settings) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings(**settings)
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


def test_an_old_name_warns_and_still_sets_its_setting():
    # Execute
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = Config.from_settings(psfl_sigma=20, policy="psfl")
    # Assert: the value is set, the one warning names both names, and points at this file
    assert config.psfl.sigma == 20.0
    old = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert [str(w.message) for w in old] == [MESSAGE]
    assert Path(old[0].filename).resolve() == Path(__file__).resolve()


def test_public_and_per_kind_keyword_names_do_not_warn():
    assert deprecations(**{"psfl.sigma": 20}, policy="psfl") == []
    assert deprecations(vehicle_speed=3.0, vehicle_policy="dpsgd") == []


def test_a_script_shows_the_warning_with_pythons_default_filters(tmp_path):
    # Prepare: a user's script, run as Python runs it (no -W, no pytest filters)
    script = tmp_path / "study.py"
    script.write_text("from mobidfl.model.config import Config\n"
                      "Config.from_settings(psfl_sigma=20, policy='psfl')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    # Execute
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, check=False)
    # Assert: shown, on the script's own line
    assert done.returncode == 0, done.stderr
    assert f"study.py:2: DeprecationWarning: {MESSAGE}" in done.stderr


def test_a_command_says_it_once_in_one_line(tmp_path):
    # Execute: an old name of a setting the default world reads (its Manhattan cars)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run(
        [sys.executable, "-m", "mobidfl.analysis.cli", "run", "--out", str(tmp_path / "r"),
         "--set", "turn_straight=0.5", "--set", "steps=1", "--set", "learning=false",
         "--quiet"], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    # Assert: the run goes on; one line, although the config is resolved several times
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "DeprecationWarning" in ln]
    assert lines == ["mobidfl:0: DeprecationWarning: setting 'turn_straight' is an old name of "
                     "'manhattan.turn_straight'; it is accepted in this release only"]


def test_a_sweep_over_an_old_name_reports_its_figure_under_the_public_name(tmp_path):
    # Prepare: a sweep file written before the rename (hm_fraction)
    (tmp_path / "sweep.toml").write_text(
        'replicates = 1\n[base]\nvehicles = 6\nsteps = 2\nlocal_steps = 1\ntest_size = 50\n'
        '[base.vehicle]\nmobility = "random_walk"\n[grid]\npolicy = ["cached_lru"]\n'
        'hm_fraction = [0.0, 0.5]\n')
    from mobidfl.analysis.cli import main
    from mobidfl.analysis.report import load_results

    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--processes", "0",
                 "--quiet"]) == 0
    # Execute
    assert main(["report", str(out)]) == 0
    data, swept = load_results(out)
    # Assert: the parameter under its public name, so the p figure is drawn
    assert swept == ["policy", "random_walk.hm_fraction"]
    assert (out / "report" / "final_accuracy_vs_p.png").is_file()
