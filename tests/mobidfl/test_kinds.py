"""The agent kinds are defined once (``mobidfl/settings.py``): everything else that names a kind
derives from that table or is checked against it here."""

from __future__ import annotations

from dataclasses import fields

from mobidfl.model.config import Config, KindSettings, settings_table
from mobidfl.settings import AGENT_KINDS, COUNT_SETTING, KIND_POLICY, KINDS, auto_policies


def test_the_config_has_one_count_and_one_kind_table_per_row_in_the_kinds_order():
    # Prepare
    defaults = Config()
    declared = [f for f in fields(Config) if f.name != "provenance"]
    # Execute
    tables = [f.name for f in declared if f.type in (KindSettings, "KindSettings")]
    counts = [f.name for f in declared if f.name in set(COUNT_SETTING.values())]
    # Assert: the fields follow the table, with the table's defaults and help
    assert tables == list(KINDS) == [k.name for k in AGENT_KINDS]
    assert counts == [k.count_setting for k in AGENT_KINDS]
    rows = {name: (default, help_text) for name, default, help_text in settings_table()}
    for kind in AGENT_KINDS:
        assert defaults.count(kind.name) == kind.count
        assert rows[kind.count_setting] == (repr(kind.count), kind.count_help)
        assert defaults.kind(kind.name) == KindSettings(mobility=kind.mobility, speed=kind.speed)
        assert defaults.policy_of(kind.name) == kind.policy == KIND_POLICY[kind.name]
    assert auto_policies() in rows["policy"][1]


def test_every_kind_has_its_agent_class_and_every_reader_uses_the_one_table():
    # Prepare
    from mobidfl.agents.kinds import AGENT_CLASSES
    from mobidfl.agents.mobility.base import MobilityModel
    from mobidfl.model import config, links

    # Execute / Assert: one agent class per kind; the copies are gone (the same object)
    assert list(AGENT_CLASSES) == list(KINDS)
    assert all(cls.kind == kind for kind, cls in AGENT_CLASSES.items())
    assert links.KINDS is KINDS and config.KINDS is KINDS
    assert MobilityModel.kinds == frozenset(KINDS)


def test_every_per_kind_table_outside_the_settings_covers_every_kind():
    # Prepare: the tables a new kind needs a row in (cited energy, the app's look)
    from mobidfl.analysis.app.look import KIND_COLOURS, KIND_SHAPES
    from mobidfl.model.maths.energy import J_PER_FLOP

    # Execute / Assert
    for table in (J_PER_FLOP, KIND_COLOURS, KIND_SHAPES):
        assert set(table) == set(KINDS)


def test_kinds_sharing_a_policy_are_named_together_in_the_policy_help():
    # Execute / Assert: the help of `policy` as the settings reference shows it
    assert auto_policies() == (
        "vehicle cached_lru, pedestrian dpsgd, sensor and uav fedavg_weighted"
    )
