"""Tests for mobidfl.agents.mobility.distribution (Reza et al.: DAM / DCM, eqs. 3-9, Alg. 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mobidfl.agents.mobility.distribution import (
    area_label_lists,
    cell_coordinates,
    cell_index,
    cell_row_col,
    cells_within,
    coverage_matrix,
    dam_probabilities,
    dcm_centres,
    dcm_probabilities,
    disjoint_area_labels,
    distribution_distance,
    label_distribution_at_cells,
    next_destination,
    overlapping_area_labels,
    random_grid_destination,
    step_toward,
)
from mobidfl.errors import ConfigError

SQRT2 = math.sqrt(2.0)

# Hand-made 3x3 layout used by several tests (cells row-major: cell = 3 * row + col):
#   static A at (0,0) = cell 0 with label counts [2, 0]
#   static B at (2,2) = cell 8 with label counts [0, 6]
#   mobile client's own counts [1, 1]; R_c = 1, Euclidean.
# A is within 1 of cells 0, 1 (0,1), 3 (1,0); B of cells 8, 7 (2,1), 5 (1,2);
# cell 4 (1,1) is sqrt(2) > 1 from both, so it sees neither.
STATIC_CELLS = [0, 8]
STATIC_COUNTS = [[2, 0], [0, 6]]
MOBILE_COUNTS = [1, 1]


def _hand_distributions() -> np.ndarray:
    return label_distribution_at_cells(
        STATIC_CELLS, STATIC_COUNTS, MOBILE_COUNTS, grid=3, rc=1.0
    )


# ------------------------------------------------------------------------------------------
# grid helpers
# ------------------------------------------------------------------------------------------
def test_cell_index_round_trip_is_row_major() -> None:
    # Prepare / Execute
    coords = cell_coordinates(grid=4)
    # Assert
    assert coords.shape == (16, 2)
    assert coords[6].tolist() == [1, 2]
    assert cell_index(1, 2, grid=4) == 6
    assert cell_row_col(6, grid=4) == (1, 2)
    for cell in range(16):
        assert cell_index(*cell_row_col(cell, grid=4), grid=4) == cell


def test_cells_within_uses_euclidean_distance_by_default() -> None:
    # Prepare: centre of a 3x3 grid, radius 1.
    # Execute
    euclid = cells_within(4, radius=1.0, grid=3)
    cheb = cells_within(4, radius=1.0, grid=3, metric="chebyshev")
    everything = cells_within(0, radius=math.inf, grid=3)
    # Assert: the 4-neighbourhood plus itself vs the full 3x3 block.
    assert euclid.tolist() == [1, 3, 4, 5, 7]
    assert cheb.tolist() == list(range(9))
    assert everything.tolist() == list(range(9))


def test_bad_arguments_raise_value_error_naming_the_argument() -> None:
    # arguments of these pure functions, not settings: the mobility models check those
    with pytest.raises(ValueError, match="grid"):
        cell_coordinates(grid=0)
    with pytest.raises(ValueError, match="argument 'rc'"):
        coverage_matrix([0], grid=3, rc=-1.0)
    with pytest.raises(ValueError, match="metric"):
        coverage_matrix([0], grid=3, rc=1.0, metric="manhattan")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="static_cells"):
        coverage_matrix([9], grid=3, rc=1.0)
    with pytest.raises(ValueError, match="argument 'rm_cells'"):
        step_toward(0, 1, rm_cells=-2.0, grid=3)


# ------------------------------------------------------------------------------------------
# eq. 4: distributions seen from each cell
# ------------------------------------------------------------------------------------------
def test_label_distribution_pools_counts_per_eq4() -> None:
    # Prepare / Execute
    dist = _hand_distributions()
    # Assert (hand arithmetic):
    #   cells 0,1,3: A + mobile = [2+1, 0+1] / 4 = [0.75, 0.25]
    #   cells 5,7,8: B + mobile = [0+1, 6+1] / 8 = [0.125, 0.875]
    #     (averaging normalised histograms instead would give [0.25, 0.75])
    #   cells 2,4,6: mobile only = [1, 1] / 2 = [0.5, 0.5]
    expected = np.array(
        [
            [0.75, 0.25], [0.75, 0.25], [0.5, 0.5],
            [0.75, 0.25], [0.5, 0.5], [0.125, 0.875],
            [0.5, 0.5], [0.125, 0.875], [0.125, 0.875],
        ]
    )
    # exact integer counts pooled (sums < 2**53, any order), one correctly rounded division:
    # the same float as the dyadic literals -> bit-exact
    np.testing.assert_array_equal(dist, expected)


def test_label_distribution_chebyshev_and_no_data_cells() -> None:
    # Prepare / Execute: Chebyshev radius 1 makes the centre cell see both A and B;
    # without mobile data, cells in nobody's reach have an all-zero row (eq. 4 is 0/0).
    cheb = label_distribution_at_cells(
        STATIC_CELLS, STATIC_COUNTS, MOBILE_COUNTS, grid=3, rc=1.0, metric="chebyshev"
    )
    no_own = label_distribution_at_cells(STATIC_CELLS, STATIC_COUNTS, None, grid=3, rc=1.0)
    # Assert: centre = [2+0+1, 0+6+1] / 10 = [0.3, 0.7]
    # exact integer counts pooled (sums < 2**53, any order), one correctly rounded division:
    # 3/10 and 7/10 round to the same floats as the literals 0.3, 0.7 -> bit-exact
    np.testing.assert_array_equal(cheb[4], [0.3, 0.7])
    np.testing.assert_array_equal(no_own[4], [0.0, 0.0])
    np.testing.assert_allclose(no_own[0], [1.0, 0.0])
    np.testing.assert_allclose(no_own[8], [0.0, 1.0])


# ------------------------------------------------------------------------------------------
# eq. 5: distance
# ------------------------------------------------------------------------------------------
def test_distribution_distance_l2_is_eq5_and_tv_is_half_l1() -> None:
    # Prepare
    p = [0.5, 0.3, 0.2]
    q = [0.2, 0.3, 0.5]
    # Execute / Assert: l2 = sqrt(0.3^2 + 0 + 0.3^2) = sqrt(0.18) = 0.4242640687...
    assert distribution_distance(p, q) == pytest.approx(0.42426406871192845, abs=1e-15)
    # tv = 0.5 * (0.3 + 0 + 0.3) = 0.3
    assert distribution_distance(p, q, metric="tv") == pytest.approx(0.3, abs=1e-15)
    # broadcasting over rows
    rows = distribution_distance([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]], q)
    # float64, u = 2**-53: 3 subtractions, 3 squares and 2 additions (<= 5 u relative on the
    # sum of squares, halved by the sqrt) and the sqrt (u): <= 3.5 u x 0.42 = 1.7e-16; 1e-15
    # keeps 6 x (the row 0 is exact)
    np.testing.assert_allclose(rows, [0.42426406871192845, 0.0], rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="distance metric"):
        distribution_distance(p, q, metric="kl")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# eq. 6 (DAM) and eq. 9 (DCM)
# ------------------------------------------------------------------------------------------
def test_dam_probabilities_match_eq6_by_hand() -> None:
    # Prepare: the client stands on cell 0 and sees [0.75, 0.25].
    dist = _hand_distributions()
    # Execute
    p = dam_probabilities(dist, 0)
    # Assert, by hand (eq. 5 then eq. 6):
    #   cells 0,1,3: d = 0
    #   cells 5,7,8: d = sqrt(0.625^2 + 0.625^2) = 0.625*sqrt2 = 0.8838834764...
    #   cells 2,4,6: d = sqrt(0.25^2 + 0.25^2)  = 0.25*sqrt2  = 0.3535533906...
    #   sum = 3*0.625*sqrt2 + 3*0.25*sqrt2 = 2.625*sqrt2
    #   p(5,7,8) = 0.625/2.625 = 5/21 = 0.238095...; p(2,4,6) = 0.25/2.625 = 2/21 = 0.095238...
    five, two = 5 / 21, 2 / 21
    expected = [0.0, 0.0, two, 0.0, two, five, two, five, five]
    # float64 ULP budget for p <= 1: each d ~5 roundings (difference, squares, sum, sqrt), the
    # 9-term total gamma_8, the division 1, the literal 0.5: < 20 u = 2.2e-15 -> 1e-14
    # (was 1e-12)
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-14)
    assert p.sum() == pytest.approx(1.0, abs=1e-14)  # 9 terms each within 1e-14 (above)


def test_dam_probabilities_from_mobile_only_cell() -> None:
    # Prepare: from cell 4 the client sees [0.5, 0.5].
    dist = _hand_distributions()
    # Execute
    p = dam_probabilities(dist, 4)
    # Assert: A-cells d = 0.25*sqrt2, B-cells d = 0.375*sqrt2, sum = 1.875*sqrt2
    #   p(A) = 0.25/1.875 = 2/15 = 0.1333...; p(B) = 0.375/1.875 = 1/5
    expected = [2 / 15, 2 / 15, 0.0, 2 / 15, 0.0, 0.2, 0.0, 0.2, 0.2]
    # the same < 20 u = 2.2e-15 budget as eq. 6 above -> 1e-14 (was 1e-12)
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-14)


def test_dam_all_zero_distances_give_uniform() -> None:
    # Prepare: every static client and the mobile client hold the same [1, 1] mix,
    # so every cell sees [0.5, 0.5] and eq. 6 is 0/0.
    dist = label_distribution_at_cells([0, 8], [[1, 1], [3, 3]], [2, 2], grid=3, rc=1.0)
    # Execute
    p = dam_probabilities(dist, 4)
    # Assert
    # bit-exact: the same expression (np.full(9, 1.0 / 9)) on the uniform path
    np.testing.assert_array_equal(p, np.full(9, 1 / 9))


def test_dcm_probabilities_match_eq9_by_hand() -> None:
    # Prepare: centres at cells 0, 4, 8; client on cell 0.
    dist = _hand_distributions()
    # Execute
    p = dcm_probabilities(dist, 0, [0, 4, 8])
    # Assert: d = [0, 0.25*sqrt2, 0.625*sqrt2]; sum = 0.875*sqrt2
    #   -> [0, 0.25/0.875, 0.625/0.875] = [0, 2/7, 5/7]
    # the same < 20 u = 2.2e-15 budget as eq. 6 (3 terms here) -> 1e-14 (was 1e-12)
    np.testing.assert_allclose(p, [0.0, 2 / 7, 5 / 7], rtol=0, atol=1e-14)
    # TV gives the same ratios here (two labels: TV = L2 / sqrt2); same budget.
    np.testing.assert_allclose(
        dcm_probabilities(dist, 0, [0, 4, 8], distance="tv"), [0.0, 2 / 7, 5 / 7], rtol=0,
        atol=1e-14,
    )


# ------------------------------------------------------------------------------------------
# Alg. 1: DCM centres
# ------------------------------------------------------------------------------------------
def test_dcm_centres_follow_alg1_with_overall_coverage_tie_break() -> None:
    # Prepare: 5x5 grid (cell = 5*row + col), R_c = 1. Static clients:
    #   plus shape (1,1)=6, (0,1)=1, (1,0)=5, (1,2)=7, (2,1)=11, and e=(2,3)=13, f=(3,2)=17.
    # Line 6, n=1: cell 6 covers 5 clients (itself + 4 at distance 1); cell 12=(2,2) covers 4
    #   ((1,2),(2,1),(2,3),(3,2)); no other cell covers more than 2 -> first centre 6.
    # Line 11: clients 6,1,5,7,11 covered; e and f remain.
    # Line 6, n=2: only cells 12=(2,2) and 18=(3,3) are within 1 of both e and f -> tie (2 each).
    # Lines 7-8: overall coverage 12 -> 4, 18 -> 2 -> cell 12. Then nothing remains.
    static = [6, 1, 5, 7, 11, 13, 17]
    for seed in range(25):
        # Execute
        centres = dcm_centres(static, grid=5, rc=1.0, rng=np.random.default_rng(seed))
        # Assert: no seed may pick 18 (that would mean lines 7-8 were skipped).
        assert centres == [6, 12]


def test_dcm_first_centre_ties_are_drawn_at_random() -> None:
    # Prepare: one static client at the centre of a 3x3 grid, R_c = 1: cells 1,3,4,5,7 tie.
    # Execute
    picks = {
        tuple(dcm_centres([4], grid=3, rc=1.0, rng=np.random.default_rng(s))) for s in range(40)
    }
    # Assert: one centre per run, always a tied cell, and the draw really varies (line 10).
    assert all(len(p) == 1 and p[0] in {1, 3, 4, 5, 7} for p in picks)
    assert len(picks) >= 3


@settings(max_examples=60, deadline=None)
@given(
    grid=st.integers(2, 8),
    data=st.data(),
    rc=st.sampled_from([0.0, 1.0, 1.5, 2.0, 3.0]),
    seed=st.integers(0, 2**16),
)
def test_dcm_centres_cover_every_static_client(grid: int, data, rc: float, seed: int) -> None:
    # Prepare
    static = data.draw(st.lists(st.integers(0, grid * grid - 1), min_size=1, max_size=12))
    # Execute
    centres = dcm_centres(static, grid=grid, rc=rc, rng=np.random.default_rng(seed))
    # Assert: distinct centres, and every static client within R_c of one of them.
    cover = coverage_matrix(static, grid=grid, rc=rc)
    assert len(set(centres)) == len(centres)
    assert cover[centres].any(axis=0).all()
    assert len(centres) <= len(set(static))


# ------------------------------------------------------------------------------------------
# eq. 3: random movement
# ------------------------------------------------------------------------------------------
def test_random_grid_destination_is_uniform_within_rm() -> None:
    # Prepare
    rng = np.random.default_rng(7)
    # Execute: 5000 draws from the centre of a 3x3 grid with R_m = 1.
    draws = np.array([random_grid_destination(4, rm_cells=1.0, grid=3, rng=rng)
                      for _ in range(5000)])
    # Assert: support is exactly {1,3,4,5,7} (Euclidean, includes staying) and ~1000 each.
    values, counts = np.unique(draws, return_counts=True)
    assert values.tolist() == [1, 3, 4, 5, 7]
    assert counts.min() > 880 and counts.max() < 1120


def test_random_grid_destination_unconstrained_reaches_whole_grid() -> None:
    # Prepare
    rng = np.random.default_rng(3)
    # Execute
    draws = {random_grid_destination(0, rm_cells=math.inf, grid=4, rng=rng) for _ in range(400)}
    # Assert
    assert draws == set(range(16))


@settings(max_examples=80, deadline=None)
@given(
    grid=st.integers(1, 12),
    data=st.data(),
    rm=st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.7, 5.0]),
    seed=st.integers(0, 2**16),
)
def test_random_grid_destination_stays_within_rm(grid: int, data, rm: float, seed: int) -> None:
    # Prepare
    current = data.draw(st.integers(0, grid * grid - 1))
    rng = np.random.default_rng(seed)
    r0, c0 = divmod(current, grid)
    for _ in range(20):
        # Execute
        new = random_grid_destination(current, rm_cells=rm, grid=grid, rng=rng)
        # Assert
        r1, c1 = divmod(new, grid)
        assert 0 <= new < grid * grid
        assert math.hypot(r1 - r0, c1 - c0) <= rm + 1e-12


# ------------------------------------------------------------------------------------------
# eq. 7: constrained movement toward a destination
# ------------------------------------------------------------------------------------------
def test_step_toward_hand_cases() -> None:
    # 10x10 grid, start (0,0) = cell 0, R_m = 5.
    # dest (0,9) = 9 -> straight along the row to (0,5) = 5.
    assert step_toward(0, 9, rm_cells=5.0, grid=10) == 5
    # dest (4,9) = 49: candidates in the disc r^2+c^2 <= 25 and their squared distance to (4,9):
    #   (0,5): 16+16=32, (2,4): 4+25=29, (3,4): 1+25=26, (4,3): 0+36=36 -> (3,4) = 34.
    assert step_toward(0, 49, rm_cells=5.0, grid=10) == 34
    # dest (3,9) = 39: (0,5) -> 9+16=25 and (3,4) -> 0+25=25 tie; smallest index wins -> 5.
    assert step_toward(0, 39, rm_cells=5.0, grid=10) == 5
    # within R_m: go there; unconstrained: go there; R_m < 1: stay.
    assert step_toward(0, 34, rm_cells=5.0, grid=10) == 34
    assert step_toward(0, 99, rm_cells=math.inf, grid=10) == 99
    assert step_toward(0, 99, rm_cells=0.5, grid=10) == 0


@settings(max_examples=100, deadline=None)
@given(
    grid=st.integers(1, 15),
    data=st.data(),
    rm=st.sampled_from([1.0, 1.5, 2.0, 2.5, 3.0, 5.0, 9.0]),
)
def test_mobile_client_never_moves_more_than_rm(grid: int, data, rm: float) -> None:
    # Prepare
    current = data.draw(st.integers(0, grid * grid - 1))
    dest = data.draw(st.integers(0, grid * grid - 1))
    rd, cd = divmod(dest, grid)
    steps = 0
    # Execute: follow eq. 7 round after round until the destination is reached.
    while current != dest:
        new = step_toward(current, dest, rm_cells=rm, grid=grid)
        r0, c0 = divmod(current, grid)
        r1, c1 = divmod(new, grid)
        # Assert: each round moves at most R_m, stays on the grid, and gets strictly closer.
        assert 0 <= new < grid * grid
        assert math.hypot(r1 - r0, c1 - c0) <= rm + 1e-12
        assert math.hypot(r1 - rd, c1 - cd) < math.hypot(r0 - rd, c0 - cd)
        # ... and no cell within R_m of the start is strictly closer to the destination (eq. 7).
        gamma = cells_within(current, radius=rm, grid=grid)
        best = min(math.hypot(g // grid - rd, g % grid - cd) for g in gamma)
        assert math.hypot(r1 - rd, c1 - cd) == pytest.approx(best, abs=1e-12)
        current = new
        steps += 1
        assert steps <= 2 * grid


# ------------------------------------------------------------------------------------------
# eq. 8: keep the destination until reached
# ------------------------------------------------------------------------------------------
def test_next_destination_keeps_until_reached_then_draws() -> None:
    # Prepare
    rng = np.random.default_rng(0)
    # Execute / Assert: not reached -> unchanged, whatever the probabilities.
    assert next_destination(3, 7, candidates=[1, 2], probabilities=[0.5, 0.5], rng=rng) == 7
    # reached (or first round) -> drawn from eq. 6/9 probabilities (a point mass here).
    assert next_destination(7, 7, candidates=[1, 2], probabilities=[0.0, 1.0], rng=rng) == 2
    assert next_destination(7, None, candidates=[1, 2], probabilities=[1.0, 0.0], rng=rng) == 1
    with pytest.raises(ValueError, match="probabilities"):
        next_destination(7, 7, candidates=[1, 2], probabilities=[0.3, 0.3], rng=rng)


# ------------------------------------------------------------------------------------------
# rectangular grids (MobiDFL's mobidfl.maps.grid.Grid is rows x cols; cell = row * cols + col)
# ------------------------------------------------------------------------------------------
def test_rectangular_grid_helpers_are_row_major_over_cols() -> None:
    # Prepare: 2 rows x 3 cols -> cells 0 1 2 / 3 4 5.
    # Execute
    coords = cell_coordinates(grid=(2, 3))
    # Assert
    assert coords.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    assert cell_index(1, 2, grid=(2, 3)) == 5
    assert cell_row_col(5, grid=(2, 3)) == (1, 2)
    with pytest.raises(ValueError, match="grid"):
        cell_coordinates(grid=(2, 0))
    with pytest.raises(ValueError, match="cell"):
        cell_row_col(6, grid=(2, 3))
    # a square grid given as (G, G) behaves exactly like G
    np.testing.assert_array_equal(cell_coordinates(grid=(4, 4)), cell_coordinates(grid=4))


def test_rectangular_cells_within_and_step_toward_by_hand() -> None:
    # 3 rows x 4 cols: (1,1) = 5; radius 1 -> (0,1)=1, (1,0)=4, (1,1)=5, (1,2)=6, (2,1)=9.
    assert cells_within(5, radius=1.0, grid=(3, 4)).tolist() == [1, 4, 5, 6, 9]
    # 2 rows x 10 cols, from (0,0) toward (1,9) = 19 with R_m = 5:
    #   (0,5): in the disc (25), squared distance to (1,9) = 1 + 16 = 17
    #   (1,4): in the disc (17), squared distance = 0 + 25 = 25  -> (0,5) = cell 5 wins.
    assert step_toward(0, 19, rm_cells=5.0, grid=(2, 10)) == 5
    # On a 10 x 2 grid the same geometry transposed: toward (9,1) = 19 -> (5,0) = cell 10.
    assert step_toward(0, 19, rm_cells=5.0, grid=(10, 2)) == 10


def test_rectangular_label_distribution_and_centres_by_hand() -> None:
    # Prepare: 1 row x 5 cols, R_c = 1. Static A at col 0 counts [3, 1], B at col 4 [0, 2];
    # no mobile data. Cells 0,1 see A; 3,4 see B; cell 2 sees nobody.
    dist = label_distribution_at_cells([0, 4], [[3, 1], [0, 2]], None, grid=(1, 5), rc=1.0)
    # Assert (eq. 4)
    # exact integer counts pooled (sums < 2**53, any order), one correctly rounded division:
    # the same float as the dyadic literals -> bit-exact
    np.testing.assert_array_equal(dist, [[0.75, 0.25], [0.75, 0.25], [0, 0], [0, 1], [0, 1]])
    # Alg. 1: each client alone; cells 0,1 tie for A, 3,4 for B -> two centres, one per side.
    for seed in range(10):
        centres = dcm_centres([0, 4], grid=(1, 5), rc=1.0, rng=np.random.default_rng(seed))
        assert len(centres) == 2
        assert sorted(c // 3 for c in centres) == [0, 1]  # one in {0,1}, one in {3,4}


@settings(max_examples=80, deadline=None)
@given(
    rows=st.integers(1, 9),
    cols=st.integers(1, 9),
    data=st.data(),
    radius=st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 2.9, 3.0, 5.0, 100.0, math.inf]),
    metric=st.sampled_from(["euclidean", "chebyshev"]),
)
def test_cells_within_matches_brute_force_on_rectangles(
    rows: int, cols: int, data, radius: float, metric: str
) -> None:
    # Prepare
    centre = data.draw(st.integers(0, rows * cols - 1))
    r0, c0 = divmod(centre, cols)
    # Execute
    got = cells_within(centre, radius=radius, grid=(rows, cols), metric=metric)  # type: ignore[arg-type]
    # Assert: every cell checked with the plain formula.
    want = [
        r * cols + c
        for r in range(rows)
        for c in range(cols)
        if (math.hypot(r - r0, c - c0) if metric == "euclidean" else max(abs(r - r0), abs(c - c0)))
        <= radius
    ]
    assert got.tolist() == want


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 12),
    cols=st.integers(1, 12),
    data=st.data(),
    rm=st.sampled_from([1.0, 1.5, 2.0, 3.0, 5.0]),
    seed=st.integers(0, 2**16),
)
def test_rectangular_moves_never_exceed_rm(
    rows: int, cols: int, data, rm: float, seed: int
) -> None:
    # Prepare
    rng = np.random.default_rng(seed)
    current = data.draw(st.integers(0, rows * cols - 1))
    dest = data.draw(st.integers(0, rows * cols - 1))
    for _ in range(2 * (rows + cols)):
        # Execute: one eq. 7 step and one eq. 3 draw from the same cell
        new = step_toward(current, dest, rm_cells=rm, grid=(rows, cols))
        rnd = random_grid_destination(current, rm_cells=rm, grid=(rows, cols), rng=rng)
        # Assert
        r0, c0 = divmod(current, cols)
        for cell in (new, rnd):
            assert 0 <= cell < rows * cols
            r1, c1 = divmod(cell, cols)
            assert math.hypot(r1 - r0, c1 - c0) <= rm + 1e-12
        current = new
    assert current == dest  # every eq. 7 step gets strictly closer: it arrives


# --- area label sets (area_label_lists, setting area_labels) --------------------------------
@pytest.mark.parametrize("areas", [1, 2, 3, 5, 9, 12])
def test_default_area_labels_cover_all_classes_and_no_area_holds_one_label(areas):
    # Prepare / Execute
    lists = overlapping_area_labels(10, areas)
    # Assert: >= 3 distinct labels per area, every class used, k lists
    assert len(lists) == areas
    assert all(len(set(labels)) >= 3 for labels in lists)
    assert set().union(*map(set, lists)) == set(range(10))


def test_default_area_labels_overlap_like_cached_dfl_groups():
    # Prepare / Execute
    three = overlapping_area_labels(10, 3)
    nine = overlapping_area_labels(10, 9)
    # Assert: neighbours share labels (Cached-DFL's groups share 6 and 9)
    assert three == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    assert nine[0] == [0, 1, 2] and nine[8] == [8, 9, 0]
    # PSFL's code split of EMNIST-letters' 27 outputs over 9 areas: 3 labels each, disjoint
    assert disjoint_area_labels(27, 9)[0] == [0, 1, 2]
    assert disjoint_area_labels(10, 9)[1] == [2]  # why it is not the default for 10 classes


def test_config_area_labels_modes():
    # Prepare / Execute / Assert
    assert area_label_lists("", areas=3, num_classes=10) == overlapping_area_labels(10, 3)
    assert area_label_lists("disjoint", areas=3, num_classes=10) == [
        [0, 1, 2, 3], [4, 5, 6], [7, 8, 9]
    ]
    assert area_label_lists("9,0,1,2;3,4,5,6;6,7,8,9", areas=3, num_classes=10)[0] == [
        9, 0, 1, 2
    ]
    with pytest.raises(ConfigError, match="area_labels"):
        area_label_lists("0,1;2;3", areas=2, num_classes=10)
