"""Adding an agent kind is one new file plus one registration line.

The file and the line are the worked example of docs/reference/layout.md ("Adding an agent
kind"), read from the page and installed in a temporary folder as a distribution with that
entry point. The kinds are fixed when ``mobidfl.settings`` is imported, so the run happens in
a fresh interpreter: the cyclists must have their settings, their agent class, their energy
and look, and learn and meet in a small world beside the built-in kinds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mobidfl.settings import ENTRY_POINT_GROUP, KINDS

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "reference" / "layout.md"

PROBE = """
import json
import numpy as np
from mobidfl.settings import KINDS
from mobidfl.agents.kinds import AGENT_CLASSES
from mobidfl.analysis.app.look import KIND_COLOURS, KIND_SHAPES
from mobidfl.model.config import Config, settings_table
from mobidfl.model.maths.energy import J_PER_FLOP
from mobidfl.model.world import MobiDFLModel

names = [row[0] for row in settings_table()]
config = Config.from_settings({"map": "grid:5x5", "vehicles": 0, "pedestrians": 4,
                               "cyclists": 6, "sensors": 0, "uavs": 0, "steps": 2,
                               "test_size": 60, "local_steps": 1, "seed": 1})
model = MobiDFLModel(config=config)
model.run()
cyclists = model.kind_of == "cyclist"
print(json.dumps({
    "kinds": list(KINDS), "settings": [n for n in names if "cyclist" in n],
    "class": AGENT_CLASSES["cyclist"].__name__, "doc": AGENT_CLASSES["cyclist"].__doc__,
    "energy": J_PER_FLOP["cyclist"], "look": [KIND_COLOURS["cyclist"], KIND_SHAPES["cyclist"]],
    "count": int(cyclists.sum()), "policy": sorted(set(model.policy_of_agent[cyclists])),
    "accuracy": np.nan_to_num(model.accuracy[cyclists], nan=-1.0).tolist(),
    "moved": float(np.abs(model.speed[cyclists]).max()),
}))
"""


def _block(page: str, lang: str, needle: str) -> str:
    """The fenced ``lang`` block of ``page`` that contains ``needle``."""
    for body in re.findall(rf"```{lang}\n(.*?)```", page, re.S):
        if needle in body:
            return body
    raise AssertionError(f"docs/reference/layout.md has no {lang} block with {needle!r}")


def _install(root: Path, points: dict[str, str], files: dict[str, str]) -> dict[str, str]:
    """Write ``files`` and a distribution with ``points`` under ``root``; the environment of
    an interpreter that sees them."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    dist = root / "my_kinds-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-kinds\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT), env.get("PYTHONPATH", "")])
    return env


@pytest.fixture(scope="module")
def cyclist_example() -> tuple[str, dict[str, str]]:
    """The page's ``my_kinds/cyclist.py`` and its one entry point."""
    page = LAYOUT.read_text()
    source = _block(page, "python", "# my_kinds/cyclist.py")
    points = tomllib.loads(_block(page, "toml", '"my_kinds.cyclist'))
    line = points["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert len(line) == 1  # one registration line
    return source, line


def test_the_page_s_cyclist_gets_settings_class_energy_look_and_learns(
    cyclist_example, tmp_path
):
    # Prepare: the example installed as a third-party package would be
    source, points = cyclist_example
    env = _install(tmp_path, points, {"my_kinds/__init__.py": "",
                                      "my_kinds/cyclist.py": source})  # fmt: skip
    # Execute
    out = subprocess.run([sys.executable, "-c", PROBE], check=False, env=env, capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    # Assert: a kind after the built-ins, with everything that derives from its row
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["kinds"] == [*KINDS, "cyclist"]
    assert {"cyclists", "cyclist.mobility", "cyclist.speed"} <= set(got["settings"])
    assert got["class"] == "Cyclist" and got["doc"].startswith("Rides the streets")
    assert got["energy"] == pytest.approx(5.0 / 1.2e12)
    assert got["look"] == ["#9467bd", "triangle"]
    assert got["count"] == 6 and got["policy"] == ["dpsgd"]
    assert all(0.0 <= a <= 1.0 for a in got["accuracy"])  # evaluated after training
    assert got["moved"] == pytest.approx(4.2)


def test_a_kind_whose_name_is_taken_is_refused_naming_it(tmp_path):
    # Prepare: a second "sensor"
    source = ("from mobidfl.settings import AgentKind\nSENSOR = AgentKind(name='sensor', "
              "count_setting='sensors2', count=0, count_help='x', mobility='static', "
              "speed=0.0, policy='local', j_per_flop=1e-12, colour='#000000', "
              "shape='square')\n")  # fmt: skip
    env = _install(tmp_path, {"sensor2": "my_kinds.dup:SENSOR"},
                   {"my_kinds/__init__.py": "", "my_kinds/dup.py": source})  # fmt: skip
    # Execute
    out = subprocess.run([sys.executable, "-c", "import mobidfl.settings"], check=False, env=env,
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    # Assert
    assert out.returncode != 0
    assert "agent kind 'sensor' (my_kinds.dup:SENSOR)" in out.stderr
