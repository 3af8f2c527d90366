"""The learning rate has one current value: a plateau cut reads the same wherever it is seen.

The settings (``Config``, ``TrainingSettings``) stay frozen at the initial rate; the schedule
is the session's state and the engine's :attr:`lr` its one current value.
"""

from __future__ import annotations

import numpy as np
import pytest

from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.learning import engine as engine_module
from mobidfl.model.learning.backends import Hyper
from mobidfl.model.world import MobiDFLModel

SETTINGS = dict(
    vehicles=6, pedestrians=2, uavs=0, steps=6, local_steps=1, test_size=50, workers=1,
    lr=0.08, lr_plateau_patience=1, lr_plateau_factor=0.5,
)
INITIAL, CUT = 0.08, 0.04


def _spied(model: MobiDFLModel, monkeypatch: pytest.MonkeyPatch) -> list[Hyper]:
    """Stall the reported training loss (so the schedule cuts) and record each step's Hyper."""
    used: list[Hyper] = []
    kernel = engine_module.train_loop_agents

    def spy(*args: object) -> np.ndarray:
        used.append(args[7])  # hp: the optimiser settings this training step ran with
        return kernel(*args)

    monkeypatch.setattr(engine_module, "train_loop_agents", spy)
    engine = model.learner.engine
    real_train = engine.train
    monkeypatch.setattr(engine, "train", lambda *, mask=None: np.ones_like(real_train(mask=mask)))
    return used


def test_a_plateau_cut_is_the_one_current_rate_everywhere_and_survives_a_checkpoint(
    tmp_path, monkeypatch
):
    # Prepare: patience 1 and a loss that never improves after step 1: a cut after step 3
    model = MobiDFLModel(**SETTINGS)
    used = _spied(model, monkeypatch)
    session, engine = model.learner, model.learner.engine
    # Execute
    for _ in range(4):
        model.step()
    # Assert: the schedule, the engine and the next training step's Hyper agree on the cut
    assert [hp.lr for hp in used] == [INITIAL, INITIAL, INITIAL, CUT]
    assert session.plateau.lr == engine.lr == CUT
    # the frozen settings still hold the initial rate, and only set_lr moves the current one
    assert model.config.lr == engine.training.lr == INITIAL
    with pytest.raises(AttributeError):
        engine.lr = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="set_lr"):
        engine.set_lr(0.0)
    # Execute: a checkpoint round trip into a fresh run of the same settings
    path = save_atomic(model.state_dict(), tmp_path / "state.pt")
    monkeypatch.undo()
    resumed = MobiDFLModel(**SETTINGS)
    resumed.load_state_dict(load(path))
    again = resumed.learner
    restored = (again.plateau, again.engine.lr)
    after = _spied(resumed, monkeypatch)
    resumed.step()
    # Assert: the resumed run trains with the cut rate; its settings keep the initial one
    assert restored == (session.plateau, CUT) and session.plateau.lr == CUT
    assert [hp.lr for hp in after] == [CUT]
    assert resumed.config.lr == again.engine.training.lr == INITIAL
