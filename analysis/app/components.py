"""Solara components of the page: status line, map, agent panel and plots.

They only arrange what :mod:`mobidfl.analysis.app.layers`, :mod:`mobidfl.analysis.app.panels` and
:mod:`mobidfl.analysis.app.figures` build; each redraws on Mesa's ``update_counter``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import ipyleaflet
import matplotlib
import solara
from mesa.visualization.utils import update_counter

from mobidfl.analysis.app.figures import (
    accuracy_figure,
    contacts_figure,
    energy_figure,
    link_figure,
    link_on,
    neighbours_figure,
)
from mobidfl.analysis.app.layers import (
    OSM_TILES,
    PANES,
    MapLayer,
    agents_geojson,
    areas_geojson,
    contacts_geojson,
    map_view,
    occupied_cells_geojson,
    selection_geojson,
    streets_geojson,
)
from mobidfl.analysis.app.look import AGENT_CLASS, MAP_HEIGHT_CSS, MAP_PADDING_PX
from mobidfl.analysis.app.panels import (
    agent_details,
    details_html,
    legend_html,
    status_text,
)
from mobidfl.maps.sources import ATTRIBUTION
from mobidfl.model.world import MobiDFLModel

SELECTED = solara.reactive(None)
"""(id(model), agent index) last hovered or clicked; per browser session (kernel)."""
SHOW_TILES = solara.reactive(False)
"""OSM web tiles under the streets: off by default, the app works offline."""


def _selected_index(model: MobiDFLModel) -> int | None:
    value = SELECTED.value
    if value is None or value[0] != id(model):
        return None
    return value[1]


@solara.component
def StatusLine(model: MobiDFLModel) -> None:
    """Step, simulated time and mean accuracy (plus a rejected-input message if any)."""
    update_counter.get()
    with solara.Column(gap="2px"):
        solara.Text(status_text(model), classes=["mobidfl-status"],
                    style={"font-weight": "bold", "font-size": "14px"})
        error = getattr(model, "app_error", None)
        if error:  # one small line: the grid cell has a fixed height
            solara.Text(error, classes=["mobidfl-error"],
                        style={"color": "#c62828", "font-size": "11px", "line-height": "1.2"})


@solara.component
def MapView(model: MobiDFLModel) -> None:
    """Streets, areas, sensor/UAV cells, agents (shape = kind, fill = accuracy), exchanges."""
    update_counter.get()
    steps = getattr(model, "completed_steps", model.steps)  # see _plot: never half a step
    streets = solara.use_memo(lambda: streets_geojson(model), [model])
    areas = solara.use_memo(lambda: areas_geojson(model), [model])
    centre, zoom = solara.use_memo(  # until the browser reports the map's size
        lambda: map_view(model, width_px=900, height_px=600, padding_px=MAP_PADDING_PX),
        [model],
    )
    agents = solara.use_memo(lambda: agents_geojson(model), [model, steps])
    contacts = solara.use_memo(lambda: contacts_geojson(model), [model, steps])
    cells = solara.use_memo(lambda: occupied_cells_geojson(model), [model, steps])
    selected = _selected_index(model)
    halo = solara.use_memo(lambda: selection_geojson(model, selected), [model, steps, selected])

    layers = [
        MapLayer.element(data=areas, pane="mobidfl_areas", interactive=False, name="areas"),
        MapLayer.element(data=streets, pane="mobidfl_streets", interactive=False,
                         name="streets"),
        MapLayer.element(data=cells, pane="mobidfl_cells", interactive=False,
                         name="sensor/UAV cells"),
        MapLayer.element(data=contacts, pane="mobidfl_contacts", interactive=False,
                         name="exchanges"),
        MapLayer.element(data=halo, pane="mobidfl_selection", interactive=False,
                         name="selection"),
    ]
    agent_layer = MapLayer.element(
        data=agents, pane="mobidfl_agents", class_name=AGENT_CLASS, name="agents",
        hover_style={"weight": 3, "color": "#000000"},
    )
    layers.append(agent_layer)
    if SHOW_TILES.value:
        layers.append(ipyleaflet.TileLayer.element(
            url=OSM_TILES, max_zoom=19, attribution=f"Tiles {ATTRIBUTION}", name="OSM tiles"))

    def connect_events():
        widget = solara.get_widget(agent_layer)
        model_id = id(model)

        def pick(**event: Any) -> None:
            index = (event.get("properties") or {}).get("index")
            if index is not None:
                SELECTED.set((model_id, int(index)))

        widget.on_hover(pick)
        widget.on_click(pick)

        def disconnect() -> None:
            widget.on_hover(pick, remove=True)
            widget.on_click(pick, remove=True)

        return disconnect

    solara.use_effect(connect_events, [model])

    def fit_world():
        """Fit the world once the browser has reported the map's size (on load, on Reset)."""
        widget = solara.get_widget(leaflet)

        def fit(change: Any = None) -> None:
            width, height = widget.right - widget.left, widget.bottom - widget.top
            if not (0 < width < 1e5 and 0 < height < 1e5):  # not drawn yet
                return
            widget.unobserve(fit, names=["right", "bottom"])
            centre, zoom = map_view(model, width_px=width, height_px=height,
                                    padding_px=MAP_PADDING_PX)
            widget.zoom, widget.center = zoom, centre

        widget.observe(fit, names=["right", "bottom"])
        fit()

        def stop() -> None:
            with contextlib.suppress(ValueError):  # already fitted
                widget.unobserve(fit, names=["right", "bottom"])

        return stop

    with solara.Column(gap="4px", classes=["mobidfl-map-view"], style={"width": "100%"}):
        StatusLine(model)
        leaflet = ipyleaflet.Map.element(
            center=centre,
            zoom=zoom,
            zoom_snap=0.25,
            scroll_wheel_zoom=True,
            panes=PANES,
            layers=layers,
            layout={"height": MAP_HEIGHT_CSS, "width": "100%"},
        )
        solara.use_effect(fit_world, [model])
        drawn = contacts["features"][0]["properties"] if contacts["features"] else {}
        solara.HTML(tag="div", unsafe_innerHTML=legend_html(model, drawn))
        solara.Checkbox(label="OSM web tiles (needs internet)", value=SHOW_TILES,
                        style="margin: 0; padding: 0; height: 24px")


@solara.component
def AgentInfo(model: MobiDFLModel) -> None:
    """What ``agent.describe()`` says about the agent last hovered or clicked on the map.

    Nothing is drawn until an agent is picked: an empty panel would only take room.
    """
    update_counter.get()
    details = agent_details(model, _selected_index(model))
    if details is None:
        return
    with solara.Column(classes=["mobidfl-agent-info"], style={"min-width": "260px"}):
        solara.Markdown("**Agent** (hover or click another one on the map)")
        solara.HTML(tag="div", unsafe_innerHTML=details_html(details))


def _plot(make, css_class: str, *, shown=None):
    """A Solara component drawing ``make(model)``.

    ``shown(model)`` (if given) tells the page whether to place it at all
    (:func:`mobidfl.analysis.app.controller.AppPage`).
    """

    @solara.component
    def Plot(model: MobiDFLModel) -> None:
        update_counter.get()
        # Keyed on the last *completed* step: Mesa counts a step as soon as it starts, and a
        # redraw that lands while the worker thread is mid-step (another click, a hover) would
        # otherwise memoise a figure without that step's data under the new step number.
        done = getattr(model, "completed_steps", model.steps)
        figure = solara.use_memo(lambda: make(model), [model, done])
        with (
            solara.Div(classes=[css_class], style={"width": "100%"}),
            matplotlib.rc_context({"svg.fonttype": "none"}),  # text as text: a smaller SVG
        ):
            solara.FigureMatplotlib(figure, dependencies=[model, done], format="svg")

    Plot.__name__ = make.__name__.replace("_figure", "_plot")
    Plot.shown = shown
    return Plot


AccuracyPlot = _plot(accuracy_figure, "mobidfl-accuracy-plot")
ContactsPlot = _plot(contacts_figure, "mobidfl-contacts-plot")
NeighboursPlot = _plot(neighbours_figure, "mobidfl-neighbours-plot")
EnergyPlot = _plot(energy_figure, "mobidfl-energy-plot", shown=link_on)
"""Energy per step and per agent kind: placed only when a link model reports it."""
LinkPlot = _plot(link_figure, "mobidfl-link-plot", shown=link_on)
"""Bytes sent/received and aborted transfers per step: only with a link model."""

