"""The public learning contract: Engine.evaluate_params / set_data / sample_losses, and
declared policy metrics."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from mobidfl.errors import ConfigError
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_iid
from mobidfl.model.policies import Exchange, ExchangeContext, ExchangePolicy
from mobidfl.model.policies.base import check_metrics
from mobidfl.model.world import MobiDFLModel


@pytest.fixture(scope="module")
def engine(ds):
    parts = partition_iid(ds.train_labels[:400], 4, rng=np.random.default_rng(0))
    e = make_engine(
        "loop",
        TrainingSettings(net="mlp", lr=0.05, batch_size=8, local_steps=2, seed=0, same_init=False),
        dataset=ds,
        parts=parts,
    )
    e.train()
    return e


def test_evaluate_params_equals_the_agent_evaluation(engine):
    # Prepare
    acc, loss = engine.evaluate()
    # Execute
    mine = [engine.evaluate_params(engine.snapshot(i)) for i in range(4)]
    # Assert: the same forward on the same samples: bit-equal on all of make
    # test-cpu-matrix's 8 dispatches. An accuracy is k / 200, so rtol 1e-6 asks for the same
    # counts; rtol 1e-5 on the mean loss allows another order of its 200-term float32 sum
    # (gamma_200 = 1.2e-5 worst case, the typical sqrt(200) u ~1e-6 well inside)
    np.testing.assert_allclose([m[0] for m in mine], acc, rtol=1e-6)
    # the loss: gamma_200 worst case (above)
    np.testing.assert_allclose([m[1] for m in mine], loss, rtol=1e-5)


def test_evaluate_params_on_some_labels_uses_only_those_test_samples(engine, ds):
    # Prepare: accuracy on labels {0} and {1} weighted by their test counts = on {0, 1}
    y = ds.y_test.numpy()
    n0, n1 = int((y == 0).sum()), int((y == 1).sum())
    params = engine.snapshot(0)
    # Execute
    a0, _ = engine.evaluate_params(params, labels=[0])
    a1, _ = engine.evaluate_params(params, labels=[1])
    both, _ = engine.evaluate_params(params, labels=[0, 1])
    missing = engine.evaluate_params(params, labels=[99])
    # Assert
    assert both == pytest.approx((a0 * n0 + a1 * n1) / (n0 + n1))
    assert np.isnan(missing[0]) and np.isnan(missing[1])


def test_set_data_updates_partition_histogram_and_loss_order(engine, ds):
    # Prepare: give agent 2 the first 40 samples of label 3 only
    labels = np.asarray(ds.train_labels)
    order = np.flatnonzero(labels == 3)[:40][::-1].copy()
    saved = (engine.parts[2].copy(), int(engine.data_sizes[2]), engine.label_hist[2].copy())
    try:
        # Execute
        engine.set_data(2, order)
        losses = engine.sample_losses(2, on_agent=2)
        # Assert
        assert engine.data_sizes[2] == 40
        assert np.flatnonzero(engine.label_hist[2]).tolist() == [3]
        assert losses.shape == (40,)
        assert engine.loss_of(2, on_agent=2, max_samples=40) == pytest.approx(losses.mean())
        with pytest.raises(ValueError, match="indices"):
            engine.set_data(2, np.array([0, 0, 1, 2, 3, 4, 5, 6, 7]))
    finally:
        engine.set_data(2, saved[0])


class _Chatty(ExchangePolicy):
    name = "_chatty_test_only"
    metric_names: ClassVar[tuple[str, ...]] = ("declared",)

    def exchange(self, ctx: ExchangeContext) -> Exchange:
        return Exchange(metrics={"declared": 1.0, "undeclared": 2.0})


def test_an_undeclared_metric_raises_instead_of_being_dropped():
    # Prepare
    policy = _Chatty(settings=None)
    # Execute / Assert
    check_metrics(policy, {"declared": 1.0})
    with pytest.raises(ConfigError, match="undeclared"):
        check_metrics(policy, policy.exchange(None).metrics)  # type: ignore[arg-type]


def test_dpsgd_degree_mean_reaches_the_model_table():
    # Prepare / Execute
    model = MobiDFLModel(
        map="grid:4x4:100",
        vehicles=6,
        pedestrians=0,
        sensors=0,
        uavs=0,
        steps=2,
        policy="dpsgd",
        local_steps=1,
        batch_size=8,
        test_size=50,
        partition="iid",
        seed=0,
    ).run()
    # Assert
    table = model.model_table()
    assert "degree_mean" in table.columns
    assert np.isfinite(table["degree_mean"].iloc[1:]).all()


@pytest.mark.parametrize("net", ["cnn", "cached_cnn", "mlp"])
def test_flop_probe_runs_where_the_net_is(net):
    # Prepare: a net moved off the CPU (meta stands in for CUDA here: no data, same rule)
    from mobidfl.model.learning.nets import build_net, flops_per_sample

    cpu = build_net(net, (1, 28, 28), 10)
    elsewhere = build_net(net, (1, 28, 28), 10).to("meta")
    # Execute / Assert: the probe follows the net (it used to feed a CPU tensor, which broke
    # every device = cuda engine at construction)
    assert flops_per_sample(elsewhere, (1, 28, 28)) == flops_per_sample(cpu, (1, 28, 28)) > 0
