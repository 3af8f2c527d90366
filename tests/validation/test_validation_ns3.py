"""MobiDFL's link model beside ns-3 802.11p on real contacts (validation/ns3_link.py).

The calibration maths always run; the small case (20 short stays sampled from a 100-car
Cached-DFL run on the authors' Manhattan, each replayed twice in ns-3) runs when the optional
extra is installed (``pip install 'mobidfl[ns3]'``), else it is skipped with that reason.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from validation.ns3_calibrate import cross_validated, fit_efficiency_setup, predict
from validation.ns3_link import relative_errors, run, summary


def test_the_fit_recovers_a_known_efficiency_and_set_up_latency():
    # Arrange: stays of 0.5-30 s at 2-3.4 MB/s raw, "measured" = 0.6 x raw x (1 - 0.3 s / d)
    rng = np.random.default_rng(0)
    duration = rng.uniform(0.5, 30.0, 40)
    raw = duration * rng.uniform(2e6, 3.4e6, 40)
    measured = predict(raw, duration, efficiency=0.6, setup_s=0.3)
    # Act
    e, s = fit_efficiency_setup(measured, raw, duration)
    contacts = [{"ns3_udp": [y / 2, y / 2], "raw": r, "t_start": 1.0, "t_end": 1.0 + d}
                for y, r, d in zip(measured, raw, duration, strict=True)]
    fit = cross_validated(contacts)
    # Assert
    assert (e, s) == pytest.approx((0.6, 0.3), rel=1e-9)
    assert np.abs(fit["errors"]).max() < 1e-9
    # a set-up longer than the stay carries nothing, never a negative byte count
    assert predict(np.array([1e6]), np.array([0.2]), efficiency=0.6, setup_s=0.3)[0] == 0.0


def test_errors_are_relative_to_ns3_with_one_message_as_the_floor():
    err = relative_errors(np.array([110.0, 90.0, 50.0, 0.0]), np.array([100.0, 100.0, 0.0, 0.0]),
                          floor=100.0)
    assert err == pytest.approx([0.1, -0.1, 0.5, 0.0])
    s = summary(err)
    assert s["within_10pc"] == 0.75 and s["median"] == pytest.approx(0.05)


def test_policy_bytes_are_whole_messages_of_a_half_and_half_split():
    from validation.ns3_link import policy_whole

    need = 11 * 116_200
    # 3 messages' worth: 1.5 each way, so one whole message each way
    assert policy_whole(3 * 116_200, need=need) == 2 * 116_200
    # room for everything: 22 messages; none: 0
    assert policy_whole(2 * need + 1, need=need) == 2 * need
    assert policy_whole(0.0, need=need) == 0.0


def test_without_ns3_the_case_is_one_skipped_row(monkeypatch, tmp_path):
    monkeypatch.setattr("validation.ns3_link.have_ns3", lambda: False)
    rows = run(size="small", seeds=1, out=tmp_path)
    assert [(r.case, r.verdict) for r in rows] == [("ns3_link", "skipped")]
    assert "pip install 'mobidfl[ns3]'" in rows[0].note


def test_calibrating_from_a_missing_file_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "validation.ns3_calibrate",
                           str(tmp_path / "none.json")],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "none.json" in proc.stderr


@pytest.mark.slow  # ~40 s of CPU (ns-3's import 8-30 s); minutes of wall time on a loaded machine
def test_small_case_against_ns3(tmp_path):
    pytest.importorskip("ns", reason="ns-3 not installed (pip install 'mobidfl[ns3]')")
    from validation.ns3_link import measure, rows_from

    # Execute: 20 short stays from the 100-car Cached-DFL run, replayed in ns-3
    m = measure(size="small", seeds=1)
    contacts = m["contacts"]
    # Assert: real contacts of the kind asked for, replayed over MobiDFL's exact window
    assert len(contacts) == 20
    assert all(0 < c["t_end"] - c["t_start"] <= 4.0 for c in contacts)
    assert all(sum(c["ns3_udp"]) > 0 for c in contacts)
    # ns-3 carries less than the raw profile in every stay (the MAC's overhead)
    assert all(sum(c["ns3_udp"]) < c["raw"] for c in contacts)
    # the fitted efficiency and set-up predict held-out stays (2-fold) within 10 %
    assert 0.4 < m["fit"]["efficiency"] < 0.84
    assert m["capacity_calibrated"]["within_10pc"] >= 0.8
    # the verdict table has the three quantities, and writes
    rows = rows_from(m)
    assert [r.verdict for r in rows][1] == "agree"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(m))
    proc = subprocess.run([sys.executable, "-m", "validation.ns3_calibrate", str(path)],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0 and "link.efficiency" in proc.stdout


# --- link = "ns3": the packet-level backend (model/links_ns3.py) ------------------------------
def _head_on(radius: float = 100.0, speed: float = 13.89, step_s: float = 20.0):
    from mobidfl.model.contacts import contact_intervals

    t = np.linspace(0.0, step_s, 65)
    a = np.stack([-150.0 + speed * t, np.zeros_like(t)], axis=1)
    b = np.stack([150.0 - speed * t, np.full_like(t, 10.0)], axis=1)
    return contact_intervals(np.stack([a, b], axis=1), radius_m=radius, step_s=step_s)


def test_ns3_link_refuses_big_worlds_and_frame_loss_with_one_line():
    from mobidfl.errors import ConfigError
    from mobidfl.model.config import Config
    from mobidfl.model.links import make_link

    with pytest.raises(ConfigError, match="at most 50 agents .*has 100"):
        make_link(Config.from_settings({"preset": "cached_dfl_003", "link": "ns3"}))
    with pytest.raises(ConfigError, match="link.loss"):
        make_link(Config.from_settings({"preset": "cached_dfl_003", "vehicles": 10,
                                        "link": "ns3", "link.loss": 0.1}))


def test_the_replayed_path_is_the_pairs_relative_motion_on_its_chords():
    from mobidfl.model.links_ns3 import relative_waypoints

    table = _head_on()
    path = np.array(relative_waypoints(table, 0))
    # Assert: starts and ends on the circle R at the stay's ends, closing at 2 x 13.89 m/s
    assert path[0, 0] == pytest.approx(table.t_start[0]) and path[-1, 0] == pytest.approx(
        table.t_end[0])
    assert np.hypot(path[[0, -1], 1], path[[0, -1], 2]) == pytest.approx([100.0, 100.0])
    assert np.all(np.diff(path[:, 0]) > 0)
    speed = np.hypot(*np.diff(path[:, 1:], axis=0).T) / np.diff(path[:, 0])
    assert speed == pytest.approx(2 * 13.89)


@pytest.mark.slow  # ns-3's import (8-20 s) and 7 s of saturated 802.11p
def test_ns3_link_carries_a_head_on_contact_as_tcp_over_80211p_does():
    pytest.importorskip("ns", reason="ns-3 not installed (pip install 'mobidfl[ns3]')")
    from mobidfl.model.config import Config
    from mobidfl.model.links import make_link

    table = _head_on()
    kinds = np.array(["vehicle", "vehicle"])
    settings = {"vehicles": 2, "pedestrians": 0, "sensors": 0, "uavs": 0, "radius_m": 100.0}
    ns3 = make_link(Config.from_settings({**settings, "link": "ns3"}))
    model = make_link(Config.from_settings({**settings, "link": "distance_rate",
                                            "link.efficiency": 1.0}))
    # Execute
    got = ns3.plan(table, kinds=kinds, message_bytes=116_200, n=2)
    raw = model.plan(table, kinds=kinds, message_bytes=116_200, n=2)
    # Assert: the 7.2 s window replayed; TCP both ways gets about half the raw dsrc capacity
    # (the ns3_link case's fit: 0.49), and the plan's policies send over it as usual
    assert ns3.replayed_s == pytest.approx(2 * 100.0 / (2 * 13.89) * np.sqrt(1 - 0.01), rel=1e-6)
    assert 0.35 < got.capacity[0] / raw.capacity[0] < 0.65
    arrived_b, arrived_a = got.send(0, 1, [(k, 116_200) for k in range(11)],
                                    [(k, 116_200) for k in range(11)])
    assert len(arrived_b) == len(arrived_a) == 11
