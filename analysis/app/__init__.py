"""The interactive app (``solara run app.py``), one job per module.

The page is Mesa's ``SolaraViz`` sidebar (parameter inputs) with our own Step/Play/Reset (a
click during a step is queued, never lost) and our own main area: the map on its whole width,
fitted to the world on load, the plots below, an agent's panel beside them once one is picked.
Layers point one way: ``look`` (colours, shapes) → ``layers`` (GeoJSON), ``panels`` (HTML),
``figures`` (matplotlib), all pure functions of a running :class:`mobidfl.model.world.MobiDFLModel`
and testable without a browser → ``components`` (Solara components that arrange them) →
``controller`` (Step/Play/Reset, the page). ``inputs`` builds the parameter widgets and
``app_model`` the model the app runs (:class:`AppModel`). ``compare`` (pure) and
``compare_view`` (its tab) run the City tab's world under several policies side by side and
place it on the regime map. Each module says why it is our own rather than Mesa's or
mesa-geo's.

Map data © OpenStreetMap contributors (ODbL).
"""

from __future__ import annotations

from typing import Any

from mobidfl.exports import resolve

# name -> the module that defines it; resolved on first use (PEP 562), so importing one
# pure part (``mobidfl.analysis.app.layers``, ``look``, ``figures``) does not import Solara
_EXPORTS: dict[str, str] = {
    **dict.fromkeys((
        "AppModel",
    ), "mobidfl.analysis.app.app_model"),
    **dict.fromkeys((
        "SELECTED", "SHOW_TILES", "AccuracyPlot", "AgentInfo", "ContactsPlot", "EnergyPlot",
        "LinkPlot", "MapView", "NeighboursPlot", "StatusLine",
    ), "mobidfl.analysis.app.components"),
    **dict.fromkeys((
        "AppPage", "QueuedController", "StepQueue",
    ), "mobidfl.analysis.app.controller"),
    **dict.fromkeys((
        "Comparison", "RegimePoint", "compare_accuracy_figure", "compare_bytes_figure",
        "cumulative_bytes", "policy_settings", "regime_point", "regime_point_figure",
        "regime_text", "study_worlds",
    ), "mobidfl.analysis.app.compare"),
    **dict.fromkeys((
        "CompareView",
    ), "mobidfl.analysis.app.compare_view"),
    **dict.fromkeys((
        "accuracy_figure", "contacts_figure", "energy_figure", "energy_per_kind",
        "energy_split_columns", "link_figure", "link_on", "neighbours_figure",
    ), "mobidfl.analysis.app.figures"),
    **dict.fromkeys((
        "env_settings", "initial_settings", "model_params",
    ), "mobidfl.analysis.app.inputs"),
    **dict.fromkeys((
        "MapLayer", "agents_geojson", "areas_geojson", "contact_pairs", "contacts_geojson",
        "link_progress", "lonlat", "map_view", "occupied_cells_geojson", "selection_geojson",
        "shape_size_m", "streets_geojson", "world_bounds",
    ), "mobidfl.analysis.app.layers"),
    **dict.fromkeys((
        "AGENT_CLASS", "KIND_COLOURS", "KIND_SHAPES", "NOTHING_SENT", "accuracy_colour",
        "progress_labels",
    ), "mobidfl.analysis.app.look"),
    **dict.fromkeys((
        "agent_details", "clock", "details_html", "legend_html", "link_text", "mean_accuracy",
        "status_text",
    ), "mobidfl.analysis.app.panels"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return resolve(globals(), _EXPORTS, name)
