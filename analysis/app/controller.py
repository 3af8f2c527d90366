"""Step / Play / Reset and the page layout: every Step click is one step, in click order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import solara
import solara.lab
from mesa.visualization.solara_viz import ModelCreator, ShowSteps
from mesa.visualization.utils import force_update
from solara.server import kernel_context

from mobidfl.model.world import MobiDFLModel


class StepQueue:
    """Steps asked for and not yet run, and whether a worker thread is running them.

    WHY: Mesa's ``ModelController`` runs the whole step inside the click
    handler, so the browser session's kernel is busy for seconds and a click that arrives then
    was lost on a loaded machine (three clicks gave step 2). Here a click only adds one to
    ``pending`` and returns at once; one worker thread per page runs the steps one after another
    and redraws after each, so N clicks are N steps and the page can say how many wait.
    All fields are read and written under ``lock``.
    """

    def __init__(self, *, step_label: str = "Step") -> None:
        self.step_label = step_label
        self.lock = threading.Lock()
        self.pending = 0
        self.playing = False
        self.running_step: int | None = None  # the step number being computed, if any
        self.worker: threading.Thread | None = None

    def text(self) -> str:
        """What the controls show: the step being computed and how many clicks wait."""
        with self.lock:
            if self.running_step is None:
                return (f"Idle: {self.step_label} runs one step per click; clicks during a "
                        "step are queued.")
            waiting = f" · {self.pending} more queued" if self.pending else ""
            playing = " (playing)" if self.playing else ""
            return f"Running step {self.running_step}{playing}{waiting}"


@solara.component
def QueuedController(
    model: solara.Reactive[MobiDFLModel],
    model_parameters: solara.Reactive[dict],
    play_interval_s: float = 0.1,
    *,
    rebuild: Callable[[Any], Any] | None = None,
    step_label: str = "Step",
    reset_label: str = "Reset",
    queue_class: str = "mobidfl-queue",
) -> None:
    """Step / Play / Reset whose clicks are never lost while a step runs (see :class:`StepQueue`).

    The worker thread enters this page's kernel context so it can redraw the page (reactive
    state is per browser session); rendering happens in the worker between two steps, never
    while the model is half-way through one. ``model`` may hold anything with ``step()``,
    ``steps`` and ``running`` (the Compare view's runs); ``rebuild(old)`` then makes the
    fresh one on Reset, which is otherwise rebuilt from the inputs (``type(model)(**inputs)``).
    The labels and the queue line's CSS class tell two controllers on one page apart.
    """
    queue = solara.use_memo(lambda: StepQueue(step_label=step_label), [])
    shown = solara.use_reactive(queue.text())
    error = solara.use_reactive(None)
    context = kernel_context.get_current_context()

    def publish() -> None:
        shown.set(queue.text())

    def work() -> None:
        with context:
            while True:
                with queue.lock:
                    current = model.value
                    if not current.running or not (queue.pending or queue.playing):
                        queue.pending, queue.playing = 0, False
                        queue.running_step, queue.worker = None, None
                        break
                    if queue.pending:
                        queue.pending -= 1
                    queue.running_step = current.steps + 1
                publish()
                try:
                    current.step()
                except Exception as exc:
                    error.set(f"error in step: {type(exc).__name__}: {exc}")
                    with queue.lock:
                        queue.pending, queue.playing = 0, False
                force_update()
                if queue.playing:
                    time.sleep(play_interval_s)
            publish()
            force_update()

    def start_worker_locked() -> None:
        if queue.worker is None:
            queue.worker = threading.Thread(target=work, name="mobidfl-steps", daemon=True)
            queue.worker.start()

    def do_step() -> None:
        with queue.lock:
            queue.pending += 1
            start_worker_locked()
        publish()

    def do_play_pause() -> None:
        with queue.lock:
            queue.playing = not queue.playing
            if queue.playing:
                start_worker_locked()
        publish()

    def do_reset() -> None:
        with queue.lock:  # the step under way finishes on the old model; nothing more runs
            queue.pending, queue.playing = 0, False
        error.set(None)
        if rebuild is not None:
            model.value = rebuild(model.value)
            publish()
            return
        # Every input is a setting: no Mesa scenario to split off (SolaraViz's Reset adds an
        # empty one, which the model ignores), so the inputs are the keyword arguments.
        model.value = type(model.value)(**model_parameters.value)
        publish()

    playing = queue.playing
    with solara.Row(justify="space-between"):
        solara.Button(label=reset_label, color="primary", on_click=do_reset)
        solara.Button(label="❚❚" if playing else "▶", color="primary", on_click=do_play_pause,
                      disabled=not model.value.running)
        solara.Button(label=step_label, color="primary", on_click=do_step,
                      disabled=playing or not model.value.running)
    solara.Text(shown.value, classes=[queue_class], style={"font-size": "12px"})
    if error.value:
        solara.Error(label=error.value)


@solara.component
def AppPage(
    model: MobiDFLModel,
    *,
    map_view: Any,
    plots: list[Any],
    side: Any | None = None,
    compare: Any | None = None,
    model_params: dict[str, Any],
    name: str,
) -> None:
    """SolaraViz's app bar and sidebar with :func:`QueuedController` in place of Mesa's.

    The sidebar holds the controls and inputs; :func:`QueuedController` replaces Mesa's
    ``ModelController``. In the main area ``map_view`` on its whole width, then the ``plots`` side
    by side with ``side`` (the agent panel) after them. A plot whose ``shown(model)`` is false is
    left out (the link plots under ``link = "ideal"``). With ``compare``
    (:func:`mobidfl.analysis.app.compare_view.CompareView`) all that is the "City" tab and
    ``compare(model)`` the "Compare policies" tab, on the City tab's world.

    WHY: ``SolaraViz`` hard-wires its controller, and its component grid (``ComponentsView``)
    gives every component an equal draggable cell under a "PAGE 0" tab: the map got a
    quarter of the screen. The city is what a user looks at, so it takes the main area.
    ``ModelCreator`` and ``ShowSteps`` are reused as they are.
    """
    reactive_model = solara.use_reactive(model)
    reactive_parameters = solara.use_reactive({})
    with solara.AppBar():
        solara.AppBarTitle(name)
        solara.lab.ThemeToggle()
    with solara.Sidebar(), solara.Column():
        with solara.Card("Controls"):
            QueuedController(reactive_model, reactive_parameters)
        with solara.Card("Model Parameters"):
            ModelCreator(reactive_model, model_params, model_parameters=reactive_parameters)
        with solara.Card("Information"):
            ShowSteps(reactive_model.value)
    current = reactive_model.value

    def city() -> None:
        with solara.Column(style={"width": "100%", "padding": "4px 8px"}):
            map_view(current)
            with solara.Row(gap="8px", style={"width": "100%", "align-items": "flex-start",
                                              "flex-wrap": "wrap"}):
                for plot in plots:
                    shown = getattr(plot, "shown", None)
                    if shown is not None and not shown(current):
                        continue
                    with solara.Div(style={"flex": "1 1 300px", "min-width": "280px"}):
                        plot(current)
                if side is not None:
                    side(current)

    if compare is None:
        city()
        return
    with solara.lab.Tabs():
        with solara.lab.Tab("City", classes=["mobidfl-tab-city"]):
            city()
        with solara.lab.Tab("Compare policies", classes=["mobidfl-tab-compare"]):
            compare(current)
