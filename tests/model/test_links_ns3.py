"""The link model against ns-3 802.11p (issue 26): one head-on pass, small enough for CI.

Runs when the optional extra is installed (``pip install 'mobidfl[ns3]'``); importing ns-3
takes over a minute on a busy 2-core machine, hence ``slow``. The full check is
``analysis/studies/ns3_link_check.py`` (docs/concepts/links.md has its numbers).
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("ns") is None,
        reason="ns-3 not installed (pip install 'mobidfl[ns3]')",
    ),
]


def test_a_6_mbit_pass_in_ns3_carries_what_the_calibrated_fixed_rate_says():
    from mobidfl.analysis.studies.ns3_link_check import mobidfl_pass, ns3_pass

    # Execute: two cars head-on at 13.89 m/s, R = 100 m (a 7.2 s window), 6 Mbit/s
    ns3 = ns3_pass(speed=13.89, offset=0.0, gap=400.0, mode="OfdmRate6MbpsBW10MHz",
                   radius=100.0)
    raw = mobidfl_pass(speed=13.89, offset=0.0, gap=400.0, radius=100.0,
                       settings={"link": "fixed_rate", "link.rate_bps": 6e6,
                                 "link.efficiency": 1.0})
    calibrated = mobidfl_pass(speed=13.89, offset=0.0, gap=400.0, radius=100.0,
                              settings={"link": "fixed_rate", "link.rate_bps": 6e6,
                                        "link.efficiency": 0.84})
    # Assert: the MAC leaves ~84 % of 6 Mbit/s for UDP payload when one car sends alone
    # (the default, 0.59, is the two-way fit of validation/ns3_link.py)
    assert raw == pytest.approx(6e6 / 8 * 200 / (2 * 13.89), rel=1e-6)
    assert 0.80 < ns3 / raw < 0.88
    assert calibrated == pytest.approx(ns3, rel=0.03)
