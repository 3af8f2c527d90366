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
