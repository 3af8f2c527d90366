"""The model as the app builds it: the app's inputs, a bad-input fallback, step timing."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, override

from mobidfl.analysis.app.inputs import initial_settings, model_params
from mobidfl.model.world import MobiDFLModel


class AppModel(MobiDFLModel):
    """``MobiDFLModel`` with the app's inputs: a map chooser and a bad-input fallback.

    WHY: SolaraViz re-creates the model as ``type(model)(**inputs)`` on Reset and shows a raw
    traceback when that raises. Here a setting the model rejects (a mistyped map path, a
    dataset whose files are missing, too many sensors for the grid) leaves a one-line message
    in ``app_error`` and builds ``fallback`` settings instead, so the page stays usable.

    Parameters
    ----------
    map
        a bundled map name (the Select input).
    map_file
        free text (a file path or any ``map`` spec); overrides ``map`` when set.
    fallback
        settings to use when these are rejected (``None``: raise instead).
    **settings
        public settings of :class:`mobidfl.model.config.Config`.
    """

    def __init__(
        self,
        *,
        map: str = "nyc_uws",
        map_file: str = "",
        fallback: Mapping[str, Any] | None = None,
        scenario: Any = None,
        **settings: Any,
    ) -> None:
        # Mesa's Reset passes its default (empty) ``scenario``; all our inputs are settings.
        del scenario
        self.app_error: str | None = None
        try:
            super().__init__(**self.model_settings(map=map, map_file=map_file, **settings))
        except (ValueError, OSError, RuntimeError, KeyError) as exc:
            if fallback is None:
                raise
            self.app_error = f"{type(exc).__name__}: {exc} (showing the default scenario)"
            super().__init__(**self.model_settings(**fallback))
        self.last_step_s = float("nan")
        self.distinct_history: dict[str, list[float]] = {}
        self._record_distinct()
        self.completed_steps = self.steps

    @staticmethod
    def model_settings(
        *, map: str = "nyc_uws", map_file: str = "", **settings: Any
    ) -> dict[str, Any]:
        """The app's inputs as :class:`MobiDFLModel` settings (``map_file`` wins over ``map``).

        SolaraViz passes every input, but an input left at its start value is not a choice:
        with a preset selected, such inputs are dropped so the preset fills them; without
        one, untouched mobility and radius inputs are dropped so that a chosen policy can
        bring its own (``requires`` / ``defaults``, mobidfl.model.config).
        """
        start = initial_settings(model_params())
        out = {"map": map_file.strip() or map, **settings}
        preset = bool(out.get("preset"))
        for name in list(out):
            if name == "preset" or name not in start or out[name] != start[name]:
                continue
            if preset or name.endswith("_mobility") or name == "radius_m":
                del out[name]
        if preset and not map_file.strip() and map == start.get("map"):
            out.pop("map", None)
        return out

    @override
    def step(self) -> None:
        started = time.perf_counter()
        super().step()
        self.last_step_s = time.perf_counter() - started
        self._record_distinct()
        self.completed_steps = self.steps  # last: a redraw keyed on it never sees half a step

    def _record_distinct(self) -> None:
        """Mean cumulative distinct neighbours per kind (= per mobility model) this step."""
        for kind in dict.fromkeys(self.kind_of):
            label = f"{kind} ({self.config.kind(kind).mobility})"
            mask = self.kind_of == kind
            value = float(self.distinct_neighbours[mask].mean())
            self.distinct_history.setdefault(label, []).append(value)
