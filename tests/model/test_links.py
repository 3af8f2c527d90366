"""Contacts carry bytes (issue 26): contact intervals, link models, transfers in the window."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config
from mobidfl.model.contacts import contact_intervals, contact_matrix, sub_samples
from mobidfl.model.links import PROFILES, make_link
from mobidfl.model.maths.cache import CacheEntry
from mobidfl.model.maths.link import (
    delivered_prefix,
    expected_attempts,
    fair_split,
    message_bytes,
    message_loss_probability,
    overlap_counts,
    parse_rate_table,
    shannon_rate,
    table_rate,
)
from mobidfl.model.policies.cached import CachedPolicy

SPEED = 13.89  # Cached-DFL: "a speed of 13.89 m/s and a communication distance of 100 m"
R = 100.0
STEP_S = 120.0
CNN_BYTES = message_bytes(29_034, dtype="fp32", overhead=64)  # Cached-DFL's CNN: 116,200 B


def head_on(offset_m: float = 0.0, gap_m: float = 1600.0) -> np.ndarray:
    """Two cars driving at each other at 13.89 m/s, ``offset_m`` apart sideways."""
    count = sub_samples(max_step_distance=SPEED * STEP_S, radius_m=R)
    t = np.arange(count + 1) / count * STEP_S
    a = np.stack([-gap_m / 2 + SPEED * t, np.zeros_like(t)], axis=1)
    b = np.stack([gap_m / 2 - SPEED * t, np.full_like(t, offset_m)], axis=1)
    return np.stack([a, b], axis=1)


def link_of(**settings):
    """A fixed_rate link that carries its whole rate (efficiency 1: exact windows)."""
    return make_link(
        Config.from_settings({"link.model": "fixed_rate", "link.efficiency": 1.0, **settings})
    )


# --- contact intervals -----------------------------------------------------------------------
def test_head_on_cars_are_in_range_for_7_2_seconds():
    # Execute
    table = contact_intervals(head_on(), radius_m=R, step_s=STEP_S)
    side = contact_intervals(head_on(offset_m=60.0), radius_m=R, step_s=STEP_S)
    # Assert: 2R / (2 v) = 7.1994 s, entering after (1600 - 100) m at 27.78 m/s
    assert (table.a.tolist(), table.b.tolist()) == ([0], [1])
    assert table.duration[0] == pytest.approx(2 * R / (2 * SPEED), rel=1e-9)
    assert table.t_start[0] == pytest.approx(1500.0 / (2 * SPEED), rel=1e-9)
    assert table.d_min[0] == pytest.approx(0.0, abs=1e-9)
    assert side.duration[0] == pytest.approx(2 * math.sqrt(R**2 - 60.0**2) / (2 * SPEED))
    assert side.d_min[0] == pytest.approx(60.0)


def test_a_pair_that_parts_and_meets_again_has_two_rows():
    # Prepare: b drives past a (static) and comes back within the step
    count = 48
    t = np.arange(count + 1) / count * STEP_S
    x = np.where(t <= 60.0, -400.0 + 800.0 * t / 60.0, 400.0 - 800.0 * (t - 60.0) / 60.0)
    trajectory = np.stack(
        [np.zeros((count + 1, 2)), np.stack([x, np.full_like(x, 30.0)], axis=1)], axis=1
    )
    # Execute
    table = contact_intervals(trajectory, radius_m=R, step_s=STEP_S)
    # Assert: in range while |x| <= sqrt(100^2 - 30^2) = 95.39 m, at 800 m per 60 s
    half = math.sqrt(R**2 - 30.0**2) / (800.0 / 60.0)
    assert len(table) == 2
    # float64: the chords are exact lines (t = 60 s is a sample) and cross R transversally
    # (radial speed 0.95 x the 13.3 m/s), so the root is well conditioned: a few roundings of
    # t <= 90 s (~1e-15 relative); measured bit-equal. rtol 1e-12 (was 1e-9) keeps 1000 x
    np.testing.assert_allclose(table.t_start, [30.0 - half, 90.0 - half], rtol=1e-12)
    np.testing.assert_allclose(table.t_end, [30.0 + half, 90.0 + half], rtol=1e-12)  # same
    np.testing.assert_allclose(table.d_min, [30.0, 30.0])


def test_contact_table_pairs_are_the_contact_matrix_pairs():
    # Prepare: 200 random walkers
    rng = np.random.default_rng(3)
    trajectory = np.cumsum(rng.normal(0, 20, (25, 200, 2)), axis=0)
    trajectory += rng.uniform(0, 1200, (1, 200, 2))
    # Execute
    table = contact_intervals(trajectory, radius_m=R, step_s=STEP_S)
    upper = contact_matrix(trajectory, radius_m=R, mode="during").tocoo()
    # Assert
    expected = {(int(i), int(j)) for i, j in zip(upper.row, upper.col, strict=True) if i < j}
    assert set(zip(table.a.tolist(), table.b.tolist(), strict=True)) == expected
    assert (table.t_end >= table.t_start).all() and (table.d_min <= R + 1e-9).all()
    assert len(table) > len(expected)  # some pairs part and meet again


# --- pure maths --------------------------------------------------------------------------------
def test_rate_table_steps_and_refuses_rates_rising_with_distance():
    distances, rates = parse_rate_table("0:27e6,50:12e6,100:6e6")
    np.testing.assert_array_equal(
        table_rate(np.array([0.0, 49.9, 50.0, 99.0, 150.0]), distances, rates),
        [27e6, 27e6, 12e6, 12e6, 6e6],
    )
    for bad in ("0:1e6,50:2e6", "10:1e6", "0:1e6,0:1e6", "x", "0:-1"):
        with pytest.raises(ValueError):
            parse_rate_table(bad)


def test_shannon_rate_falls_with_distance_and_stops_below_sensitivity():
    d = np.array([1.0, 50.0, 100.0, 300.0, 500.0, 5000.0])
    rate = shannon_rate(d, **PROFILES["dsrc"])
    assert rate[0] == 27e6  # capped at 802.11p's fastest rate (27 Mbit/s at 10 MHz)
    assert (np.diff(rate) <= 0).all() and rate[-1] == 0.0  # -85 dBm sensitivity
    assert 3e6 < rate[-2] < rate[-3] < 27e6
    for profile in PROFILES.values():
        assert (np.diff(shannon_rate(d, **profile)) <= 0).all()


def test_fair_split_halves_and_lends_what_one_side_leaves():
    got_a, got_b = fair_split(np.array([10, 2, 10]), np.array([10, 10, 0]), np.array([8, 8, 8]))
    np.testing.assert_array_equal(got_a, [4, 2, 8])
    np.testing.assert_array_equal(got_b, [4, 6, 0])


def test_delivered_prefix_counts_whole_messages_and_the_partial_one():
    assert delivered_prefix(np.array([5.0, 5.0, 5.0]), 12.0) == (2, 2.0)
    assert delivered_prefix(np.array([5.0, 5.0]), 10.0) == (2, 0.0)
    assert delivered_prefix(np.array([5.0]), 0.0) == (0, 0.0)


def test_overlap_counts_per_device():
    device = np.array([0, 0, 0, 1, 1])
    start = np.array([0.0, 5.0, 20.0, 0.0, 3.0])
    end = np.array([10.0, 8.0, 30.0, 2.0, 4.0])
    np.testing.assert_array_equal(overlap_counts(device, start, end), [2, 2, 1, 1, 1])


def test_loss_and_retries():
    assert expected_attempts(0.0, 7) == 1.0
    assert expected_attempts(0.5, 1) == pytest.approx(1.5)
    p = message_loss_probability(np.array([1500.0, 3000.0]), frame_bytes=1500, loss=0.5, retries=1)
    np.testing.assert_allclose(p, [0.25, 1 - 0.75**2])


# --- transfers within the window ---------------------------------------------------------------
def head_on_plan(link, *, offset_m: float = 0.0):
    table = contact_intervals(head_on(offset_m), radius_m=R, step_s=STEP_S)
    return link.plan(table, kinds=np.array(["vehicle", "vehicle"]), message_bytes=CNN_BYTES, n=2)


def test_dpsgd_models_cross_only_when_both_fit_the_window():
    # 0.3 Mbit/s x 7.2 s = 269,978 B >= 2 x 116,200; 0.2 Mbit/s: 179,986 B, half each < one model
    fast = head_on_plan(link_of(**{"link.rate_bps": 0.3e6}))
    slow = head_on_plan(link_of(**{"link.rate_bps": 0.2e6}))
    got_fast = fast.swap_models(np.array([[0, 1]]))
    got_slow = slow.swap_models(np.array([[0, 1]]))
    assert sorted(map(tuple, got_fast.tolist())) == [(0, 1), (1, 0)]
    assert len(got_slow) == 0
    np.testing.assert_array_equal(fast.received, [CNN_BYTES, CNN_BYTES])
    np.testing.assert_array_equal(slow.aborted, [1, 1])
    np.testing.assert_allclose(slow.sent, 0.2e6 * 2 * R / (2 * SPEED) / 8 / 2)
    # airtime: each side sent for half the window and received for the other half
    np.testing.assert_allclose(slow.tx_s + slow.rx_s, 2 * R / (2 * SPEED))


def cache_of(owner: int, origins: range, now: int) -> tuple[CacheEntry, dict[int, CacheEntry]]:
    own = CacheEntry(origin=owner, timestamp=now, size=10)
    return own, {o: CacheEntry(origin=o, timestamp=now - (o % 3), size=10) for o in origins}


def test_cached_dfl_sends_own_model_then_freshest_and_aborts_the_rest():
    # Prepare: 1 Mbit/s: 899,928 B in the window, 449,964 B a side = 3 models + 101,364 B
    plan = head_on_plan(link_of(**{"link.rate_bps": 1e6}))
    own_a, cache_a = cache_of(0, range(10, 20), now=5)
    own_b, cache_b = cache_of(1, range(20, 30), now=5)
    out_a = CachedPolicy.outbox(own_a, cache_a, CNN_BYTES)
    # Execute
    at_b, at_a = plan.send(0, 1, out_a, CachedPolicy.outbox(own_b, cache_b, CNN_BYTES))
    # Assert: own model first, then the cache freshest first (timestamp 5: origins 12, 15, ...)
    assert out_a[0][0] == (0, 5) and [key for key, _ in out_a[1:4]] == [(12, 5), (15, 5), (18, 5)]
    assert at_b == [(0, 5), (12, 5), (15, 5)]
    assert at_a == [(1, 5), (21, 5), (24, 5)]
    window = 1e6 * 2 * R / (2 * SPEED) / 8
    np.testing.assert_allclose(plan.sent, [window / 2, window / 2])
    np.testing.assert_array_equal(plan.received, [3 * CNN_BYTES, 3 * CNN_BYTES])
    np.testing.assert_array_equal(plan.aborted, [1, 1])


def test_an_unfinished_model_resumes_at_the_next_contact():
    # Prepare: 1 Mbit/s; the 4th message of each side is cut after 101,364 B
    link = link_of(**{"link.rate_bps": 1e6, "link.resume": True})
    own_a, cache_a = cache_of(0, range(10, 20), now=5)
    own_b, cache_b = cache_of(1, range(20, 30), now=5)
    first = head_on_plan(link)
    first.send(0, 1, CachedPolicy.outbox(own_a, cache_a, CNN_BYTES),
               CachedPolicy.outbox(own_b, cache_b, CNN_BYTES))
    cut = 1e6 * 2 * R / (2 * SPEED) / 8 / 2 - 3 * CNN_BYTES
    assert link.partial[(0, 1)] == ((18, 5), pytest.approx(cut))
    # Execute: they meet again; a sends only its cache (its own model is already there)
    again = head_on_plan(link)
    rest = [m for m in CachedPolicy.outbox(own_a, cache_a, CNN_BYTES) if m[0] == (18, 5)]
    at_b, _ = again.send(0, 1, rest, [])
    # Assert: only the missing bytes crossed
    assert at_b == [(18, 5)]
    assert again.sent[0] == pytest.approx(CNN_BYTES - cut)
    assert (0, 1) not in link.partial
    # Without resume the same message starts over
    plain = link_of(**{"link.rate_bps": 1e6})
    head_on_plan(plain).send(0, 1, CachedPolicy.outbox(own_a, cache_a, CNN_BYTES), [])
    assert plain.partial == {}


def test_setup_latency_and_a_shared_radio_shrink_the_window():
    slow_start = head_on_plan(link_of(**{"link.rate_bps": 1e6, "link.setup_s": 2.0}))
    window = 2 * R / (2 * SPEED)
    assert slow_start.capacity[0] == pytest.approx(1e6 * (window - 2.0) / 8)
    # Prepare: car 0 meets cars 1 and 2 at the same time (2 is 1's twin, 20 m aside)
    trajectory = head_on()
    trajectory = np.concatenate([trajectory, trajectory[:, 1:2] + [0.0, 20.0]], axis=1)
    table = contact_intervals(trajectory, radius_m=R, step_s=STEP_S)
    plan = link_of(**{"link.rate_bps": 1e6}).plan(
        table, kinds=np.array(["vehicle"] * 3), message_bytes=CNN_BYTES, n=3
    )
    rows = plan.rows_of(np.array([[0, 1], [1, 2]]))
    assert plan.capacity[rows[0]] == pytest.approx(1e6 * table.duration[rows[0]] / 8 / 2)
    assert plan.capacity[rows[1]] == pytest.approx(1e6 * table.duration[rows[1]] / 8 / 2)
    # Execute: every pair fills its share of the window with models
    plan.swap_models(np.array([[0, 1], [0, 2], [1, 2]]))
    # Assert: a shared radio sends at its full rate for part of the time, not at its share
    # for all of it (airtime = bytes / 1 Mbit/s, not bytes / 0.5 Mbit/s)
    np.testing.assert_allclose(plan.tx_s, plan.sent * 8 / 1e6)
    np.testing.assert_allclose(plan.rx_s.sum(), plan.tx_s.sum())


def test_kind_rates_pick_the_pair_of_kinds():
    link = link_of(**{"link.kind_rates": "vehicle-pedestrian:1e6", "link.rate_bps": 5e6})
    kinds_a = np.array(["pedestrian", "vehicle", "vehicle"])
    kinds_b = np.array(["vehicle", "vehicle", "sensor"])
    np.testing.assert_array_equal(link.rate(np.zeros(3), kinds_a, kinds_b), [1e6, 5e6, 5e6])


# --- the model: ideal unchanged, columns, bad settings -------------------------------------------
SMALL = {
    "map": "grid:5x5", "vehicles": 8, "pedestrians": 6, "sensors": 0, "uavs": 0, "steps": 2,
    "test_size": 60, "local_steps": 1, "seed": 4,
}


def test_ideal_and_an_unlimited_link_give_the_same_run_and_the_link_adds_columns():
    from mobidfl.model.world import MobiDFLModel

    # Execute: cached_lru cars and dpsgd pedestrians, without and with the link code path
    ideal = MobiDFLModel(**SMALL).run().model_table()
    unlimited = MobiDFLModel(
        **SMALL, **{"link.model": "fixed_rate", "link.rate_bps": math.inf}
    ).run()
    table = unlimited.model_table()
    # Assert
    assert list(table.columns[: len(ideal.columns)]) == list(ideal.columns)
    np.testing.assert_array_equal(
        table[ideal.columns].to_numpy(float), ideal.to_numpy(float)
    )
    # the ideal link counts the same bytes (compared above with every ideal column) and
    # accounts nothing that needs a rate
    assert {"bytes_sent", "bytes_received", "transfers_aborted", "airtime_s", "energy_j"} <= set(
        table.columns
    ) and {"bytes_sent", "bytes_received"} <= set(ideal.columns)
    assert not {"transfers_aborted", "airtime_s", "energy_j"} & set(ideal.columns)
    assert table["bytes_received"].iloc[1:].gt(0).all()
    size = unlimited.learner.engine.num_params * 4 + 64  # fp32 + 64 B per message
    assert (table["bytes_received"] % size == 0).all()
    assert table["transfers_aborted"].sum() == 0 and table["airtime_s"].sum() == 0
    agents = unlimited.agent_table()
    last = agents[agents["step"] == 2]
    assert last["bytes_received"].sum() == pytest.approx(table["bytes_received"].sum())
    contacts = unlimited.contacts_table()
    assert list(contacts.columns) == ["step", "a", "b", "t_start", "t_end", "d_min"]
    assert set(contacts["step"]) == {1, 2}


# --- bytes at the ideal link: counted, not limited --------------------------------------------
KING_3X3 = {  # 9 static sensors, one per 100 m cell of a 3 x 3 grid, each hearing its 8 cells
    "map": "grid:4x4:100", "cell_m": 100.0, "vehicles": 0, "pedestrians": 0, "sensors": 9,
    "uavs": 0, "sensor.mobility": "static", "radius_m": 150.0, "steps": 2, "test_size": 50,
    "local_steps": 1, "seed": 3,
}
KING_EDGES = 20  # 3 x 2 across + 2 x 3 down + 2 x (2 x 2) diagonals of a 3 x 3 king's graph
KING_DEGREES = [3, 3, 3, 3, 5, 5, 5, 5, 8]  # 4 corners, 4 edge centres, the middle
MLP_PARAMS = 784 * 128 + 128 + 128 * 10 + 10  # the 784-128-10 MLP: 101,770 parameters


def test_ideal_dpsgd_sends_two_models_per_contact_on_a_fixed_graph():
    from mobidfl.model.world import MobiDFLModel

    # Execute: plain D-PSGD on the fixed king's graph, no link model
    model = MobiDFLModel(**KING_3X3, **{"sensor.policy": "dpsgd"}).run()
    table = model.model_table()
    # Assert: each contact swaps one model each way every step, at fp32 + 64 B
    size = MLP_PARAMS * 4 + 64
    assert model.learner.engine.num_params == MLP_PARAMS
    assert table["contacts"].iloc[1:].tolist() == [KING_EDGES] * 2
    assert table["bytes_sent"].tolist() == [0.0] + [2 * KING_EDGES * size] * 2
    assert table["bytes_received"].tolist() == table["bytes_sent"].tolist()
    agents = model.agent_table()
    last = agents[agents["step"] == 2]
    assert sorted(last["bytes_sent"] / size) == [2 * d for d in KING_DEGREES]  # two steps
    assert sorted(last["bytes_received"] / size) == [2 * d for d in KING_DEGREES]


def test_ideal_counts_the_size_on_the_air_and_central_fedavg_s_uploads_and_downloads():
    from mobidfl.model.world import MobiDFLModel

    # Execute: a central server, the model on the air weighed as 1,000 bf16 parameters
    model = MobiDFLModel(**KING_3X3, **{"sensor.policy": "central_fedavg",
                                        "link.params": 1000, "link.dtype": "bf16"}).run()
    table = model.model_table()
    # Assert: every sensor uploads one model and downloads one per step, whatever it meets;
    # the server is not an agent, so an upload counts as sent and a download as received
    size = 1000 * 2 + 64
    assert table["bytes_sent"].tolist() == [0.0, 9 * size, 9 * size]
    assert table["bytes_received"].tolist() == [0.0, 9 * size, 9 * size]


def test_ideal_bytes_survive_a_checkpoint(tmp_path):
    from mobidfl.model.checkpoint import load, save_atomic
    from mobidfl.model.world import MobiDFLModel

    settings = {**KING_3X3, "sensor.policy": "dpsgd"}
    whole = MobiDFLModel(**settings).run()
    half = MobiDFLModel(**settings).run(steps=1)
    save_atomic(half.state_dict(), tmp_path / "state.pt")
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(tmp_path / "state.pt"))
    resumed.run()
    for column in ("bytes_sent", "bytes_received"):
        np.testing.assert_array_equal(resumed.link_totals[column], whole.link_totals[column])
        assert resumed.model_table()[column].tolist() == whole.model_table()[column].tolist()


def test_a_slow_link_delivers_less_and_costs_energy():
    from mobidfl.model.world import MobiDFLModel

    slow = MobiDFLModel(
        **SMALL, **{"link": "fixed_rate", "link.rate_bps": 2e5, "link.params": 1000,
                    "link.dtype": "bf16"}
    ).run()
    table = slow.model_table().iloc[1:]
    assert (table["bytes_received"] % (1000 * 2 + 64) == 0).all()  # the simulated size
    assert (table["transfers_aborted"] > 0).all()
    assert (table["bytes_received"] < table["bytes_sent"]).all()
    assert (table["energy_j"] > 0).all() and (table["airtime_s"] > 0).all()


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("link.rate_bps=-5", "link.rate_bps"),
        ("link.model=warp_drive", "link.model"),
        ("link=warp_drive", "'link'"),
        ("link.table=0:1e6,50:2e6", "link.table"),
        ("link.kind_rates=car-car:1e6", "link.kind_rates"),
        ("link.loss=1", "link.loss"),
    ],
)
def test_a_bad_link_setting_is_one_line_and_exit_2(tmp_path, capsys, setting, named):
    # Execute
    code = main(["run", "--out", str(tmp_path / "out"), "--set", "map=grid:3x3", "--set",
                 "learning=false", "--set", "steps=1", "--quiet", "--set", setting])
    # Assert
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and named in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_link_with_a_policy_that_ignores_it_is_refused():
    with pytest.raises(ConfigError, match="vehicle policy central_fedavg ignores the link"):
        Config.from_settings({"link": "fixed_rate", "vehicle.policy": "central_fedavg"})
    with pytest.raises(ConfigError, match="contact"):
        Config.from_settings({"link": "distance_rate", "contact": "end"})
    Config.from_settings({"link": "distance_rate"})  # the default fleet honours it


def test_resume_with_a_policy_that_never_resumes_is_refused():
    # D-PSGD swaps whole models each contact: link.resume would be a silent no-op there
    with pytest.raises(ConfigError, match=r"link.resume.*no policy of this world resumes.*\(dpsgd"):
        Config.from_settings({"link": "fixed_rate", "link.resume": True,
                              "vehicle.policy": "dpsgd", "pedestrians": 0, "sensors": 0,
                              "uavs": 0})
    Config.from_settings({"link": "fixed_rate", "link.resume": True,  # cars resume
                          "vehicle.policy": "cached_lru"})


def test_replayed_meetings_and_a_link_are_refused_together():
    # Cached-DFL's Table 2 replay (cached.passes) is a statistic, not bytes sent again.
    settings = {"preset": "cached_dfl_003", "link": "fixed_rate", "link.rate_bps": 1e6}
    Config.from_settings(settings)
    with pytest.raises(ConfigError, match="cached.passes"):
        Config.from_settings(settings | {"cached.passes": 10})


def test_a_checkpoint_keeps_the_link_state(tmp_path):
    from mobidfl.model.checkpoint import load, save_atomic
    from mobidfl.model.world import MobiDFLModel

    settings = {**SMALL, "link": "fixed_rate", "link.rate_bps": 3e5,
                "link.resume": True, "link.loss": 0.05}
    whole = MobiDFLModel(**settings).run()
    half = MobiDFLModel(**settings).run(steps=1)
    save_atomic(half.state_dict(), tmp_path / "state.pt")
    resumed = MobiDFLModel(**settings)
    resumed.load_state_dict(load(tmp_path / "state.pt"))
    resumed.run()
    np.testing.assert_array_equal(
        resumed.model_table().to_numpy(float), whole.model_table().to_numpy(float)
    )
    assert len(resumed.contacts_table()) == len(whole.contacts_table())


def test_a_run_with_a_link_writes_its_contact_table_and_the_one_events(tmp_path):
    import pandas as pd

    out = tmp_path / "out"
    code = main(["run", "--out", str(out), "--quiet", "--set", "map=grid:4x4", "--set",
                 "learning=false", "--set", "steps=2", "--set", "vehicles=12", "--set",
                 "pedestrians=0", "--set", "sensors=0", "--set", "uavs=0", "--set",
                 "link=distance_rate"])
    assert code == 0
    contacts = pd.read_csv(out / "contacts.csv")
    events = pd.read_csv(out / "contacts_one.txt", sep=" ", header=None,
                         names=["time", "event", "a", "b", "state"])
    assert len(contacts) > 0 and len(events) == 2 * len(contacts)
    assert (events["event"] == "CONN").all() and events["time"].is_monotonic_increasing
    first = contacts.iloc[0]
    ups = events[(events["a"] == first["a"]) & (events["b"] == first["b"])]
    assert ups["state"].iloc[0] == "up"
    assert ups["time"].iloc[0] == pytest.approx((first["step"] - 1) * 120.0 + first["t_start"])
