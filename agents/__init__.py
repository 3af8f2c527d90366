"""Agent kinds and their mobility models."""

from agents.kinds import AGENT_CLASSES, UAV, DeviceAgent, Pedestrian, Sensor, Vehicle

__all__ = ["AGENT_CLASSES", "UAV", "DeviceAgent", "Pedestrian", "Sensor", "Vehicle"]
