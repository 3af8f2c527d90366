"""Adding a link model is one new file plus one registration line, with its own settings.

The file and the line are the worked example of docs/reference/layout.md ("A worked example:
a new link model"), read from the page: the file is written to a temporary folder, the line
becomes the entry point of a temporary distribution there, and the registry finds it the
way it finds a third-party package's plug-ins. Then the link model's settings namespace
(``link.cutoff``) must be in the settings table, settable with ``--set``, refused in one
line when misspelt, and the world must run with it.
"""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from mobidfl import registry
from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, InertSettingWarning, settings_table
from mobidfl.model.links import RateLink
from mobidfl.plugins import LINKS
from mobidfl.settings import PluginSettings, setting

LAYOUT = Path(__file__).resolve().parents[2] / "docs" / "reference" / "layout.md"

# 8 Cached-DFL cars and 6 D-PSGD pedestrians on a small grid, as tests/model/test_link_contract.py
SMALL = {
    "map": "grid:5x5", "vehicles": 8, "pedestrians": 6, "sensors": 0, "uavs": 0, "steps": 2,
    "test_size": 60, "local_steps": 1, "seed": 4,
}


def _block(page: str, lang: str, needle: str) -> str:
    """The fenced ``lang`` block of ``page`` that contains ``needle``."""
    for body in re.findall(rf"```{lang}\n(.*?)```", page, re.S):
        if needle in body:
            return body
    raise AssertionError(f"docs/reference/layout.md has no {lang} block with {needle!r}")


@pytest.fixture(scope="module")
def cutoff(tmp_path_factory):
    """The page's ``my_links/cutoff.py`` and its entry-point line, installed in a temporary
    folder on ``sys.path``; yields the link model's class."""
    page = LAYOUT.read_text()
    source = _block(page, "python", "# my_links/cutoff.py")
    line = tomllib.loads(_block(page, "toml", '"my_links.cutoff"'))
    points = line["project"]["entry-points"][registry.PLUGIN_GROUP]
    assert len(points) == 1  # one registration line
    root = tmp_path_factory.mktemp("plugin")
    (root / "my_links").mkdir()
    (root / "my_links" / "__init__.py").write_text("")
    (root / "my_links" / "cutoff.py").write_text(source)
    dist = root / "my_links-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-links\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{registry.PLUGIN_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
    )
    before = registry._LOADED.pop(registry.PLUGIN_GROUP, None)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield LINKS.lookup("cutoff")  # the first lookup imports the entry points again
    finally:
        LINKS.unregister("cutoff")
        sys.path.remove(str(root))
        for name in ("my_links.cutoff", "my_links"):
            sys.modules.pop(name, None)
        registry._LOADED.pop(registry.PLUGIN_GROUP, None)
        if before is not None:
            registry._LOADED[registry.PLUGIN_GROUP] = before


def test_the_pages_link_model_is_found_through_its_one_entry_point(cutoff):
    # Assert: registered from the new file, a rate-based link with its own namespace
    assert cutoff.__module__ == "my_links.cutoff" and issubclass(cutoff, RateLink)
    assert cutoff.settings_class.namespace == "link.cutoff"
    assert "cutoff" in LINKS.names()


def test_its_settings_are_in_the_table_and_set_by_their_dotted_names(cutoff):
    # Execute
    rows = {name: default for name, default, _ in settings_table()}
    config = Config().with_overrides(["link=cutoff", "link.cutoff.cutoff_m=30",
                                      "link.cutoff.rate_bps=1e6"])
    # Assert: listed with their defaults; read back typed; the model gets them as `own`
    assert rows["link.cutoff.rate_bps"] == "200000.0" and rows["link.cutoff.cutoff_m"] == "50.0"
    own = config.plugin_settings("link.cutoff")
    assert (own.cutoff_m, own.rate_bps) == (30.0, 1e6)
    assert config.setting("link.cutoff.cutoff_m") == 30.0
    assert "[link.cutoff]\nrate_bps = 1000000.0\ncutoff_m = 30.0" in config.to_toml()


@pytest.mark.parametrize(("setting", "named"), [
    ("link.cutoff.cutof_m=30", "link.cutoff.cutof_m"),  # a field it does not have
    ("link.cutoff.cutoff_m=-1", "link.cutoff.cutoff_m"),  # its own check
])
def test_a_bad_setting_of_the_new_link_is_one_line_and_exit_2(cutoff, tmp_path, capsys,
                                                               setting, named):
    # Execute
    code = main(["run", "--out", str(tmp_path / "out"), "--set", "map=grid:3x3", "--set",
                 "learning=false", "--set", "steps=1", "--quiet", "--set", "link=cutoff",
                 "--set", setting])
    # Assert
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and named in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_world_runs_with_it_and_its_cutoff_cuts(cutoff):
    from mobidfl.model.world import MobiDFLModel

    # Execute: beyond the radius the cutoff never bites: the same world as fixed_rate at
    # the same rate; at 30 m it cuts what pairs in range carry
    wide = MobiDFLModel(**SMALL, **{"link": "cutoff", "link.cutoff.cutoff_m": 1000.0,
                                    "link.cutoff.rate_bps": 2e5}).run().model_table()
    fixed = MobiDFLModel(**SMALL, **{"link": "fixed_rate", "link.rate_bps": 2e5})
    fixed_table = fixed.run().model_table()
    near = MobiDFLModel(**SMALL, **{"link": "cutoff", "link.cutoff.cutoff_m": 30.0,
                                    "link.cutoff.rate_bps": 2e5})
    near_table = near.run().model_table()
    # Assert
    assert near.link.own.cutoff_m == 30.0 and near.link.options.efficiency == 0.59
    np.testing.assert_array_equal(wide.to_numpy(float), fixed_table.to_numpy(float))
    assert wide["bytes_sent"].iloc[1:].gt(0).all()
    assert near_table["bytes_sent"].sum() < wide["bytes_sent"].sum()


def test_its_settings_without_it_are_warned_and_its_namespace_is_checked(cutoff):
    # Execute: a link.cutoff setting while fixed_rate runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Config.from_settings({"link": "fixed_rate", "link.cutoff.cutoff_m": 30.0})
    shown = [str(w.message) for w in caught if issubclass(w.category, InertSettingWarning)]

    # Assert: one line naming it and its reader
    assert len(shown) == 1 and shown[0].startswith("link.cutoff.cutoff_m=30.0 has no effect")
    assert "link cutoff" in shown[0]

    # Assert: a link model's own settings live under link.<its name>, checked at definition
    @dataclass(frozen=True, kw_only=True)
    class Elsewhere(PluginSettings):
        namespace: ClassVar[str] = "cutoff2"
        x: float = setting(1.0, "nothing")

    with pytest.raises(TypeError, match="link.cutoff2"):
        type("Cutoff2", (RateLink,), {"name": "cutoff2", "settings_class": Elsewhere})


def test_the_old_short_names_of_moved_link_settings_read_the_same_values():
    # Execute: the names before link models owned their namespaces, and the new ones
    old = Config.from_settings({"link": "distance_rate", "link.table": "0:2e6,50:1e6"})
    new = Config.from_settings({"link": "distance_rate",
                                "link.distance_rate.table": "0:2e6,50:1e6"})
    rates = Config().with_overrides(["link=fixed_rate", "link.rate_bps=1e6",
                                     "link.kind_rates=vehicle-pedestrian:2e6"])
    # Assert: the same config; the old name still names the setting in messages
    assert old == new and old.setting("link.table") == "0:2e6,50:1e6"
    assert rates.plugin_settings("link.fixed_rate").rate_bps == 1e6
    assert rates.setting("link.fixed_rate.kind_rates") == "vehicle-pedestrian:2e6"
    with pytest.raises(ConfigError, match=r"setting 'link\.rate_bps' = -1\.0 "):
        Config.from_settings({"link": "fixed_rate", "link.rate_bps": -1.0})
    with pytest.raises(ConfigError, match="one name per setting"):
        Config.from_settings({"link.rate_bps": 1e6, "link.fixed_rate.rate_bps": 2e6})
