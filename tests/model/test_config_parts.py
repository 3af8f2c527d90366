"""``Config`` is plain data plus one explicit resolution step: no hidden attributes, one
table of old names, and building one stays cheap (no torch)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from mobidfl.model.config import Config, canonical_name, old_names
from mobidfl.model.config.fields import _plugin_namespaces as plugin_namespaces

ROOT = Path(__file__).resolve().parents[2]


def test_building_a_config_does_not_import_torch():
    # Prepare: a fresh interpreter (this one has torch from conftest)
    code = (
        "import sys\n"
        "from mobidfl.model.config import Config\n"
        "Config()\n"
        "raw = Config(**{'psfl.sigma': 2.0, 'rm_cells': 3.0, 'vehicle_speed': 4.0, 'lr': 0.1})\n"
        "assert (raw.psfl.sigma, raw.dam.rm_cells, raw.vehicle.speed) == (2.0, 3.0, 4.0)\n"
        "print('torch' in sys.modules, 'mesa_geo' in sys.modules)\n"
    )
    # Execute
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout.split()
    # Assert: nor mesa-geo (the agent classes load only with the Mesa model)
    assert out == ["False", "False"]


def test_a_resolved_config_holds_only_its_declared_fields():
    # Execute
    config = Config.from_settings({"preset": "cached_dfl_003", "psfl_sigma": 3.0})
    # Assert: what resolution recorded is a declared field, not a hidden attribute
    assert set(vars(config)) == {f.name for f in fields(Config)}
    assert Config.__init__.__qualname__ == "Config.__init__"
    assert config.provenance.explicit == {"preset": "cached_dfl_003", "psfl.sigma": 3.0}
    assert config.provenance.spelling["psfl.sigma"] == "psfl_sigma"
    assert set(config.provenance.origin) == config.derived_settings() != frozenset()
    assert config == Config(**{f.name: getattr(config, f.name) for f in fields(Config)
                               if f.name != "provenance"})


def test_every_old_name_is_in_the_one_table_and_reads_its_setting():
    # Prepare
    config = Config()
    table = old_names()
    aliases = {
        f.metadata["alias"]: f"{namespace}.{f.name}"
        for namespace, own in plugin_namespaces().items()
        for f in fields(own) if f.metadata.get("alias")
    }
    # Execute / Assert: plug-in aliases and per-kind underscored names, each to its setting
    assert aliases.items() <= table.items() and "vehicle_mobility" in table
    for old, public in table.items():
        assert canonical_name(old) == public
        assert config.setting(old) == config.setting(public)
    for old, public in aliases.items():  # a namespace's own name (`link`) reads the namespace
        expected = config.plugins[old] if old in config.plugins else config.setting(public)
        assert getattr(config, old) == expected
