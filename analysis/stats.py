"""Mean ± standard deviation over seeds: one convention for every table MobiDFL prints.

The spread is the *sample* standard deviation (``ddof = 1``, Bessel's correction), because
the seeds are a sample of the runs one could make; ``numpy.std``'s default (``ddof = 0``)
would understate it by sqrt((n - 1) / n), e.g. by 18 % for three seeds. One value has no
spread to estimate, so only its mean is written (no "± 0.0"). Non-finite values (NaN for a
metric a run did not record) are left out; no finite value at all gives ``"n/a"``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

MISSING = "n/a"
"""What :func:`mean_std` writes when there is no finite value."""


def sample_std(values: Iterable[float] | np.ndarray) -> float:
    """Sample standard deviation (``ddof = 1``) of the finite values; 0.0 for fewer than two."""
    v = _finite(values)
    return float(v.std(ddof=1)) if v.size > 1 else 0.0


def format_mean_std(
    mean: float, std: float, n: int, *, digits: int = 2, signed: bool = False, width: int = 0
) -> str:
    """``"mean ± std"`` with ``digits`` decimals, or ``"mean"`` alone when ``n < 2``.

    For statistics computed elsewhere (e.g. by a pandas group-by). ``signed`` writes a ``+``
    before positive means (effects, gaps); ``width`` is the minimum width of the mean, so
    that columns of a plain-text table line up.
    """
    text = f"{mean:{'+' if signed else ''}{width}.{digits}f}"
    return text if n < 2 else f"{text} ± {std:.{digits}f}"


def mean_std(
    values: Iterable[float] | np.ndarray,
    *,
    digits: int = 2,
    factor: float = 1.0,
    signed: bool = False,
    width: int = 0,
) -> str:
    """``"mean ± std"`` of ``values`` times ``factor`` (e.g. 100 for percent), sample std.

    Non-finite values are dropped; none left gives ``"n/a"``, one gives the mean alone.
    ``digits``, ``signed`` and ``width`` as in :func:`format_mean_std`.
    """
    v = _finite(values) * factor
    if v.size == 0:
        return MISSING
    return format_mean_std(
        float(v.mean()), sample_std(v), v.size, digits=digits, signed=signed, width=width
    )


def _finite(values: Iterable[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values if hasattr(values, "__array__") else list(values), dtype=float)
    return v[np.isfinite(v)]
