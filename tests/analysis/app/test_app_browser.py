"""The interactive app (issue #6): its map/plot builders, and the real page in Chromium.

WHY: the app is what users look at first; Python-side checks cannot see a map that renders
nothing or a Step button that does not reach the model. The browser test starts
``solara run app.py`` offline through the harness (tests/browser.py), clicks Step three
times with 200 agents over 802.11p links and checks what the page shows (and saves
docs/images/app_link.png); a second one clicks Step while a slow
step runs and checks that every click became one step, in order (issue 13 item 9); a third
checks that the map fills the main area and shows the whole world once loaded (issue 24). The other
tests check the GeoJSON and settings helpers the page is built from, without a browser.
Set-up for the browser test: ``.ci/browser_deps.sh`` and ``.ci/solara_assets.sh``.
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path

import numpy as np
import pytest

from mobidfl.analysis.app import (
    AGENT_CLASS,
    AppModel,
    agents_geojson,
    areas_geojson,
    contacts_geojson,
    env_settings,
    initial_settings,
    lonlat,
    model_params,
    status_text,
    streets_geojson,
)
from tests.browser import (
    CHROMIUM,
    REPO_ROOT,
    chromium_page,
    free_port,
    solara_server,
    wait_for_solara_app,
)

APP = REPO_ROOT / "app.py"
SETUP_HINT = "run .ci/browser_deps.sh and .ci/solara_assets.sh"
# 200 agents of all four kinds, a small learning config so a step is quick, over 802.11p
# links (issue 26: contacts drawn with their transfer progress, the link and energy plots).
APP_SETTINGS = (
    "vehicles=150 pedestrians=30 sensors=10 uavs=10 model=mlp local_steps=1 test_size=200 "
    "batch_size=8 link=distance_rate link.profile=dsrc link.params=1000000"
)
"""``link.params``: 1 M parameters on the air (4 MB per model) while a small MLP trains, so
that 802.11p contacts show every transfer progress from cut to complete."""
N_AGENTS = 200


@pytest.fixture(scope="module")
def small_model() -> AppModel:
    model = AppModel(vehicles=6, pedestrians=3, sensors=2, uavs=2, learning=False, seed=3)
    model.step()
    return model


# --- builders (no browser) ------------------------------------------------------------------
def test_agents_geojson_one_shape_per_agent_around_its_position(small_model: AppModel) -> None:
    # Prepare: the model after one step; expected centres are its positions in WGS84.
    expected = lonlat(small_model, small_model.position)

    # Execute
    features = agents_geojson(small_model)["features"]

    # Assert: one closed polygon per agent, centred on the agent, with its kind and index.
    assert [f["properties"]["index"] for f in features] == list(range(small_model.n_agents))
    for feature in features:
        index = feature["properties"]["index"]
        ring = np.array(feature["geometry"]["coordinates"][0])
        assert np.allclose(ring[0], ring[-1])
        # A regular polygon's vertex mean is its centre (1e-16 m); vertices are rounded to
        # 1e-7 deg (<= 5e-8 each) and UTM -> WGS84 bends a symbol of radius r <= 400 m by
        # ~r^2 / R_earth = 2.5 cm = 2.3e-7 deg: < 1e-6 deg in all (measured 3.6e-8, r = 11 m).
        # (rtol=0: np.allclose's default rtol 1e-5 alone would allow 7e-4 deg = 80 m here.)
        assert np.allclose(ring[:-1].mean(axis=0), expected[index], rtol=0, atol=1e-6)
        assert feature["properties"]["kind"] == small_model.kind_of[index]
    sides = {f["properties"]["kind"]: len(f["geometry"]["coordinates"][0]) - 1 for f in features}
    assert sides == {"vehicle": 12, "pedestrian": 3, "sensor": 4, "uav": 4}


def test_contacts_geojson_draws_each_pair_once_and_thins(small_model: AppModel) -> None:
    # Prepare: the number of contact pairs this step from the adjacency.
    pairs = small_model.adjacency.nnz // 2
    assert pairs > 2, "scenario should have contacts"

    # Execute: all lines, then at most 2.
    full = contacts_geojson(small_model)["features"][0]
    thin = contacts_geojson(small_model, max_lines=2)["features"][0]

    # Assert
    assert len(full["geometry"]["coordinates"]) == pairs == full["properties"]["total"]
    assert len(thin["geometry"]["coordinates"]) == 2 == thin["properties"]["drawn"]
    assert thin["properties"]["total"] == pairs
    ends = lonlat(small_model, small_model.position)
    first = np.array(full["geometry"]["coordinates"][0])
    assert min(np.abs(ends - first[0]).sum(1)) < 1e-6
    assert min(np.abs(ends - first[1]).sum(1)) < 1e-6
    with pytest.raises(ValueError, match="max_lines"):
        contacts_geojson(small_model, max_lines=-1)


def test_map_view_fits_streets_and_agents_in_the_map_with_its_margin(
    small_model: AppModel,
) -> None:
    # Prepare: one agent moved far outside the streets' box (a UAV over the area, say)
    import math

    from mobidfl.analysis.app import map_view, world_bounds

    west, south, east, north = small_model.world_map.bounds
    saved = small_model.position[0].copy()
    small_model.position[0] = (east + 500.0, north + 200.0)
    try:
        # Execute
        box = world_bounds(small_model)
        (lat, lon), zoom = map_view(small_model, width_px=800, height_px=600, padding_px=10)
    finally:
        small_model.position[0] = saved

    # Assert: the box holds the streets and the agent; at the zoom chosen the box fits in
    # 780 x 580 pixels, a quarter zoom step more would not; the centre is the box's.
    assert box == (west, south, east + 500.0, north + 200.0)
    metres_per_px = 156543.03392 * math.cos(math.radians(lat)) / 2**zoom
    span_px = max((box[2] - box[0]) / 780, (box[3] - box[1]) / 580) / metres_per_px
    assert 2 ** -0.25 < span_px <= 1.0
    centre = lonlat(small_model, np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2]))
    assert np.allclose(centre, (lon, lat))


def test_status_text_reports_step_time_and_learning(small_model: AppModel) -> None:
    # Execute
    text = status_text(small_model)

    # Assert: step 1 of 120 s, learning off, the contact count.
    assert text.startswith("Step 1 · simulated time 0:02:00 · learning off")
    assert f"{small_model.adjacency.nnz // 2} contacts" in text


def test_settings_from_environment_become_inputs_or_fixed_parameters() -> None:
    # Execute
    settings = env_settings("vehicles=250 test_size=200 map=/tmp/x.graphml lr=0.1")
    params = model_params(settings)

    # Assert: typed values; a slider grows to hold 250; unknown inputs become fixed params.
    assert settings == {"vehicles": 250, "test_size": 200, "map": "/tmp/x.graphml", "lr": 0.1}
    assert params["vehicles"]["value"] == 250 and params["vehicles"]["max"] == 250
    assert params["test_size"] == 200
    assert params["map_file"]["value"] == "/tmp/x.graphml"
    assert initial_settings(params)["lr"] == 0.1
    with pytest.raises(ValueError, match="radius_m"):
        env_settings("radius_m=-5")
    with pytest.raises(ValueError, match="name=value"):
        env_settings("vehicles")


def test_rejected_input_falls_back_with_a_message() -> None:
    # Execute: an unreadable map with a fallback (given as the app's inputs, as on Reset),
    # then without one.
    fallback = {"map": "nyc_uws", "map_file": "", "vehicles": 2, "pedestrians": 0, "sensors": 0,
                "uavs": 0, "learning": False}
    model = AppModel(map_file="no/such/map.graphml", vehicles=3, learning=False,
                     fallback=fallback)

    # Assert: the fallback scenario runs and the message names the setting.
    assert model.n_agents == 2
    assert "map" in model.app_error and "showing the default scenario" in model.app_error
    with pytest.raises(ValueError, match="map"):
        AppModel(map_file="no/such/map.graphml", vehicles=3, learning=False)


def test_reset_rebuilds_the_model_from_the_inputs_as_solaraviz_does() -> None:
    # Prepare: the app's inputs with a small scenario and learning off, and its first model.
    from mesa.visualization.solara_viz import _build_model_init_kwargs  # Reset's own helper

    params = model_params({"vehicles": 4, "pedestrians": 2, "sensors": 1, "uavs": 1,
                           "learning": False, "radius_m": 150.0})
    first = AppModel(**initial_settings(params))

    # Execute: what SolaraViz's Reset does (it adds Mesa's default ``scenario``).
    kwargs = _build_model_init_kwargs(first, initial_settings(params),
                                      add_scenario_when_empty=True,
                                      require_model_accepts_scenario=True)
    again = type(first)(**kwargs)
    ours = type(first)(**initial_settings(params))  # QueuedController's Reset: public calls only

    # Assert: same scenario, fresh state, no error.
    for rebuilt in (again, ours):
        assert rebuilt.app_error is None and rebuilt.steps == 0
        assert rebuilt.n_agents == first.n_agents == 8
        assert rebuilt.config == first.config and rebuilt.config.radius_m == 150.0
        assert np.array_equal(rebuilt.position, first.position)


# --- the real page ----------------------------------------------------------------------------
CLICK_STEP_AND_WAIT = """
async ({target, agentSelector, plotSelector}) => {
  const paths = () => [...document.querySelectorAll(agentSelector)]
      .map(p => p.getAttribute('d')).join('|');
  const plot = () => document.querySelector(plotSelector)?.getAttribute('src') || '';
  const status = () => document.querySelector('.mobidfl-status')?.textContent || '';
  const button = [...document.querySelectorAll('button')]
      .find(b => b.textContent.trim() === 'Step');
  const before = {paths: paths(), plot: plot()};
  const t0 = performance.now();
  button.click();
  return await new Promise((resolve, reject) => {
    const check = () => {
      const elapsed = performance.now() - t0;
      if (status().startsWith(`Step ${target} `) && paths() !== before.paths
          && plot() !== before.plot) {
        resolve(elapsed);
      } else if (elapsed > 60000) {
        reject(new Error(`no update after 60 s: ${status()}`));
      } else {
        setTimeout(check, 5);
      }
    };
    check();
  });
}
"""

PLOT_SVG = """
async (selector) => {
  const src = document.querySelector(selector).getAttribute('src');
  const text = await (await fetch(src)).text();
  return btoa(unescape(encodeURIComponent(text)));
}
"""


def _markers(svg: str, gid: str) -> int:
    """Number of markers (``<use>``) in the matplotlib line whose SVG id is ``gid``."""
    match = re.search(rf'<g id="{gid}">(.*?)</g>\s*</g>', svg, re.S)
    return 0 if match is None else match.group(1).count("<use ")


def _map_and_plots(page, path: Path) -> Path:
    """The map (status line and legend included) above the plots, as one image: the page
    scrolls inside its main area, so a full-page screenshot would miss the plots."""
    from io import BytesIO

    from PIL import Image

    def shot(selector: str) -> Image.Image:
        return Image.open(BytesIO(page.locator(selector).first.screenshot())).convert("RGB")

    top = shot(".mobidfl-map-view")
    plots = [shot(f".mobidfl-{name}-plot") for name in ("accuracy", "link", "energy")]
    row_w = sum(p.width for p in plots)
    scale = min(1.0, top.width / row_w)
    plots = [p.resize((round(p.width * scale), round(p.height * scale))) for p in plots]
    image = Image.new("RGB", (top.width, top.height + max(p.height for p in plots)), "white")
    image.paste(top, (0, 0))
    x = 0
    for plot in plots:
        image.paste(plot, (x, top.height))
        x += plot.width
    image.save(path)
    page.locator(".mobidfl-map-view").first.scroll_into_view_if_needed()  # back to the map
    return path


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent; {SETUP_HINT}")
def test_app_steps_three_times_in_a_real_browser(tmp_path: Path) -> None:
    # Prepare: the app with 200 agents, offline; wait until the map shows all agents.
    from playwright.sync_api import expect

    env = {"MOBIDFL_APP_SETTINGS": APP_SETTINGS}
    agents = f"path.{AGENT_CLASS}"
    plot = ".mobidfl-accuracy-plot img"
    with (
        solara_server(APP, port=free_port(), env=env, timeout_s=120) as server,
        chromium_page(viewport=(1400, 1000)) as browser,
    ):
        page = browser.page
        started = time.perf_counter()
        page.goto(server.url)
        try:
            wait_for_solara_app(page, timeout_ms=90_000, grid=False)
            expect(page.locator(agents)).to_have_count(N_AGENTS, timeout=60_000)
        except Exception as exc:  # add what the browser saw to the failure message
            msg = f"app did not load ({exc}); problems: {browser.problems}; {SETUP_HINT}"
            raise AssertionError(msg) from exc
        load_s = time.perf_counter() - started
        status = page.locator(".mobidfl-status")
        expect(status).to_contain_text("Step 0 ")
        paths_before = [page.locator(agents).nth(i).get_attribute("d") for i in range(N_AGENTS)]
        page.screenshot(path=str(tmp_path / "app_step0.png"), full_page=True)

        # Execute: click Step three times, timing click -> status, map and plot all updated.
        args = {"agentSelector": agents, "plotSelector": plot}
        timings_ms = [
            page.evaluate(CLICK_STEP_AND_WAIT, {**args, "target": step}) for step in (1, 2, 3)
        ]
        # hover an agent: its details appear in the agent panel
        page.locator(agents).nth(N_AGENTS - 1).hover(force=True)
        info = page.locator(".mobidfl-agent-details")
        expect(info).to_contain_text("kind")
        expect(page.locator(".mobidfl-agent-info")).to_contain_text("training labels")
        shot = tmp_path / "app_after_3_steps.png"
        page.screenshot(path=str(shot), full_page=True)

        # Assert: counter, moved agents, accuracy points, no errors, nothing fetched online.
        expect(status).to_contain_text("Step 3 · simulated time 0:06:00 · mean accuracy")
        paths_after = [page.locator(agents).nth(i).get_attribute("d") for i in range(N_AGENTS)]
        moved = sum(a != b for a, b in zip(paths_before, paths_after, strict=True))
        assert moved >= 150, f"only {moved} of {N_AGENTS} agent shapes moved"
        # steps 1..3: step 0 is not evaluated by default (eval_initial=False). The plot image
        # is redrawn after the status line, so poll it briefly (a loaded machine lags).
        deadline = time.monotonic() + 30.0
        svg = base64.b64decode(page.evaluate(PLOT_SVG, plot)).decode()
        while _markers(svg, "acc-mean") < 3 and time.monotonic() < deadline:
            page.wait_for_timeout(250)
            svg = base64.b64decode(page.evaluate(PLOT_SVG, plot)).decode()
        assert _markers(svg, "acc-mean") == 3, "accuracy plot should show steps 1..3"
        for kind in ("vehicle", "pedestrian", "sensor", "uav"):
            assert _markers(svg, f"acc-{kind}") == 3, kind
        # the link model's plots are placed and show steps 0..3; contacts carry a progress
        expect(status).to_contain_text("link distance_rate (dsrc): ")
        link_svg = base64.b64decode(page.evaluate(PLOT_SVG, ".mobidfl-link-plot img")).decode()
        assert _markers(link_svg, "link-sent") == 4, "link plot should show steps 0..3"
        energy_svg = base64.b64decode(
            page.evaluate(PLOT_SVG, ".mobidfl-energy-plot img")).decode()
        assert _markers(energy_svg, "energy-total") == 4
        assert _markers(energy_svg, "energy-kind-vehicle") == 4
        expect(page.locator(".leaflet-mobidfl_contacts-pane path").first).to_be_attached()
        link_shot = _map_and_plots(page, tmp_path / "app_link.png")  # docs/images/app_link.png
        status_text_now = status.text_content() or ""
        assert browser.problems == [], browser.problems
        assert server.cdn_misses == [], f"fetched outside the local cache: {server.cdn_misses}"

        # Execute + Assert: the OSM base layer is opt-in; switched on, it asks for web tiles
        # (which the offline browser blocks) and the street layer is still drawn.
        page.get_by_label("OSM web tiles (needs internet)").check(force=True)
        expect(page.locator(".leaflet-tile-pane img.leaflet-tile").first).to_be_attached()
        # the tile element is attached before its request goes out: wait for the request
        # (an event), bounded, rather than assume it came with the element
        deadline = time.monotonic() + 60.0
        while not any("tile.openstreetmap.org" in url for url in browser.blocked_requests) \
                and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert any("tile.openstreetmap.org" in url for url in browser.blocked_requests)
        expect(page.locator(agents)).to_have_count(N_AGENTS)
    step_s = re.search(r"step took ([0-9.]+) s", status_text_now)
    print(
        f"\napp with {N_AGENTS} agents: page + model ready in {load_s:.1f} s; "
        f"click Step -> updated view (status, map, accuracy plot): "
        + ", ".join(f"{t / 1000:.2f} s" for t in timings_ms)
        + (f"; model step itself {step_s.group(1)} s" if step_s else "")
        + f"\nscreenshots: {tmp_path / 'app_step0.png'}, {shot}, {link_shot}"
    )
    from PIL import Image

    with Image.open(shot) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50, "screenshot is (nearly) blank"


WORLD_ON_SCREEN = """
() => {
  const box = document.querySelector('.leaflet-container').getBoundingClientRect();
  const drawn = [...document.querySelectorAll(
      '.leaflet-mobidfl_streets-pane path, .leaflet-mobidfl_agents-pane path')]
    .map(p => p.getBoundingClientRect()).filter(r => r.width + r.height > 0);
  const world = {
    left: Math.min(...drawn.map(r => r.left)), right: Math.max(...drawn.map(r => r.right)),
    top: Math.min(...drawn.map(r => r.top)), bottom: Math.max(...drawn.map(r => r.bottom)),
  };
  return {map: {left: box.left, right: box.right, top: box.top, bottom: box.bottom},
          world, shapes: drawn.length,
          viewport: {width: window.innerWidth, height: window.innerHeight}};
}
"""


def _world_fills_map(seen: dict) -> tuple[bool, str]:
    """Whether every street and agent lies inside the map and the world spans most of it."""
    box, world = seen["map"], seen["world"]
    inside = (world["left"] >= box["left"] - 1 and world["right"] <= box["right"] + 1
              and world["top"] >= box["top"] - 1 and world["bottom"] <= box["bottom"] + 1)
    fill = max((world["right"] - world["left"]) / (box["right"] - box["left"]),
               (world["bottom"] - world["top"]) / (box["bottom"] - box["top"]))
    return inside and fill >= 0.75, f"inside={inside}, fill={fill:.2f}, {seen}"


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent; {SETUP_HINT}")
def test_map_fills_the_main_area_and_fits_the_world_on_load(tmp_path: Path) -> None:
    # Prepare: the app as a user starts it (default scenario), at the harness' default
    # window size, offline.
    from playwright.sync_api import expect

    with (
        solara_server(APP, port=free_port(), env={}, timeout_s=120) as server,
        chromium_page() as browser,
    ):
        page = browser.page
        # Execute: load the page and wait for the agents.
        page.goto(server.url)
        wait_for_solara_app(page, timeout_ms=90_000, grid=False)
        expect(page.locator(f"path.{AGENT_CLASS}").first).to_be_attached(timeout=60_000)
        deadline = time.monotonic() + 30.0
        fits, why = _world_fills_map(page.evaluate(WORLD_ON_SCREEN))
        while not fits and time.monotonic() < deadline:  # the fit follows the size report
            page.wait_for_timeout(250)
            fits, why = _world_fills_map(page.evaluate(WORLD_ON_SCREEN))
        seen = page.evaluate(WORLD_ON_SCREEN)
        page.screenshot(path=str(tmp_path / "app.png"))

        # Assert: every street and agent is on the map and the world spans >= 75 % of it in
        # one direction (the zoom rounds down to quarter steps: >= 84 % less the margin).
        assert fits, why
        # The map takes the main area: most of the window's width beside the sidebar and
        # most of its height; plots come below it; no empty agent panel, no "PAGE 0" tab.
        box, view = seen["map"], seen["viewport"]
        assert box["right"] - box["left"] >= 0.6 * view["width"], seen
        assert box["bottom"] - box["top"] >= 0.6 * view["height"], seen
        plot_top = page.locator(".mobidfl-accuracy-plot").bounding_box()["y"]
        assert plot_top >= box["bottom"] - 1, (plot_top, seen)
        expect(page.locator(".mobidfl-agent-info")).to_have_count(0)
        expect(page.get_by_text("Page 0", exact=False)).to_have_count(0)
        # link = "ideal" (the default): no link or energy plot is placed
        expect(page.locator(".mobidfl-accuracy-plot")).to_have_count(1)
        expect(page.locator(".mobidfl-link-plot")).to_have_count(0)
        expect(page.locator(".mobidfl-energy-plot")).to_have_count(0)
        assert browser.problems == [], browser.problems
        assert server.cdn_misses == [], server.cdn_misses
    print(f"\nmap {box}, world on screen {seen['world']}; screenshot {tmp_path / 'app.png'}")


# Few agents but slow learning (CNN, 12 local steps): a step takes about a second, so
# clicks can land while one runs; the server and page still start in well under 30 s.
SLOW_STEP_SETTINGS = (
    "map=nyc_uws vehicles=12 pedestrians=0 sensors=0 uavs=0 model=cnn local_steps=12 "
    "batch_size=16"
)
CLICKS_DURING_A_STEP = """
async () => {
  const queue = () => document.querySelector('.mobidfl-queue')?.textContent || '';
  const status = () => document.querySelector('.mobidfl-status')?.textContent || '';
  const seen = [queue()];
  const observer = new MutationObserver(() => {
    const text = queue();
    if (text !== seen[seen.length - 1]) seen.push(text);
  });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
  const button = [...document.querySelectorAll('button')]
      .find(b => b.textContent.trim() === 'Step');
  const until = (test, what) => new Promise((resolve, reject) => {
    const t0 = performance.now();
    const check = () => {
      if (test()) resolve();
      else if (performance.now() - t0 > 60000)
        reject(new Error(`${what} not seen in 60 s: ${status()} | ${queue()} | ${seen}`));
      else setTimeout(check, 5);
    };
    check();
  });
  button.click();
  await until(() => queue().startsWith('Running step 1'), 'first step running');
  button.click();
  button.click();
  const statusAtClicks = status();
  await until(() => status().startsWith('Step 3 ') && queue().startsWith('Idle'),
              'step 3 and an idle queue');
  observer.disconnect();
  return {seen, statusAtClicks, final: status()};
}
"""


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} absent; {SETUP_HINT}")
def test_clicks_while_a_step_runs_are_queued_not_lost() -> None:
    # Prepare: the app with slow steps, offline; wait for the page and the idle queue line.
    from playwright.sync_api import expect

    env = {"MOBIDFL_APP_SETTINGS": SLOW_STEP_SETTINGS}
    with (
        solara_server(APP, port=free_port(), env=env, timeout_s=120) as server,
        chromium_page() as browser,
    ):
        page = browser.page
        page.goto(server.url)
        wait_for_solara_app(page, timeout_ms=90_000, grid=False)
        expect(page.locator(".mobidfl-status")).to_contain_text("Step 0 ")
        expect(page.locator(".mobidfl-queue")).to_contain_text("Idle")

        # Execute: one click, then two more while that first step is still running.
        result = page.evaluate(CLICKS_DURING_A_STEP)

        # Assert: the two later clicks came during step 1, were shown as queued, and each ran
        # one step in order: the page ends at step 3 with nothing left in the queue.
        assert result["statusAtClicks"].startswith("Step 0 "), result
        seen = result["seen"]
        assert "Running step 1 · 2 more queued" in seen, seen
        assert seen.index("Running step 1 · 2 more queued") < seen.index("Running step 3"), seen
        assert result["final"].startswith("Step 3 · simulated time 0:06:00"), result
        expect(page.locator(".mobidfl-status")).to_contain_text("Step 3 ")

        # Execute + Assert: Reset builds a fresh model; Play steps until paused, then stops.
        status, queue = page.locator(".mobidfl-status"), page.locator(".mobidfl-queue")
        page.get_by_role("button", name="Reset", exact=True).click()
        expect(status).to_contain_text("Step 0 ")
        page.get_by_role("button", name="▶", exact=True).click()
        expect(queue).to_contain_text("(playing)")
        expect(status).to_contain_text("Step 1 ")
        page.get_by_role("button", name="❚❚", exact=True).click()
        expect(queue).to_contain_text("Idle")
        stopped_at = status.text_content()
        page.wait_for_timeout(1500)  # about a step: nothing more may run
        assert status.text_content() == stopped_at
        assert re.match(r"Step [12] ", stopped_at or ""), stopped_at
        assert browser.problems == [], browser.problems
        assert server.cdn_misses == [], server.cdn_misses


def test_streets_geojson_draws_each_street_once_with_its_class(small_model: AppModel) -> None:
    # Prepare: the walk network's undirected streets and the drivable ones (either direction).
    world = small_model.world_map
    walk, drive = world.walk, world.drive
    ids = walk.node_ids
    undirected = {frozenset((ids[u], ids[v]))
                  for u, v in zip(walk.edge_u, walk.edge_v, strict=True)}
    drivable = {frozenset((drive.node_ids[u], drive.node_ids[v]))
                for u, v in zip(drive.edge_u, drive.edge_v, strict=True)}
    ends = {}
    for e in range(walk.n_edges):  # street end points in WGS84 -> the street's node pair
        xy = walk.pts_xy[[walk.edge_pt0[e], walk.edge_pt1[e] - 1]]
        key = tuple(np.round(lonlat(small_model, xy), 6).ravel())
        ends[key] = ends[key[2:] + key[:2]] = frozenset((ids[walk.edge_u[e]], ids[walk.edge_v[e]]))

    # Execute
    features = streets_geojson(small_model)["features"]

    # Assert: every street once, in the class its drive edges give it.
    drawn = {}
    for feature in features:
        for line in feature["geometry"]["coordinates"]:
            key = tuple(np.array(line)[[0, -1]].ravel())
            drawn.setdefault(ends[key], []).append(feature["properties"]["drivable"])
    assert set(drawn) == undirected
    assert all(len(flags) == 1 for flags in drawn.values())
    assert {pair for pair, flags in drawn.items() if flags[0]} == drivable & undirected


def test_areas_geojson_covers_the_grid_once_per_area(small_model: AppModel) -> None:
    # Prepare: the grid's cells and their areas.
    import shapely.geometry

    grid = small_model.world_map.grid
    cells = np.arange(grid.n_cells)
    areas = small_model.world_map.area_of(grid.centres(cells))

    # Execute
    features = areas_geojson(small_model)["features"]

    # Assert: one feature per area, disjoint, whose centre-of-cell points fall in their own area.
    assert sorted(f["properties"]["area"] for f in features) == sorted(set(areas.tolist()))
    shapes = {f["properties"]["area"]: shapely.geometry.shape(f["geometry"]) for f in features}
    centres = lonlat(small_model, grid.centres(cells))
    for (lon, lat), area in zip(centres, areas, strict=True):
        assert shapes[int(area)].contains(shapely.geometry.Point(lon, lat))
    total = sum(shape.area for shape in shapes.values())
    assert abs(shapely.union_all(list(shapes.values())).area - total) < 1e-9 * max(total, 1)


def test_status_text_before_the_first_evaluation_does_not_say_learning_off() -> None:
    # Prepare: learning on, step 0 not evaluated (the default eval_initial=False).
    model = AppModel(map="nyc_uws", vehicles=4, pedestrians=0, sensors=0, uavs=0, model="mlp",
                     batch_size=8)

    # Execute
    text = status_text(model)

    # Assert: it says when accuracy comes, not that learning is off.
    assert model.learner is not None
    assert "accuracy from step 1" in text and "learning off" not in text, text
