"""Street maps (real OpenStreetMap graphs), grid cells and areas."""

from mobidfl.maps.grid import Grid, area_of_points, split_areas
from mobidfl.maps.network import StreetNetwork, TurnTable
from mobidfl.maps.sources import ATTRIBUTION, BUNDLED, load_graph, street_grid

__all__ = [
    "ATTRIBUTION",
    "BUNDLED",
    "Grid",
    "StreetNetwork",
    "TurnTable",
    "area_of_points",
    "load_graph",
    "split_areas",
    "street_grid",
]
