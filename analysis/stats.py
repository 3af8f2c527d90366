"""Mean ± standard deviation over seeds: one convention for every table MobiDFL prints.

The confidence interval of a mean over seeds (:func:`mean_ci`) is Student's t interval.

The spread is the *sample* standard deviation (``ddof = 1``, Bessel's correction), because
the seeds are a sample of the runs one could make; ``numpy.std``'s default (``ddof = 0``)
would understate it by sqrt((n - 1) / n), e.g. by 18 % for three seeds. One value has no
spread to estimate, so only its mean is written (no "± 0.0"). Non-finite values (NaN for a
metric a run did not record) are left out; no finite value at all gives ``"n/a"``.
"""

from __future__ import annotations

import math
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

    Parameters
    ----------
    values
        The numbers (one per seed, say).
    digits
        Decimals of the mean and the std.
    factor
        Multiplies every value first (100 for percent).
    signed
        Write a ``+`` before a positive mean (effects, gaps).
    width
        Minimum width of the mean, so that plain-text columns line up.

    Returns
    -------
    str
        ``"mean ± std"`` (sample std), the mean alone, or ``"n/a"``.
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


def mean_ci(values: Iterable[float] | np.ndarray, *, level: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval ``(low, high)`` of the mean of the finite values.

    mean ± t_{n-1, (1 + level) / 2} · s / sqrt(n) with the sample std ``s``: the seeds are a
    small sample of runs whose spread is estimated from them, so the normal quantile (1.96)
    would be too narrow (for 3 seeds t = 4.30). Fewer than two values have no interval:
    ``(nan, nan)``.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    v = _finite(values)
    if v.size < 2:
        return math.nan, math.nan
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + level / 2.0, v.size - 1)) * sample_std(v) / math.sqrt(v.size)
    mean = float(v.mean())
    return mean - half, mean + half


def format_ci(
    values: Iterable[float] | np.ndarray, *, level: float = 0.95, digits: int = 2,
    signed: bool = False,
) -> str:
    """``"[low, high]"`` of :func:`mean_ci`; ``"n/a"`` with fewer than two finite values."""
    low, high = mean_ci(values, level=level)
    if math.isnan(low):
        return MISSING
    sign = "+" if signed else ""
    return f"[{low:{sign}.{digits}f}, {high:{sign}.{digits}f}]"
