"""Learning-rate schedule and early stop of Cached-DFL's runs, as pure functions.

Cached-DFL (Wang et al., §Optimization Method) uses PyTorch's ``ReduceLROnPlateau`` and
(§Evaluation Setup) stops "when the average test accuracy stops increasing for at least 20
epochs". The paper does not say which quantity the scheduler watches; MobiDFL feeds it the
mean local training loss of the agents that trained this step (mode ``min``), one schedule
for the run. The formulas are torch's defaults: relative threshold 1e-4, no cooldown,
``min_lr`` 0, a reduction applied only when it changes lr by more than 1e-8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["EarlyStopState", "PlateauState", "early_stop_step", "plateau_step"]


@dataclass(frozen=True)
class PlateauState:
    """ReduceLROnPlateau's memory: the current lr, the best metric, steps without gain."""

    lr: float
    best: float = math.inf
    bad_steps: int = 0


def plateau_step(
    state: PlateauState,
    metric: float,
    *,
    factor: float,
    patience: int,
    threshold: float = 1e-4,
    min_lr: float = 0.0,
    eps: float = 1e-8,
) -> PlateauState:
    """One ``ReduceLROnPlateau.step(metric)`` (mode ``min``, ``threshold_mode='rel'``).

    Improvement: ``metric < best * (1 - threshold)``. After more than ``patience`` steps
    without one, ``lr <- max(lr * factor, min_lr)`` and the counter restarts. A NaN metric
    (nobody trained) changes nothing.
    """
    if math.isnan(metric):
        return state
    if metric < state.best * (1.0 - threshold):
        return PlateauState(lr=state.lr, best=metric, bad_steps=0)
    bad = state.bad_steps + 1
    if bad > patience:
        new_lr = max(state.lr * factor, min_lr)
        lr = new_lr if state.lr - new_lr > eps else state.lr
        return PlateauState(lr=lr, best=state.best, bad_steps=0)
    return PlateauState(lr=state.lr, best=state.best, bad_steps=bad)


@dataclass(frozen=True)
class EarlyStopState:
    """Best accuracy so far and the step it was reached at."""

    best: float = -math.inf
    best_step: int = 0


def early_stop_step(
    state: EarlyStopState, accuracy: float, *, step: int, patience: int
) -> tuple[EarlyStopState, bool]:
    """Update with this step's mean accuracy.

    ``True`` = stop (no increase for ``patience`` steps since the best one; Cached-DFL: 20 epochs).
    """
    if not math.isnan(accuracy) and accuracy > state.best:
        state = EarlyStopState(best=accuracy, best_step=step)
    return state, step - state.best_step >= patience
