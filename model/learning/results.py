"""What a learning step hands back to the Mesa model: frozen values, no shared state.

:meth:`mobidfl.model.learning.session.LearningSession.step` returns a :class:`StepResult`; the
model stores it and its reporters read it (Flower's strategies likewise return results
instead of writing into the server). Light on purpose: no torch import, so the model can
name these types even when learning is off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

__all__ = ["Evaluation", "StepResult"]


def _frozen_array(values: np.ndarray) -> np.ndarray:
    """A float64 copy that refuses writes (results are values, never shared state)."""
    out = np.array(values, dtype=np.float64)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class Evaluation:
    """Every agent's model on the shared test sample (Cached-DFL: one test set for all)."""

    accuracy: np.ndarray
    """``[N]`` accuracy per agent (read-only)."""
    loss: np.ndarray
    """``[N]`` mean cross-entropy per agent (read-only)."""
    consensus: float
    """Mean distance of the agents' models to their average."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "accuracy", _frozen_array(self.accuracy))
        object.__setattr__(self, "loss", _frozen_array(self.loss))
        object.__setattr__(self, "consensus", float(self.consensus))

    @classmethod
    def missing(cls, n: int) -> Evaluation:
        """No evaluation yet: NaN everywhere (the columns stay empty in ``model.csv``)."""
        return cls(accuracy=np.full(n, np.nan), loss=np.full(n, np.nan), consensus=np.nan)


@dataclass(frozen=True)
class StepResult:
    """What one learning step produced; the Mesa model stores it and its reporters read it."""

    step: int
    trained: np.ndarray
    """``[N]`` bool: who ran local training (the policies' ``train_mask``)."""
    train_loss: np.ndarray
    """``[N]`` mean local training loss, NaN where the agent did not train."""
    metrics: Mapping[str, float] = field(default_factory=dict)
    """Every policy's ``Exchange.metrics`` of this step (read-only)."""
    evaluation: Evaluation | None = None
    """This step's evaluation; ``None`` when the step was not evaluated (``eval_every``)."""
    stop: bool = False
    """Early stopping asks the run to end (``early_stop_patience``, Cached-DFL)."""
    link: Mapping[str, np.ndarray] | None = None
    """Per agent, what this step's exchanges cost over the link (``bytes_sent``,
    ``bytes_received``, ``transfers_aborted``, ``airtime_s``, ``energy_j`` and its radio,
    compute and flight parts); under ``link = "ideal"`` only ``bytes_sent`` and
    ``bytes_received``, counted, not limited (no rate: no airtime, no radio energy)."""
    transfers: Mapping[str, np.ndarray] | None = None
    """Per direction of each exchange of this step, :meth:`mobidfl.model.links.LinkPlan.transfers`
    (``sender``, ``receiver``, ``bytes_sent``, ``bytes_received``, ``aborted``; read-only);
    ``None`` under ``link = "ideal"``."""

    def __post_init__(self) -> None:
        trained = np.array(self.trained, dtype=bool)
        trained.flags.writeable = False
        object.__setattr__(self, "trained", trained)
        object.__setattr__(self, "train_loss", _frozen_array(self.train_loss))
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        if self.transfers is not None:
            frozen = {name: np.array(values) for name, values in self.transfers.items()}
            for values in frozen.values():
                values.flags.writeable = False
            object.__setattr__(self, "transfers", MappingProxyType(frozen))

    @property
    def evaluated(self) -> bool:
        """Whether the agents' models were evaluated in this step."""
        return self.evaluation is not None
