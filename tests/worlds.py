"""Small worlds that tests name explicitly (the product's defaults are a city-scale world)."""

NO_AGENTS = {"vehicles": 0, "pedestrians": 0, "sensors": 0, "uavs": 0}
"""Start from no agents of any kind; a test then adds the ones it is about."""

UWS_CARS = {**NO_AGENTS, "map": "nyc_uws", "vehicles": 20, "policy": "dpsgd"}
"""v0.1's default world: 20 D-PSGD cars on the dense 0.6 km² Upper West Side."""
