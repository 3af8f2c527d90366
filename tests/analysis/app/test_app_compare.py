"""The app's Compare view: one world and seed under several policies, stepped together.

WHY: a side-by-side view is only a comparison when every run has the same world; the first
test checks that the runs advance together and that their agents stand at the same places,
with the same contacts, at every step (a policy never changes the world), while their
learning differs. The world's point on the regime map must be the one ``mobidfl bench
--describe`` measures. The browser test opens the Compare tab of ``solara run app.py``, steps
it and reads one accuracy and one bytes curve per policy from the plots (its screenshot is
docs/images/app_compare.png).
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mobidfl.analysis.app import (
    AppModel,
    Comparison,
    RegimePoint,
    compare_bytes_figure,
    cumulative_bytes,
    policy_settings,
    regime_point,
    regime_point_figure,
    regime_text,
)
from mobidfl.analysis.app.compare import rule
from mobidfl.analysis.describe import describe_world
from mobidfl.model.config import KINDS
from tests.browser import (
    CHROMIUM,
    REPO_ROOT,
    chromium_page,
    free_port,
    solara_server,
    wait_for_solara_app,
)

# 8 cars and 3 pedestrians on a small grid, a small MLP: three policies step in seconds.
WORLD = {"map": "grid:5x5", "vehicles": 8, "pedestrians": 3, "sensors": 0, "uavs": 0,
         "test_size": 60, "local_steps": 1, "model": "mlp", "seed": 4}
POLICIES = ["dpsgd", "cached_lru", "psfl"]
STEPS = 3


@pytest.fixture(scope="module")
def city() -> AppModel:
    model = AppModel(**WORLD)
    assert model.app_error is None, model.app_error
    return model


def test_runs_step_together_on_one_world_and_learn_differently(city: AppModel) -> None:
    # Prepare: the City model's world under three policies (built on the first step).
    comparison = Comparison(city.config, POLICIES, world=city.world_map)
    assert comparison.running and not comparison.built and comparison.steps == 0

    # Execute + Assert: after each step every run is at that step, and the agents stand at
    # the same places with the same contacts in every run (bit-equal: one world, one seed).
    for step in range(1, STEPS + 1):
        comparison.step()
        runs = list(comparison.models.values())
        assert comparison.steps == step and [m.steps for m in runs] == [step] * len(POLICIES)
        assert comparison.same_world is True
        for run in runs[1:]:
            np.testing.assert_array_equal(run.position, runs[0].position)
            assert (run.adjacency != runs[0].adjacency).nnz == 0

    # Assert: each run uses its policy for every kind, on the City's seed and map; the
    # policies learn differently (else the view would compare nothing).
    assert list(comparison.models) == POLICIES and comparison.refused == {}
    for policy, run in comparison.models.items():
        assert {run.config.policy_of(kind) for kind in KINDS} == {policy}
        assert run.config.seed == city.config.seed and run.config.map == city.config.map
    curves = {p: t["acc_mean"].to_numpy() for p, t in comparison.tables().items()}
    assert all(len(c) == STEPS + 1 for c in curves.values())  # steps 0..3, step 0 NaN
    assert len({tuple(np.round(c[1:], 12)) for c in curves.values()}) > 1, curves
    assert "same world in every run" in comparison.status_text()


def test_a_policy_the_world_refuses_is_named_and_one_run_is_no_comparison(
    city: AppModel,
) -> None:
    # Prepare: MoFeL requires route mobility; the grid's cars and walkers do not follow routes.
    comparison = Comparison(city.config, ["dpsgd", "mofel"], world=city.world_map)

    # Execute
    comparison.step()

    # Assert: mofel left out with the setting it needs; one run left: nothing is stepped.
    assert list(comparison.models) == ["dpsgd"]
    assert "mobility" in comparison.refused["mofel"]
    assert not comparison.running and comparison.steps == 0
    assert comparison.models["dpsgd"].steps == 0
    assert "fewer than two" in comparison.note
    # fewer than two policies, or learning off, are refused before anything is built
    assert not Comparison(city.config, ["dpsgd", "dpsgd"]).running
    off = city.config.updated(learning=False)
    assert "learning is off" in Comparison(off, POLICIES).note


def test_regime_point_is_what_bench_describe_measures_over_the_same_steps(
    city: AppModel,
) -> None:
    # Prepare: one run of the world, stepped twice; the descriptors of its settings over
    # two steps, measured as `mobidfl bench --describe` does (mobility alone, no training).
    comparison = Comparison(city.config, ["dpsgd", "cached_lru"], world=city.world_map)
    assert regime_point(city) is None  # no step run yet: nothing measured
    comparison.step()
    comparison.step()
    expected = describe_world(WORLD, steps=2)

    # Execute
    point = regime_point(comparison.models["cached_lru"])

    # Assert: the same numbers; both are means of the same per-step values (k/n and label
    # counts), so only the summation order may differ: rel 1e-12 is 4500 ulp of float64.
    assert point is not None and point.steps == 2
    assert point.neighbours_per_step == pytest.approx(expected.neighbours_per_step, rel=1e-12)
    assert point.label_skew == pytest.approx(expected.label_skew, rel=1e-12)


def test_regime_map_names_the_rules_policy_at_the_point() -> None:
    # Prepare: one point on each side of the published rule's contact threshold, skewed.
    drawn = rule()
    low = RegimePoint(drawn.x_cut / 2, min(1.0, drawn.y_cut + 0.2), steps=5)
    high = RegimePoint(drawn.x_cut * 2, min(1.0, drawn.y_cut + 0.2), steps=5)

    # Execute
    texts = [regime_text(p, leader="dpsgd") for p in (low, high)]
    svg = _svg_text(regime_point_figure(low))

    # Assert: the text names what the rule predicts at each point, with the rule's own hit
    # count; the star is drawn; before a step there is no point and the text says so.
    for point, text in zip((low, high), texts, strict=True):
        assert f"predicts **{drawn(point.neighbours_per_step, point.label_skew)}**" in text
        assert f"{drawn.train_hits} of the {drawn.train_n} worlds" in text
        assert "Leading in these runs now: **dpsgd**" in text
    assert drawn(low.neighbours_per_step, low.label_skew) != drawn(high.neighbours_per_step,
                                                                   high.label_skew)
    assert 'id="compare-world"' in svg
    assert "Step once" in regime_text(None)
    assert 'id="compare-world"' not in _svg_text(regime_point_figure(None))


def test_bytes_are_summed_per_run_or_said_not_counted() -> None:
    # Prepare: a table with bytes sent per step, one without the column.
    counted = pd.DataFrame({"step": [0, 1, 2], "bytes_sent": [0.0, 1.5e6, 2.5e6]})
    uncounted = pd.DataFrame({"step": [0, 1, 2], "acc_mean": [np.nan, 0.2, 0.3]})
    fake = SimpleNamespace(tables=lambda: {"dpsgd": uncounted, "psfl": uncounted}, steps=2,
                           base=SimpleNamespace(link=SimpleNamespace(model="ideal")))

    # Execute
    total = cumulative_bytes(counted)
    svg = _svg_text(compare_bytes_figure(fake))

    # Assert: the running sum (exact: sums of halves of integers); the note, no lines.
    np.testing.assert_array_equal(total, [0.0, 1.5e6, 4.0e6])
    assert cumulative_bytes(uncounted) is None
    assert "bytes not counted at this link (ideal)" in svg
    assert "compare-bytes-" not in svg


def test_bytes_figure_draws_each_run_over_a_link_model() -> None:
    # Prepare: two policies over a 0.2 Mbit/s link (the link model counts what it carried).
    model = AppModel(**{**WORLD, "link.model": "fixed_rate", "link.fixed_rate.rate_bps": 2e5,
                        "link.params": 1000, "link.dtype": "bf16"})
    comparison = Comparison(model.config, ["dpsgd", "cached_lru"], world=model.world_map)
    comparison.step()
    comparison.step()

    # Execute
    svg = _svg_text(compare_bytes_figure(comparison))

    # Assert: one line per run, one marker per step 0..2, ending at the run's total.
    for policy, table in comparison.tables().items():
        assert _markers(svg, f"compare-bytes-{policy}") == 3
        assert cumulative_bytes(table)[-1] == table["bytes_sent"].sum() > 0


def test_docs_name_the_default_policies() -> None:
    # Prepare: the app page's sentence on the default policies.
    from mobidfl.analysis.app.compare_view import default_policies

    text = (REPO_ROOT / "docs" / "getting-started" / "app.md").read_text(encoding="utf-8")
    said = re.search(r"by default the two the regime map's rule names \(([^)]*)\)", text)

    # Assert: it names the policies the published rule predicts (fails if the rule changes).
    assert said is not None
    assert re.findall(r"`(\w+)`", said.group(1)) == default_policies()


def test_policy_settings_set_every_kind() -> None:
    assert policy_settings("psfl") == {f"{kind}.policy": "psfl" for kind in KINDS}


def _svg_text(figure) -> str:
    from io import StringIO

    out = StringIO()
    figure.savefig(out, format="svg")
    return out.getvalue()


def _markers(svg: str, gid: str) -> int:
    """Number of markers (``<use>``) in the matplotlib line whose SVG id is ``gid``."""
    match = re.search(rf'<g id="{gid}">(.*?)</g>\s*</g>', svg, re.S)
    return 0 if match is None else match.group(1).count("<use ")


# --- the real page ----------------------------------------------------------------------------
APP = REPO_ROOT / "app.py"
SETUP_HINT = "run .ci/browser_deps.sh and .ci/solara_assets.sh"
COMPARE_SETTINGS = (
    "map=grid:5x5 vehicles=8 pedestrians=3 sensors=0 uavs=0 model=mlp local_steps=1 "
    "test_size=60 batch_size=8 seed=4 link=fixed_rate"
)
"""A small world (steps in about a second) over a 6 Mbit/s link, whose model counts bytes."""
PLOT_SVG = """
async (selector) => {
  const src = document.querySelector(selector).getAttribute('src');
  const text = await (await fetch(src)).text();
  return btoa(unescape(encodeURIComponent(text)));
}
"""


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent; {SETUP_HINT}")
def test_compare_tab_steps_two_policies_side_by_side(tmp_path: Path) -> None:
    # Prepare: the app on a small world, offline; open the Compare tab.
    from playwright.sync_api import expect

    env = {"MOBIDFL_APP_SETTINGS": COMPARE_SETTINGS}
    with (
        solara_server(APP, port=free_port(), env=env, timeout_s=120) as server,
        chromium_page(viewport=(1400, 1000)) as browser,
    ):
        page = browser.page
        page.goto(server.url)
        wait_for_solara_app(page, timeout_ms=90_000, grid=False)
        page.get_by_role("tab", name="Compare policies").click()
        view = page.locator(".mobidfl-compare-view")
        status = view.locator(".mobidfl-compare-status")
        expect(status).to_contain_text("built on the first step")
        policies = view.locator(".mobidfl-compare-policies")
        expect(policies).to_contain_text("cached_lru")
        expect(policies).to_contain_text("psfl")

        # Execute: Step all twice; each click waits until the status line reports the step.
        step = view.get_by_role("button", name="Step all", exact=True)
        for target in (1, 2):
            step.click()
            expect(status).to_contain_text(f"step {target} ·", timeout=120_000)
        expect(view.locator(".mobidfl-compare-queue")).to_contain_text("Idle")
        expect(status).to_contain_text("same world in every run")

        # Assert: one accuracy curve per policy with steps 1 and 2 (step 0 not evaluated),
        # the world placed on the regime map with the rule's prediction named.
        # The image may reach the page a moment after the status line: wait for it, bounded.
        plot = ".mobidfl-compare-accuracy-plot img"
        deadline = time.monotonic() + 30.0
        svg = base64.b64decode(page.evaluate(PLOT_SVG, plot)).decode()
        while _markers(svg, "compare-acc-psfl") < 2 and time.monotonic() < deadline:
            page.wait_for_timeout(250)
            svg = base64.b64decode(page.evaluate(PLOT_SVG, plot)).decode()
        for policy in ("cached_lru", "psfl"):
            assert _markers(svg, f"compare-acc-{policy}") == 2, policy
        sent = base64.b64decode(
            page.evaluate(PLOT_SVG, ".mobidfl-compare-bytes-plot img")).decode()
        for policy in ("cached_lru", "psfl"):  # steps 0..2
            assert _markers(sent, f"compare-bytes-{policy}") == 3, policy
        regime = base64.b64decode(
            page.evaluate(PLOT_SVG, ".mobidfl-compare-regime-plot img")).decode()
        assert 'id="compare-world"' in regime
        expect(view).to_contain_text("The rule predicts")
        shot = tmp_path / "app_compare.png"
        view.screenshot(path=str(shot))

        # Execute + Assert: Rebuild starts the runs again, unbuilt until the next step.
        view.get_by_role("button", name="Rebuild", exact=True).click()
        expect(status).to_contain_text("step 0 · the runs are built on the first step")
        assert browser.problems == [], browser.problems
        assert server.cdn_misses == [], server.cdn_misses
    print(f"\nscreenshot: {shot}")
