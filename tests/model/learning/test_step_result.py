"""A learning step returns a frozen StepResult and the Mesa model stores it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mobidfl.model.learning.results import StepResult
from mobidfl.model.world import MobiDFLModel
from tests.worlds import NO_AGENTS

SMALL = dict(
    NO_AGENTS, map="nyc_uws", vehicles=6, policy="dpsgd", model="mlp", test_size=50,
    local_steps=1, steps=3, eval_every=2, seed=4,
)
"""Six D-PSGD cars on the UWS, evaluated at steps 2 and 3 (the last)."""


@pytest.fixture(scope="module")
def stepped() -> tuple[MobiDFLModel, list[StepResult]]:
    model = MobiDFLModel(**SMALL)
    results = []
    for _ in range(3):
        model.step()
        results.append(model.last_step)
    return model, results


def test_only_evaluated_steps_carry_an_evaluation(stepped):
    # Prepare
    model, results = stepped
    # Execute
    evaluated = [r.evaluated for r in results]
    # Assert: eval_every = 2 and the last step; the model keeps the latest evaluation
    assert [r.step for r in results] == [1, 2, 3]
    assert evaluated == [False, True, True]
    assert results[0].evaluation is None
    assert model.evaluation is results[2].evaluation
    np.testing.assert_array_equal(model.accuracy, results[2].evaluation.accuracy)
    assert np.isfinite(results[1].evaluation.accuracy).all()
    assert results[0].trained.all() and np.isfinite(results[0].train_loss).all()


def test_reporters_read_the_stored_result(stepped):
    # Prepare
    model, results = stepped
    # Execute
    table = model.model_table().set_index("step")
    # Assert: step 1 has no evaluation (empty cells), steps 2-3 report their own results
    assert np.isnan(table.loc[1, "acc_mean"])
    for r in results[1:]:
        assert table.loc[r.step, "acc_mean"] == pytest.approx(np.mean(r.evaluation.accuracy))
        assert table.loc[r.step, "loss_mean"] == pytest.approx(np.mean(r.evaluation.loss))
        assert table.loc[r.step, "consensus"] == r.evaluation.consensus


def test_a_step_result_cannot_be_changed(stepped):
    # Prepare
    _, results = stepped
    result = results[1]
    # Execute / Assert: frozen fields, read-only arrays, read-only metrics
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.stop = True  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        result.evaluation.accuracy[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        result.train_loss[0] = 0.0
    with pytest.raises(TypeError):
        result.metrics["x"] = 1.0  # type: ignore[index]


def test_early_stop_is_a_result_the_model_acts_on():
    # Prepare: local training at a negligible rate: accuracy cannot improve (patience 1)
    model = MobiDFLModel(
        **SMALL | {"steps": 6, "eval_every": 1, "lr": 1e-12, "policy": "local"},
        early_stop_patience=1,
    )
    # Execute
    model.run()
    # Assert: the session asked to stop, the model stopped running before step 6
    assert model.last_step is not None and model.last_step.stop
    assert not model.running
    assert model.steps < 6
