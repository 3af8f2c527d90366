"""The one typed, validated run configuration, and everything that reads or writes it.

:class:`Config` is plain data (the fields of :class:`ConfigFields`, one per public setting)
plus the entry points that build it: :meth:`Config.from_settings`, :meth:`Config.from_toml`,
:meth:`Config.updated`. Each passes what was given through one explicit resolution step
(:mod:`~mobidfl.model.config.resolution`): names, preset, auto data set, what the mobility
models declare, what the policies require, then every check.

A setting is declared once, as a field made by :func:`mobidfl.settings.setting`: its type,
default, unit, help, bounds, role (``world``, ``run`` or ``policy``), the plug-ins that read
it and when. Everything else is derived from that declaration: the names and their parsing,
the inert-setting warning, the bench's world/run split (:func:`setting_role`), the settings
reference (docs/reference/settings.md) and the app's inputs. Adding a core setting is adding
one field to :class:`ConfigFields` in ``model/config/fields.py`` (docs/reference/layout.md
shows it; a test adds one).

The same names work as ``--set name=value`` on the command line, as keys in a TOML file, as
keyword arguments of :class:`mobidfl.model.world.MobiDFLModel` (so ``mesa.batch_run`` can sweep
them) and as rows of the settings reference. Per-kind settings are dotted
(``vehicle.mobility``); each policy, mobility model and link model owns its settings
(``psfl.sigma``). Paper presets (one TOML file per seed paper, in ``presets/``) fill what the
user did not give.

The modules, one job each, each importing only those before it:

* :mod:`~mobidfl.model.config.value`: one value (type and check);
* :mod:`~mobidfl.model.config.fields`: the fields (:class:`ConfigFields`);
* :mod:`~mobidfl.model.config.report`: each warning once per command (:func:`one_report`);
* :mod:`~mobidfl.model.config.names`: the names, old names and parsing by name;
* :mod:`~mobidfl.model.config.checks`: the whole-config checks (:func:`validated`);
* :mod:`~mobidfl.model.config.toml_files`: a config as TOML, and the paper presets;
* :mod:`~mobidfl.model.config.inert`: settings that cannot take effect (the inert warning);
* :mod:`~mobidfl.model.config.resolution`: the resolution step and :class:`Config`.

This package exports the names used outside it; the rest stay private to their modules.

A bad value fails at once with :class:`mobidfl.errors.ConfigError`, whose one-line message
names the setting (as it was written), the value and what is allowed.
"""

from __future__ import annotations

from mobidfl.model.config.checks import validated
from mobidfl.model.config.fields import ConfigFields, KindSettings
from mobidfl.model.config.inert import InertSettingWarning
from mobidfl.model.config.names import (
    UnknownSetting,
    check_one_name_each,
    flatten,
    old_names,
    parse_assignments,
    parse_value,
    public_names,
    required_world,
    setting_role,
    settings_table,
    warn_old_names,
)
from mobidfl.model.config.report import one_report
from mobidfl.model.config.resolution import (
    Config,
    canonical_name,
    declared_settings,
    policy_requirements,
)
from mobidfl.model.config.toml_files import dataset_present, load_preset, preset_names, read_toml
from mobidfl.model.config.value import CONTACT_OUTPUTS, SEED_MAX, mobility_fit
from mobidfl.settings import COUNT_SETTING, KINDS

__all__ = [
    "CONTACT_OUTPUTS",
    "COUNT_SETTING",
    "KINDS",
    "SEED_MAX",
    "Config",
    "ConfigFields",
    "InertSettingWarning",
    "KindSettings",
    "UnknownSetting",
    "canonical_name",
    "check_one_name_each",
    "dataset_present",
    "declared_settings",
    "flatten",
    "load_preset",
    "mobility_fit",
    "old_names",
    "one_report",
    "parse_assignments",
    "parse_value",
    "policy_requirements",
    "preset_names",
    "public_names",
    "read_toml",
    "required_world",
    "setting_role",
    "settings_table",
    "validated",
    "warn_old_names",
]
