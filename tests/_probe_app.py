"""Minimal Mesa SolaraViz page that proves the offline browser harness works.

WHY: before the real MobiDFL app exists, the harness (tests/browser.py) needs a page with the same
moving parts: SolaraViz controls (Step button), a matplotlib plot made with
``mesa.visualization.make_plot_component`` inside Solara's draggable grid, and a text that shows
model state. Run by hand with ``.venv/bin/solara run tests/_probe_app.py``.
"""

from __future__ import annotations

import mesa
import solara
from mesa.visualization import SolaraViz, make_plot_component

COUNTER_PREFIX = "Probe counter:"


class ProbeModel(mesa.Model):
    """A model whose only state is a counter that grows by ``increment`` per step."""

    def __init__(self, *, increment: int = 1, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        if increment < 1:
            msg = f"increment={increment} is invalid; allowed: an integer >= 1"
            raise ValueError(msg)
        self.increment = increment
        self.counter = 0
        self.datacollector = mesa.DataCollector(model_reporters={"Counter": "counter"})
        self.datacollector.collect(self)

    def step(self) -> None:
        """Advance the counter and record it for the plot."""
        self.counter += self.increment
        self.datacollector.collect(self)


def CounterText(model: ProbeModel) -> solara.Text:
    """Show the counter as text, so a browser test can read the model state."""
    return solara.Text(f"{COUNTER_PREFIX} {model.counter}", classes=["probe-counter"])


model_params = {
    "increment": {
        "type": "SliderInt",
        "value": 2,
        "label": "Increment",
        "min": 1,
        "max": 5,
        "step": 1,
    },
}

model = ProbeModel(increment=2)
page = SolaraViz(
    model,
    components=[CounterText, make_plot_component("Counter")],
    model_params=model_params,
    name="MobiDFL harness probe",
)
