"""``precision = "bf16"`` (issue 22): autocast to bfloat16 for training and testing, fp32
parameters; close to fp32 but not equal; checked with one line; the same on both backends'
interfaces and in a model's settings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mobidfl.errors import ConfigError
from mobidfl.model.learning.engine import TrainingSettings, make_engine
from mobidfl.model.learning.partition import partition_shards


def engine(ds, precision: str, backend: str = "loop", net: str = "cached_cnn"):
    parts = partition_shards(ds.train_labels, 3, rng=np.random.default_rng(0))
    training = TrainingSettings(net=net, lr=0.05, batch_size=16, local_steps=4, seed=2,
                                precision=precision)
    return make_engine(backend, training, dataset=ds, parts=parts)


@pytest.mark.parametrize("backend", ["loop", "batched"])
def test_bf16_trains_fp32_parameters_close_to_fp32_but_not_equal(ds, backend):
    # Prepare
    fp32, bf16 = engine(ds, "fp32", backend), engine(ds, "bf16", backend)
    # Execute
    for e in (fp32, bf16):
        e.train()
    (acc32, loss32), (acc16, loss16) = fp32.evaluate(), bf16.evaluate()
    # Assert: fp32 storage; bf16 rounding (~3 significant digits) visible but small. bf16's
    # unit roundoff is 2**-8 = 3.9e-3: loss rtol 0.05 is ~13 of them, accuracy 0.05 is 10 of
    # 200 samples. Measured over make test-cpu-matrix's 8 dispatches (AMX, AVX512_BF16,
    # AVX-512 and AVX2 each do bf16 their own way): params <= 9.3e-4 (0.05 is 54 x that),
    # loss <= 2.2e-3 relative, accuracy <= 5e-3 (one sample)
    assert all(p.dtype == torch.float32 for p in bf16.params)
    diff = max(float((a - b).abs().max()) for a, b in zip(fp32.params, bf16.params, strict=True))
    assert 0.0 < diff < 0.05
    assert not np.array_equal(loss32, loss16)
    # loss ~13 bf16 u, accuracy 10 of 200 samples (above)
    assert np.allclose(loss32, loss16, rtol=0.05) and np.allclose(acc32, acc16, atol=0.05)


def test_bf16_evaluation_of_the_same_parameters_is_close(ds):
    # Prepare: identical parameters, only the test arithmetic differs
    fp32, bf16 = engine(ds, "fp32"), engine(ds, "bf16")
    fp32.train()
    with torch.no_grad():
        for dst, src in zip(bf16.params, fp32.params, strict=True):
            dst.copy_(src)
    # Execute
    (acc32, loss32), (acc16, loss16) = fp32.evaluate(), bf16.evaluate()
    # Assert: only the evaluation's bf16 rounding (u = 2**-8): loss rtol 0.02 is ~5 u and
    # accuracy 0.03 is 6 of 200 samples; measured over make test-cpu-matrix's 8 dispatches:
    # loss <= 2.0e-4 relative, accuracy 0
    assert np.abs(acc32 - acc16).max() <= 0.03
    # loss: ~5 bf16 u (above)
    assert np.allclose(loss32, loss16, rtol=0.02) and not np.array_equal(loss32, loss16)


def test_precision_is_checked_with_one_line(ds):
    # Execute / Assert: the engine trusts its TrainingSettings (the config refuses a user's
    # value in one line, below); given an unchecked one it still stops, naming it
    with pytest.raises(ValueError, match="precision"):
        engine(ds, "fp16")


def test_precision_is_a_learning_setting_with_fp32_default():
    # Prepare
    from mobidfl.model.config import Config

    # Execute
    default, bf16 = Config.from_settings({}), Config.from_settings({"precision": "bf16"})
    # Assert
    assert default.precision == "fp32" and bf16.precision == "bf16"
    with pytest.raises(ConfigError, match="precision"):
        Config.from_settings({"precision": "half"})


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_reproduction_report_states_the_precision(tmp_path, precision):
    import pandas as pd

    from mobidfl.analysis.reproduce import CACHED, variant_settings, write_report
    from mobidfl.model.config import Config

    # Prepare
    steps = pd.DataFrame([{"variant": v, "seed": s, "step": t, "acc_mean": 0.5 + t / 100}
                          for v in ("LRU", "DFL") for s in (0, 1) for t in range(3)])  # fmt: skip
    extra = {"precision": precision}
    resolved = {v: Config.from_settings(variant_settings(CACHED, v, scale="small", extra=extra))
                for v in ("LRU", "DFL")}  # fmt: skip
    # Execute
    text = write_report(CACHED, steps, tmp_path, resolved=resolved, scale="small",
                        seeds=[0, 1]).read_text()  # fmt: skip
    # Assert
    assert f"(precision `{precision}`)" in text
