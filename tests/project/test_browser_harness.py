"""Real-browser checks that the offline Solara harness (tests/browser.py) works.

WHY: the MobiDFL app is a Mesa SolaraViz page; these tests prove, on the minimal probe page
(tests/_probe_app.py), that the page loads with no internet, that clicking Step reaches the
model and that the view updates. Set-up: ``.ci/browser_deps.sh`` and ``.ci/solara_assets.sh``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, chromium_page, free_port, solara_server, wait_for_solara_app

PROBE_APP = (Path(__file__).parents[1] / "_probe_app.py")
SETUP_HINT = "run .ci/browser_deps.sh and .ci/solara_assets.sh"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent; {SETUP_HINT}"),
]


def test_probe_app_loads_offline_and_step_updates_view(tmp_path: Path) -> None:
    # Prepare: start the probe app with a 404 stub CDN; open it with external requests blocked.
    from playwright.sync_api import expect

    with solara_server(PROBE_APP, port=free_port()) as server, chromium_page() as browser:
        page = browser.page
        started = time.perf_counter()
        page.goto(server.url)
        try:
            wait_for_solara_app(page, timeout_ms=60_000)
        except Exception as exc:  # add what the browser saw to the failure message
            msg = f"app did not load ({exc}); problems: {browser.problems}; {SETUP_HINT}"
            raise AssertionError(msg) from exc
        load_s = time.perf_counter() - started
        counter = page.locator(".probe-counter")
        step_time = page.get_by_text("Time:", exact=False)
        plot = page.locator(".vue-grid-item img")
        expect(counter).to_have_text("Probe counter: 0")
        expect(step_time).to_have_text("Time: 0.0")
        expect(plot).to_have_count(1)
        plot_before = plot.get_attribute("src")

        # Execute: one click on Step (increment is 2 in the probe app).
        page.get_by_role("button", name="Step").click()

        # Assert: model state, step time and plot all changed; nothing failed or left the host.
        expect(counter).to_have_text("Probe counter: 2")
        expect(step_time).to_have_text("Time: 1.0")
        expect(plot).not_to_have_attribute("src", plot_before or "")
        shot = tmp_path / "probe_after_step.png"
        page.screenshot(path=str(shot))
        assert browser.problems == [], browser.problems
        assert server.cdn_misses == [], f"fetched outside the local cache: {server.cdn_misses}"
    assert load_s < 60, f"page took {load_s:.1f} s to load"
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20, "screenshot is (nearly) blank"


def test_harness_reports_missing_front_end_assets() -> None:
    # Prepare: an empty proxy cache, so every front-end file must come from the 404 stub CDN.
    with tempfile.TemporaryDirectory() as empty_cache:
        env = {"SOLARA_ASSETS_PROXY_CACHE_DIR": empty_cache}
        with (
            solara_server(PROBE_APP, port=free_port(), env=env) as server,
            chromium_page() as browser,
        ):
            # Execute: load the page; its front-end scripts all answer 404.
            page = browser.page
            page.goto(server.url, wait_until="load", timeout=60_000)

            # Assert: no app was drawn, the 404 of the Vue bundle was seen by the browser and the
            # server asked the stub CDN for it; nothing was cached.
            assert page.locator(".v-btn").count() == 0
            assert any("solara-vuetify-app" in p and "404" in p for p in browser.problems), (
                browser.problems
            )
            vue_app = "/npm/@widgetti/solara-vuetify-app@10.1.1/dist/solara-vuetify-app8.min.js"
            assert vue_app in server.cdn_misses, server.cdn_misses
        assert list(Path(empty_cache).rglob("*.js")) == []
