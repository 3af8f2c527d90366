"""A new core setting is one declared field: the worked example of docs/reference/layout.md.

The page's two code blocks are applied, exactly as the page shows them, to a copy of the
package (every file linked except the two that change), and a fresh interpreter checks each
promise of the page's list from that copy: keywords, ``--set``, the refusal, the settings
table, ``config.toml`` both ways, the role, the inert report and the engine's input.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "layout.md"
SECTION = "## A worked example: a new core setting"
CONFIG_ANCHOR = "    prox_rho: float = _setting("
ENGINE_ANCHOR = "    precision: str = \"fp32\"\n"


def page_section() -> str:
    """The worked example's section of the page."""
    text = PAGE.read_text()
    section = text[text.index(SECTION):]
    return section[: section.index("\n## ", len(SECTION))]


def page_blocks() -> list[str]:
    """The Python blocks of the worked example's section, in order."""
    return re.findall(r"```python\n(.*?)```", page_section(), flags=re.S)


def fields_module() -> str:
    """The repository path of the module the page names as the home of ``ConfigFields``."""
    found = re.findall(r"field of `ConfigFields` \(`([^`]+)`\)", page_section())
    assert len(found) == 1, found
    return found[0]


def mirror(src: Path, out: Path, changed: dict[str, str]) -> None:
    """``out`` mirrors folder ``src``: links, except the files in ``changed`` (repository path ->
    new text) and the folders holding them, which are written."""
    out.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        rel = entry.relative_to(ROOT).as_posix()
        if entry.name == "__pycache__" or (out / entry.name).exists():
            continue
        if rel in changed:
            (out / entry.name).write_text(changed[rel])
        elif entry.is_dir() and any(c.startswith(rel + "/") for c in changed):
            mirror(entry, out / entry.name, changed)
        else:
            (out / entry.name).symlink_to(entry)


def overlay(dest: Path, *, changed: dict[str, str]) -> Path:
    """The installed layout (``mobidfl.model`` from ``model/``, ...) under ``dest``."""
    for folder in ("model", "agents", "maps", "analysis"):
        mirror(ROOT / folder, dest / "mobidfl" / folder, changed)
    mirror(ROOT / "mobidfl", dest / "mobidfl", changed)
    return dest


CHECKS = r'''
import io, sys, tempfile, warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import mobidfl
import mobidfl.model.config as config_module
from mobidfl.analysis.cli import main
from mobidfl.model.config import Config, InertSettingWarning, setting_role, settings_table
from mobidfl.model.learning.engine import TrainingSettings

assert config_module.__file__.startswith(sys.argv[1]), config_module.__file__  # the copy

out = {}
cfg = Config.from_settings(grad_clip=1.5, vehicles=2, steps=1)
out["keyword"] = cfg.grad_clip
out["set"] = Config().updated({"grad_clip": "2.5"}).grad_clip
out["role"] = setting_role("grad_clip")
out["table"] = [row for row in settings_table() if row[0] == "grad_clip"]
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "config.toml"
    path.write_text(cfg.to_toml())
    out["toml"] = Config.from_toml(path).grad_clip
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["run", "--out", str(Path(tmp) / "r"), "--set", "grad_clip=-1",
                     "--set", "steps=1", "--set", "learning=false"])
    out["refusal"] = (code, err.getvalue().strip().splitlines())
    listing = io.StringIO()
    with redirect_stdout(listing):
        main(["settings"])
    out["listed"] = "grad_clip" in listing.getvalue()
def inert(**settings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings(grad_clip=1.5, **settings)
    return [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]


out["inert"] = {"sgd": inert(optimizer="sgd"), "adam": inert(optimizer="adam"),
                "no learning": inert(learning=False)}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = mobidfl.MobiDFLModel(grad_clip=0.5, vehicles=2, steps=1, learning=False)
out["model"] = model.config.grad_clip
out["engine"] = TrainingSettings.of(cfg).grad_clip
print(repr(out))
'''


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    # Prepare: the page's two blocks, added where the page says, to a copy of the package
    field, engine_field = page_blocks()
    fields_path = fields_module()
    config_text = (ROOT / fields_path).read_text()
    engine_text = (ROOT / "model" / "learning" / "engine.py").read_text()
    assert config_text.count(CONFIG_ANCHOR) == 1 and engine_text.count(ENGINE_ANCHOR) == 1
    dest = overlay(tmp_path_factory.mktemp("pkg"), changed={
        fields_path: config_text.replace(CONFIG_ANCHOR, field + CONFIG_ANCHOR),
        "model/learning/engine.py": engine_text.replace(ENGINE_ANCHOR,
                                                        ENGINE_ANCHOR + engine_field),
    })
    # Execute: a fresh interpreter that imports the copy first
    env = {**os.environ, "PYTHONPATH": str(dest), "MOBIDFL_NO_PROGRESS": "1"}
    run = subprocess.run([sys.executable, "-c", CHECKS, str(dest)], capture_output=True,
                         text=True, env=env, cwd=dest, check=False, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


def test_the_page_shows_one_field_for_the_config_and_one_for_the_engine():
    # Prepare / Execute
    blocks = page_blocks()
    home = fields_module()
    # Assert: exactly the two declarations the page promises, nothing else to write, and the
    # module the page names is where ConfigFields is declared
    assert home == "model/config/fields.py"
    assert "\nclass ConfigFields:" in (ROOT / home).read_text()
    assert len(blocks) == 2
    assert blocks[0].lstrip().startswith("grad_clip: float = _setting(")
    assert blocks[1].strip() == "grad_clip: float = 0.0"


def test_the_new_field_is_a_setting_everywhere_a_setting_is_given(result):
    # Assert: keyword (so mesa.batch_run), --set text, config.toml written and read back
    assert result["keyword"] == 1.5
    assert result["model"] == 0.5
    assert result["set"] == 2.5
    assert result["toml"] == 1.5


def test_a_bad_value_of_the_new_field_is_refused_in_one_line(result):
    # Assert
    code, lines = result["refusal"]
    assert code == 2
    assert len(lines) == 1 and "grad_clip" in lines[0] and "-1" in lines[0]


def test_the_new_field_is_listed_with_its_role_and_reported_when_inert(result):
    # Assert: the settings table, its role for the bench, the inert line without learning
    assert result["table"] == [("grad_clip", "0.0", "clip the gradient norm of each local SGD "
                                "step at this value (0 = off)")]
    assert result["listed"]
    assert result["role"] == "run"
    inert = result["inert"]
    assert inert["sgd"] == []
    assert inert["adam"] == ["grad_clip=1.5 has no effect: it is read only with optimizer = sgd, "
                             "which this world does not have"]
    assert len(inert["no learning"]) == 1 and "learning = true" in inert["no learning"][0]


def test_the_new_field_reaches_the_engine_by_its_name(result):
    # Assert
    assert result["engine"] == 1.5
