"""A resumed run continues exactly where it stopped (state saved without pickled code)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from mobidfl.model.checkpoint import load, save_atomic
from mobidfl.model.world import MobiDFLModel

SETTINGS = dict(
    vehicles=8, pedestrians=3, uavs=2, steps=6, local_steps=2, test_size=100, momentum=0.5
)


@pytest.mark.parametrize("learning", [True, False])
def test_resume_from_checkpoint_equals_uninterrupted_run(tmp_path, learning):
    # Prepare
    straight = MobiDFLModel(learning=learning, **SETTINGS).run()
    first = MobiDFLModel(learning=learning, **SETTINGS)
    first.run(steps=3)
    path = save_atomic(first.state_dict(), tmp_path / "state.pt")
    # Execute
    resumed = MobiDFLModel(learning=learning, **SETTINGS)
    resumed.load_state_dict(load(path))
    resumed.run()
    # Assert
    assert resumed.steps == 6
    pd.testing.assert_frame_equal(resumed.model_table(), straight.model_table())
    pd.testing.assert_frame_equal(resumed.agent_table(), straight.agent_table())


def test_checkpoint_loads_with_weights_only(tmp_path):
    model = MobiDFLModel(**SETTINGS)
    model.run(steps=1)
    path = save_atomic(model.state_dict(), tmp_path / "state.pt")
    raw = torch.load(path, weights_only=True)
    assert raw["steps"] == 1
    assert not list(tmp_path.glob(".ckpt-*"))


def test_a_resumed_clock_is_mesa_s_own_at_the_saved_step():
    # Prepare: Mesa's clock (model.steps, model.time) after three steps, and a fresh model
    first = MobiDFLModel(learning=False, **SETTINGS)
    first.run(steps=3)
    resumed = MobiDFLModel(learning=False, **SETTINGS)
    # Execute
    resumed.load_state_dict(first.state_dict())
    # Assert: Mesa counted the three steps without running them; its own loop goes on
    assert (resumed.steps, resumed.time) == (3, 3.0) and not resumed._clock_only
    assert len(resumed.model_table()) == len(first.model_table()) == 4
    resumed.run_for(1)  # Mesa 3.5's public time API: one step event
    assert (resumed.steps, resumed.time) == (4, 4.0)
    assert len(resumed.model_table()) == 5


def test_a_checkpoint_does_not_load_into_a_model_that_ran_past_it():
    # Prepare
    saved = MobiDFLModel(learning=False, **SETTINGS)
    saved.run(steps=1)
    ahead = MobiDFLModel(learning=False, **SETTINGS)
    ahead.run(steps=2)
    # Execute / Assert: Mesa's clock does not go back
    with pytest.raises(ValueError, match="not run past it"):
        ahead.load_state_dict(saved.state_dict())
