"""Kept for existing imports: the implementation is :mod:`agents.views`.

The views are what plug-ins on the agents floor (mobility models) and the model floor
(policies) read; they live on the lower of the two.
"""

from agents.views import GroupView, RouteView, WalkerView, WorldView, read_only

__all__ = ["GroupView", "RouteView", "WalkerView", "WorldView", "read_only"]
