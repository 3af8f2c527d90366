"""The interactive app (``solara run app.py``), one job per module.

The page is Mesa's ``SolaraViz`` sidebar (parameter inputs) with our own Step/Play/Reset (a
click during a step is queued, never lost) and our own main area: the map on its whole width,
fitted to the world on load, the plots below, an agent's panel beside them once one is picked.
Layers point one way: ``look`` (colours, shapes) → ``layers`` (GeoJSON), ``panels`` (HTML),
``figures`` (matplotlib), all pure functions of a running :class:`model.world.MobiDFLModel`
and testable without a browser → ``components`` (Solara components that arrange them) →
``controller`` (Step/Play/Reset, the page). ``inputs`` builds the parameter widgets and
``app_model`` the model the app runs (:class:`AppModel`). Each module says why it is our
own rather than Mesa's or mesa-geo's.

Map data © OpenStreetMap contributors (ODbL).
"""

from analysis.app.app_model import AppModel
from analysis.app.components import (
    SELECTED,
    SHOW_TILES,
    AccuracyPlot,
    AgentInfo,
    ContactsPlot,
    EnergyPlot,
    LinkPlot,
    MapView,
    NeighboursPlot,
    StatusLine,
)
from analysis.app.controller import AppPage, QueuedController, StepQueue
from analysis.app.figures import (
    accuracy_figure,
    contacts_figure,
    energy_figure,
    energy_per_kind,
    energy_split_columns,
    link_figure,
    link_on,
    neighbours_figure,
)
from analysis.app.inputs import env_settings, initial_settings, model_params
from analysis.app.layers import (
    MapLayer,
    agents_geojson,
    areas_geojson,
    contact_pairs,
    contacts_geojson,
    link_progress,
    lonlat,
    map_view,
    occupied_cells_geojson,
    selection_geojson,
    shape_size_m,
    streets_geojson,
    world_bounds,
)
from analysis.app.look import (
    AGENT_CLASS,
    KIND_COLOURS,
    KIND_SHAPES,
    NOTHING_SENT,
    accuracy_colour,
    progress_labels,
)
from analysis.app.panels import (
    agent_details,
    clock,
    details_html,
    legend_html,
    link_text,
    mean_accuracy,
    status_text,
)

__all__ = [
    "AGENT_CLASS",
    "KIND_COLOURS",
    "KIND_SHAPES",
    "NOTHING_SENT",
    "SELECTED",
    "SHOW_TILES",
    "AccuracyPlot",
    "AgentInfo",
    "AppModel",
    "AppPage",
    "ContactsPlot",
    "EnergyPlot",
    "LinkPlot",
    "MapLayer",
    "MapView",
    "NeighboursPlot",
    "QueuedController",
    "StatusLine",
    "StepQueue",
    "accuracy_colour",
    "accuracy_figure",
    "agent_details",
    "agents_geojson",
    "areas_geojson",
    "clock",
    "contact_pairs",
    "contacts_figure",
    "contacts_geojson",
    "details_html",
    "energy_figure",
    "energy_per_kind",
    "energy_split_columns",
    "env_settings",
    "initial_settings",
    "legend_html",
    "link_figure",
    "link_on",
    "link_progress",
    "link_text",
    "lonlat",
    "map_view",
    "mean_accuracy",
    "model_params",
    "neighbours_figure",
    "occupied_cells_geojson",
    "progress_labels",
    "selection_geojson",
    "shape_size_m",
    "status_text",
    "streets_geojson",
    "world_bounds",
]
