"""``plan()`` is the link contract: a link model is one class that says what each stay of a
step can carry; a rate-based one writes only ``rate()``."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from mobidfl.contact_table import ContactTable
from mobidfl.model.links import LinkModel, LinkPlan, RateLink
from mobidfl.model.links_ns3 import Ns3Link
from mobidfl.plugins import LINKS

SMALL = {
    "map": "grid:5x5", "vehicles": 8, "pedestrians": 6, "sensors": 0, "uavs": 0, "steps": 2,
    "test_size": 60, "local_steps": 1, "seed": 4,
}


class WholeStay(LinkModel):
    """Toy: every stay carries every message at once, with no airtime (an unlimited radio)."""

    name = "toy_whole_stay"

    def plan(self, table: ContactTable, *, kinds: np.ndarray, message_bytes: int,
             n: int) -> LinkPlan:
        unlimited = np.full(len(table), np.inf)
        return LinkPlan(table=table, capacity=unlimited, byte_rate=unlimited, n=n,
                        message_bytes=message_bytes, link=self)


@pytest.fixture
def toy_link():
    LINKS.register(WholeStay)
    yield WholeStay.name
    LINKS.unregister(WholeStay.name)


def test_a_link_model_that_writes_only_plan_runs_a_world_like_an_unlimited_rate(toy_link):
    from mobidfl.model.world import MobiDFLModel

    # Execute: the toy link, and fixed_rate at an unlimited rate, on the same world
    toy = MobiDFLModel(**SMALL, **{"link.model": toy_link}).run().model_table()
    rate = MobiDFLModel(**SMALL, **{"link.model": "fixed_rate", "link.rate_bps": math.inf})
    table = rate.run().model_table()
    # Assert: the same tables, bytes counted, nothing aborted
    assert list(toy.columns) == list(table.columns)
    np.testing.assert_array_equal(toy.to_numpy(float), table.to_numpy(float))
    assert toy["bytes_received"].iloc[1:].gt(0).all() and toy["transfers_aborted"].sum() == 0


def test_plan_and_rate_are_declared_contracts():
    # Prepare: a link without plan, and a rate-based one without rate
    no_plan = type("NoPlan", (LinkModel,), {"name": "no_plan"})
    no_rate = type("NoRate", (RateLink,), {"name": "no_rate"})
    settings = SimpleNamespace(seed=0)
    # Execute / Assert
    with pytest.raises(TypeError, match="plan"):
        no_plan(settings=settings)
    with pytest.raises(TypeError, match="rate"):
        no_rate(settings=settings)
    assert "plan" in vars(Ns3Link) and not hasattr(Ns3Link, "rate")
    assert all(issubclass(LINKS[name], RateLink) for name in ("ideal", "fixed_rate",
                                                              "distance_rate"))
