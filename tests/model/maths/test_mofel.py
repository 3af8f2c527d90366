"""Tests for mobidfl.model.maths.mofel (MoFeL: selection, baselines A1/A2, NTC/NFC)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mobidfl.model.maths.mofel import (
    Visits,
    connected_until,
    feasible,
    select,
    select_a1,
    select_a2,
    select_exact,
    select_greedy,
    selection_key,
)
from tests.mofel_oracle import (
    can_ever_train,
    connection_indicator,
    evaluate_cycles,
    nfc,
    ntc,
    route_visits,
    visits_from_routes,
)


def _visits(rows: list[tuple[int, int, float, float]]) -> Visits:
    c, s, e, x = zip(*rows, strict=True)
    return Visits(client=np.array(c), server=np.array(s), enter=np.array(e), exit=np.array(x))


# ------------------------------------------------------------------------------ mobility


def test_route_visits_stays_reach_over_speed_in_each_territory() -> None:
    # Prepare: route 0 -> 1 -> 0, d = (10, 20), v = 2, at t = 5 already 4 m into server 0.
    reach = np.array([10.0, 20.0])
    # Execute
    servers, enter, exit_ = route_visits([0, 1, 0], reach, 2.0, start=5.0, progress=4.0)
    # Assert: (10 - 4) / 2 = 3, then 20 / 2 = 10, then 10 / 2 = 5 time units.
    np.testing.assert_array_equal(servers, [0, 1, 0])
    np.testing.assert_allclose(enter, [5.0, 8.0, 18.0])
    np.testing.assert_allclose(exit_, [8.0, 18.0, 23.0])


def test_connected_until_feasible_and_indicator_on_hand_case() -> None:
    # Prepare: the same client as above, plus client 1 always in server 1 on [0, 100).
    v0 = visits_from_routes(
        [[0, 1, 0]], np.array([10.0, 20.0]), np.array([2.0]), start=5.0, progress=4.0
    )
    visits = Visits(
        client=np.r_[v0.client, 1],
        server=np.r_[v0.server, 1],
        enter=np.r_[v0.enter, 0.0],
        exit=np.r_[v0.exit, 100.0],
    )
    # Execute
    server, remaining = connected_until(visits, 9.0, n_clients=3)
    late_server, late_remaining = connected_until(visits, 30.0, n_clients=3)
    c = connection_indicator(visits, np.array([4.0, 5.0, 8.0]), n_clients=2, n_servers=2)
    # Assert: client 0 in server 1 until 18; client 2 has no route; client 0 gone at 30.
    np.testing.assert_array_equal(server, [1, 1, -1])
    np.testing.assert_allclose(remaining, [9.0, 91.0, 0.0])
    np.testing.assert_array_equal(late_server, [-1, 1, -1])
    assert late_remaining[0] == 0.0
    np.testing.assert_array_equal(c[0, 0], [False, True, False])  # [5, 8) half-open
    np.testing.assert_array_equal(c[0, 1], [False, False, True])
    # eqs. 5-7: the whole block [start, start + tau) inside one interval of that server.
    assert feasible(visits, 0, 1, 8.0, 10.0)  # ends exactly at exit 18
    assert not feasible(visits, 0, 1, 8.0, 10.5)  # would end after leaving
    assert not feasible(visits, 0, 1, 7.9, 1.0)  # still in server 0 at 7.9
    np.testing.assert_array_equal(feasible(visits, [0, 1], 1, 9.0, [9.0, 91.0]), [True, True])


def test_can_ever_train_is_reach_over_speed_at_least_tau() -> None:
    # Prepare: d = 50 and 100 m, v = 5 m/min, tau = 12 min.
    # Execute
    table = can_ever_train(np.array([50.0, 100.0])[None, :], np.array([[5.0]]), 12.0)
    # Assert: stays 10 and 20 min.
    np.testing.assert_array_equal(table, [[False, True]])


def test_visits_reject_overlapping_intervals_of_one_client() -> None:
    with pytest.raises(ValueError, match="overlapping"):
        _visits([(0, 0, 0.0, 5.0), (0, 1, 4.0, 8.0)])


# ------------------------------------------------------------------------------ selection


def test_eq8_slowest_client_sets_the_window() -> None:
    # Prepare: A (tau 2) leaves at 4; B and C (tau 5) stay until 10. Together with B, A
    # would have to stay until 0 + 5.
    visits = _visits([(0, 0, 0, 4), (1, 0, 0, 10), (2, 0, 0, 10)])
    tau = np.array([2.0, 5.0, 5.0])
    # Execute
    sel = select_exact(visits, tau, [0], 0.0, 10.0)
    # Assert: {B, C} (2 clients) beats {A}; the cycle lasts max tau = 5.
    assert sel.method == "milp"
    np.testing.assert_array_equal(sel.clients_of(0), [1, 2])
    assert sel.cycles[0].duration == 5.0 and sel.cycles[0].start == 0.0


def test_mofel_anticipates_arrivals_a2_cannot() -> None:
    # Prepare: client 0 reaches server 1 at t = 3 and stays till 20; server 1 requests at 0.
    visits = _visits([(0, 0, 0, 3), (0, 1, 3, 20)])
    tau = np.array([5.0])
    # Execute
    mofel = select_exact(visits, tau, [1], 0.0, 10.0)
    a2 = select_a2(visits, tau, [1], 0.0)
    # Assert: MoFeL schedules the start at the arrival; A2 sees nobody connected now.
    assert len(mofel.cycles) == 1 and mofel.cycles[0].start == 3.0
    np.testing.assert_array_equal(mofel.clients_of(1), [0])
    assert a2.cycles == ()


def test_a1_frustrates_clients_where_mofel_does_not() -> None:
    # Prepare: client 0 leaves server 0 at t = 3 (then server 1 until 20); client 1 stays.
    visits = _visits([(0, 0, 0, 3), (0, 1, 3, 20), (1, 0, 0, 20)])
    tau = np.array([5.0, 5.0])
    rng = np.random.default_rng(0)
    # Execute
    a1 = select_a1(visits, tau, [0], 0.0, clients_per_server=2, rng=rng)
    mofel = select_exact(visits, tau, [0, 1], 0.0, 10.0)
    # Assert: A1 starts client 0 on server 0 and it leaves mid-training (NFC = 1); MoFeL
    # sends client 1 to server 0 now and client 0 to server 1 on arrival (NFC = 0).
    np.testing.assert_array_equal(a1.clients_of(0), [0, 1])
    assert nfc(a1, visits, tau) == 1
    assert nfc(mofel, visits, tau) == 0
    np.testing.assert_array_equal(mofel.clients_of(0), [1])
    np.testing.assert_array_equal(mofel.clients_of(1), [0])
    assert ntc(mofel, visits, tau) == 2
    assert ntc(a1, visits, tau) == 1  # one of two clients delivered
    assert ntc(a1, visits, tau, min_completed=None) == 0  # not all delivered


def test_outcome_distinguishes_no_show_from_frustrated() -> None:
    # Prepare: predicted arrival at 3, but the client actually never came (route changed).
    predicted = _visits([(0, 0, 0, 3), (0, 1, 3, 20)])
    actual = _visits([(0, 0, 0, 3), (0, 2, 3, 20)])
    tau = np.array([5.0])
    sel = select_exact(predicted, tau, [1], 0.0, 10.0)
    # Execute
    out = evaluate_cycles(sel, actual, tau)
    # Assert: it never started, so it is not frustrated; the cycle does not complete.
    assert not out.started[0] and not out.frustrated[0]
    assert ntc(sel, actual, tau) == 0 and nfc(sel, actual, tau) == 0


def test_trainings_per_client_eq10() -> None:
    # Prepare: one client crosses server 0 then server 1, both request.
    visits = _visits([(0, 0, 0, 6), (0, 1, 6, 20)])
    tau = np.array([4.0])
    # Execute
    once = select_exact(visits, tau, [0, 1], 0.0, 20.0)
    twice = select_exact(visits, tau, [0, 1], 0.0, 20.0, max_trainings_per_client=2)
    # Assert: with lambda = 1 only one server gets it; with 2 both, at 0 and at 6.
    assert once.n_selected == 1
    assert [(c.server, c.start) for c in twice.cycles] == [(0, 0.0), (1, 6.0)]


def test_select_auto_reports_the_method_used() -> None:
    # Prepare
    visits = _visits([(0, 0, 0, 10), (1, 0, 0, 10)])
    tau = np.array([1.0, 2.0])
    # Execute
    small = select(visits, tau, [0], 0.0, 5.0)
    forced = select(visits, tau, [0], 0.0, 5.0, exact_max_variables=0)
    # Assert
    assert small.method == "milp" and forced.method == "greedy"
    assert selection_key(small, t0=0.0) == selection_key(forced, t0=0.0) == (1, 2, 0.0)
    with pytest.raises(ValueError, match="method"):
        select(visits, tau, [0], 0.0, 5.0, method="genetic")


def test_min_and_max_clients_per_server() -> None:
    # Prepare: three able clients; server needs at least 2 and takes at most 2.
    visits = _visits([(0, 0, 0, 10), (1, 0, 0, 10), (2, 0, 0, 10), (3, 1, 0, 10)])
    tau = np.array([1.0, 1.0, 1.0, 1.0])
    # Execute
    sel = select_exact(visits, tau, [0, 1], 0.0, 5.0, min_clients=2, max_clients=2)
    # Assert: server 0 gets 2 of 3; server 1 has only one client (< min) and is not served.
    assert sel.clients_of(0).size == 2
    assert sel.clients_of(1).size == 0


# ------------------------------------------------------------------------------ properties


@st.composite
def instances(draw: st.DrawFn, max_clients: int = 6, max_servers: int = 3) -> tuple:
    """Integer-timed routes: each client hops between servers with integer stays."""
    n = draw(st.integers(1, max_clients))
    n_srv = draw(st.integers(1, max_servers))
    rows = []
    for c in range(n):
        t = draw(st.integers(-5, 5))
        for _ in range(draw(st.integers(1, 4))):
            stay = draw(st.integers(1, 12))
            rows.append((c, draw(st.integers(0, n_srv - 1)), float(t), float(t + stay)))
            t += stay + draw(st.integers(0, 2))
    tau = np.array([draw(st.integers(1, 8)) for _ in range(n)], dtype=float)
    requests = draw(st.lists(st.integers(0, n_srv - 1), min_size=1, unique=True))
    t0 = float(draw(st.integers(0, 4)))
    horizon = float(draw(st.integers(0, 14)))
    return _visits(rows), tau, requests, t0, horizon


def _check_selection(sel, visits, tau, requests, t0, horizon, budget=1) -> None:
    servers = [c.server for c in sel.cycles]
    assert len(servers) == len(set(servers)) and set(servers) <= set(requests)
    counts: dict[int, int] = {}
    for cyc in sel.cycles:
        assert cyc.clients.size >= 1
        assert cyc.duration == pytest.approx(tau[cyc.clients].max())  # eq. 8
        assert t0 <= cyc.start and cyc.start + cyc.duration <= t0 + horizon + 1e-9
        # never a client whose route leaves the territory before its training ends,
        # nor before the slowest client of the cycle finishes (eqs. 5-8)
        assert feasible(visits, cyc.clients, cyc.server, cyc.start, tau[cyc.clients]).all()
        assert feasible(visits, cyc.clients, cyc.server, cyc.start, cyc.duration).all()
        for c in cyc.clients.tolist():
            counts[c] = counts.get(c, 0) + 1
    assert all(v <= budget for v in counts.values())


@settings(max_examples=60, deadline=None)
@given(instances())
def test_selections_never_pick_a_client_that_leaves_before_finishing(case) -> None:
    # Prepare
    visits, tau, requests, t0, horizon = case
    # Execute
    exact = select_exact(visits, tau, requests, t0, horizon)
    greedy = select_greedy(visits, tau, requests, t0, horizon)
    auto = select(visits, tau, requests, t0, horizon)
    a2 = select_a2(visits, tau, requests, t0)
    # Assert: feasibility of every cycle; with exact predictions nobody is frustrated.
    for sel in (exact, greedy, auto):
        _check_selection(sel, visits, tau, requests, t0, horizon)
        assert nfc(sel, visits, tau) == 0
        assert ntc(sel, visits, tau, min_completed=None) == len(sel.cycles)
    for cyc in a2.cycles:
        assert feasible(visits, cyc.clients, cyc.server, t0, tau[cyc.clients]).all()
    assert nfc(a2, visits, tau) == 0
    assert selection_key(exact, t0=t0) >= selection_key(greedy, t0=t0)


def _brute_force(visits, tau, requests, t0, horizon) -> tuple[int, int, float]:
    """Enumerate every client -> (no server | one requesting server) map and integer start."""
    n = tau.size
    best = (0, 0, 0.0)
    starts = np.arange(t0, t0 + horizon + 1)
    for assign in itertools.product([-1, *requests], repeat=n):
        served, chosen, delay, ok = 0, 0, 0.0, True
        for s in requests:
            members = [c for c in range(n) if assign[c] == s]
            if not members:
                continue
            dur = tau[members].max()
            good = [
                t
                for t in starts
                if t + dur <= t0 + horizon and all(feasible(visits, c, s, t, dur) for c in members)
            ]
            if not good:
                ok = False
                break
            served, chosen, delay = served + 1, chosen + len(members), delay + (min(good) - t0)
        if ok:
            best = max(best, (served, chosen, -float(delay)))
    return best


def test_milp_equals_brute_force_on_hand_case() -> None:
    # Prepare: 4 clients, 2 servers; client 3 is wanted by both, eq. 8 couples 0 and 2.
    visits = _visits(
        [
            (0, 0, 0, 4),
            (0, 1, 4, 12),
            (1, 0, 0, 9),
            (2, 0, 2, 10),
            (2, 1, 10, 20),
            (3, 1, 0, 6),
            (3, 0, 6, 15),
        ]
    )
    tau = np.array([3.0, 2.0, 5.0, 4.0])
    # Execute
    sel = select_exact(visits, tau, [0, 1], 0.0, 12.0)
    # Assert
    _check_selection(sel, visits, tau, [0, 1], 0.0, 12.0)
    assert selection_key(sel, t0=0.0) == _brute_force(visits, tau, [0, 1], 0.0, 12.0)


@settings(max_examples=40, deadline=None)
@given(instances(max_clients=4, max_servers=2))
def test_milp_equals_brute_force_on_tiny_random_cases(case) -> None:
    # Prepare
    visits, tau, requests, t0, horizon = case
    # Execute
    sel = select_exact(visits, tau, requests, t0, horizon)
    # Assert: same lexicographic optimum (served, clients, -delays) as exhaustive search.
    assert selection_key(sel, t0=t0) == _brute_force(visits, tau, requests, t0, horizon)


def test_exact_selection_is_limited_by_nodes_never_by_the_clock(monkeypatch) -> None:
    # Prepare: a random 30-client, 3-server case; record the options HiGHS receives
    import scipy.optimize  # the selection imports milp from here when it solves

    rng = np.random.default_rng(5)
    rows = []
    for c in range(30):
        t = 0.0
        for _ in range(3):
            stay = float(rng.uniform(2.0, 12.0))
            rows.append((c, int(rng.integers(3)), t, t + stay))
            t += stay
    visits = _visits(rows)
    tau = rng.uniform(1.0, 5.0, 30)
    seen: list[dict] = []
    real = scipy.optimize.milp

    def spy(*args, **kwargs):
        seen.append(dict(kwargs["options"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(scipy.optimize, "milp", spy)
    # Execute: the same input twice, with a tight node limit
    first = select(visits, tau, [0, 1, 2], 0.0, 10.0, method="milp", node_limit=1)
    second = select(visits, tau, [0, 1, 2], 0.0, 10.0, method="milp", node_limit=1)
    # Assert: a work limit only, and the same answer both times
    assert seen and all("time_limit" not in o and o["node_limit"] == 1 for o in seen)
    assert first.method == second.method
    assert [(c.server, c.start, c.clients.tolist()) for c in first.cycles] == [
        (c.server, c.start, c.clients.tolist()) for c in second.cycles
    ]
