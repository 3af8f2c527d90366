"""``import mobidfl``: the one public entry point (the model, settings, registries, bases,
sweeps, reports) and the ground floor under ``mobidfl.*`` that every package builds on."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mobidfl

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_is_the_object_its_module_implements():
    # Prepare / Execute: resolve every exported name through the front door
    resolved = {name: getattr(mobidfl, name) for name in mobidfl.__all__}
    # Assert: the very object of the implementing module, and the model package's door agrees
    for name, value in resolved.items():
        assert value is getattr(importlib.import_module(mobidfl._EXPORTS[name]), name), name
    from mobidfl.errors import ConfigError
    from mobidfl.model import Config, MobiDFLModel
    from mobidfl.plugins import POLICIES
    from mobidfl.settings import PluginSettings

    assert (mobidfl.MobiDFLModel, mobidfl.Config, mobidfl.ConfigError) == (
        MobiDFLModel, Config, ConfigError)
    assert mobidfl.POLICIES is POLICIES and mobidfl.PluginSettings is PluginSettings
    assert {"dpsgd", "cached_lru"} <= set(mobidfl.POLICIES)


def test_an_unknown_name_is_an_attribute_error():
    # Execute / Assert
    with pytest.raises(AttributeError, match="no attribute 'MobiDFLModle'"):
        mobidfl.MobiDFLModle  # noqa: B018 - the attribute lookup is what must raise


def test_the_ground_floor_imports_nothing_above_it():
    # Prepare / Execute: a fresh interpreter importing the ground floor and the maps
    code = (
        "import sys, mobidfl.errors, mobidfl.settings, mobidfl.plugins, mobidfl.maps.world; "
        "print(sorted({'.'.join(m.split('.')[:2]) for m in sys.modules}"
        " & {'mobidfl.model', 'mobidfl.agents', 'mobidfl.analysis'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout.strip()
    # Assert
    assert out == "[]"
