"""One installed namespace: ``model/``, ``agents/``, ``maps/`` and ``analysis/`` install as
``mobidfl.model``, ``mobidfl.agents``, ``mobidfl.maps`` and ``mobidfl.analysis``
(pyproject.toml, ``package-dir``), so a user's own ``model.py``, ``maps/`` or ``analysis/``
beside a script shadows nothing, and no module of ours is loaded twice under two names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import FOLDERS, checkout_problem

ROOT = Path(__file__).resolve().parents[2]
BARE = ("model", "agents", "maps", "analysis")
"""The folders' own names: none may be a top-level module in a user's process."""

PROBE = r"""
import importlib, json, sys
from pathlib import Path

def bare(extra=()):
    return sorted(m for m in sys.modules if m.split(".")[0] in {*BARE, *extra})

import mobidfl
after_import = bare(("libpysal",))
import mesa
world = mobidfl.MobiDFLModel(vehicles=5, steps=2, learning=False)
world.run_model()
runs = mesa.batch_run(mobidfl.MobiDFLModel,
                      parameters={"vehicles": 5, "steps": 2, "learning": False, "seed": [0, 1]},
                      display_progress=False)
# every module of the project, then: which files are loaded under two names
failed = {}
for name in NAMES:
    try:
        importlib.import_module(name)
    except ImportError as exc:  # an optional extra (ray, ns3) missing here
        failed[name] = str(exc)
files = {}
for name, module in list(sys.modules.items()):
    if getattr(module, "__file__", None):
        files.setdefault(str(Path(module.__file__).resolve()), []).append(name)
root = Path(ROOT)
ours = {f: sorted(n) for f, n in files.items()
        if any(Path(f).is_relative_to(root / d) for d in DIRS)}
import libpysal
print(json.dumps({
    "after_import": after_import,
    "run": [world.steps, world.running],
    "batch": sorted((r["seed"], r["Step"]) for r in runs),
    "imported": len(NAMES) - len(failed), "failed": failed,
    "twice": {f: n for f, n in ours.items() if len(n) > 1},
    "where": {n: str(Path(sys.modules[n].__file__).resolve().parent) for n in FOLDERS},
    "after_all": bare(),
    "libpysal": [type(libpysal).__name__, isinstance(libpysal.__version__, str)],
}))
"""


def project_modules() -> list[str]:
    """Every module of the project under the name it installs as."""
    names = []
    for folder in ("mobidfl", *BARE):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join(parts if folder == "mobidfl" else ["mobidfl", *parts]))
    return names


def test_a_script_beside_model_py_maps_and_analysis_runs_mobidfl(tmp_path):
    # Prepare: a user's folder whose own modules fail loudly if anyone imports them
    (tmp_path / "model.py").write_text("raise ImportError('the user model.py was imported')\n")
    (tmp_path / "agents.py").write_text("raise ImportError('the user agents.py was imported')\n")
    for name in ("maps", "analysis"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('user {name}/')\n")
    names = project_modules()
    code = (f"BARE = {BARE!r}\nNAMES = {names!r}\nROOT = {str(ROOT)!r}\n"
            f"DIRS = {tuple(FOLDERS.values())!r}\nFOLDERS = {tuple(FOLDERS)!r}\n{PROBE}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package
    # Execute: the script's folder is first on sys.path, as for `python script.py` there
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # Assert: nothing of ours (nor libpysal) under a bare name after `import mobidfl`
    assert got["after_import"] == []
    # Mesa's loops end at the steps setting: run_model, and batch_run's rows at step 2
    assert got["run"] == [2, False]
    assert got["batch"] == [[0, 2], [1, 2]]
    # Every module imported (none needs an extra that is missing here), none twice
    assert got["failed"] == {} and got["imported"] == len(names) > 100
    assert got["twice"] == {}
    assert got["after_all"] == []
    # This checkout's folders, and the real libpysal (mesa-geo imports it), no stand-in
    assert got["where"] == {name: str(ROOT / folder) for name, folder in FOLDERS.items()}
    assert got["libpysal"] == ["module", True]


def test_the_package_list_names_every_package_folder():
    # Prepare
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {p.parent for d in ("mobidfl", *BARE) for p in (ROOT / d).rglob("__init__.py")}
    expected = {
        ".".join(f.relative_to(ROOT).parts if f.relative_to(ROOT).parts[0] == "mobidfl"
                 else ("mobidfl", *f.relative_to(ROOT).parts))
        for f in folders
    }
    # Execute / Assert: every package installs, under mobidfl, from its folder
    assert set(tool["packages"]) == expected
    assert tool["package-dir"] == {f"mobidfl.{name}": name for name in BARE}


def test_a_checkout_that_is_not_the_installed_one_is_named():
    # Execute: this checkout, and a folder that holds none of the packages
    here = checkout_problem(ROOT)
    elsewhere = checkout_problem(Path("/nonexistent/checkout"))
    # Assert
    assert here is None
    assert elsewhere == (f"mobidfl comes from {ROOT / 'mobidfl'}, not "
                         "/nonexistent/checkout/mobidfl: install this checkout with "
                         "`pip install -e .` (make setup)")
