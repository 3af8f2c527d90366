"""What a radio contact can carry: pure functions of the link models.

Every function here is vectorised over contacts (numpy arrays in, arrays out) and has no
state; the link plug-ins (:mod:`mobidfl.model.links`) compose them. Units: metres, seconds, bits
per second for rates, bytes for sizes, watts and joules for energy.

Anchors: The ONE (Keränen et al., SIMUTools 2009) aborts a transfer when its contact ends
and gives a rate per distance bin (``DistanceCapacityInterface``); the log-distance path
loss and Shannon's capacity ``C = B log2(1 + SNR)`` are textbook (Rappaport, *Wireless
Communications*, 2nd ed., eq. 4.68; Shannon 1948).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "BYTES_PER_PARAMETER",
    "delivered_prefix",
    "expected_attempts",
    "fair_split",
    "log_distance_loss_db",
    "message_bytes",
    "message_loss_probability",
    "overlap_counts",
    "parse_kind_rates",
    "parse_rate_table",
    "shannon_rate",
    "stay_seconds",
    "table_rate",
    "thermal_noise_dbm",
    "training_flops",
]

BYTES_PER_PARAMETER: dict[str, int] = {"fp32": 4, "bf16": 2, "int8": 1}
"""Bytes a model parameter takes on the air: float32 (PyTorch's default), bfloat16, or int8
after quantisation (scales and zero points are part of the per-message overhead)."""


def message_bytes(num_params: int, *, dtype: str, overhead: int) -> int:
    """Bytes of one model message: ``num_params x bytes per parameter + overhead``.

    Cached-DFL's CNN (29,034 parameters) in fp32 is 116,136 bytes plus the overhead.
    """
    if dtype not in BYTES_PER_PARAMETER:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(BYTES_PER_PARAMETER)}")
    return int(num_params) * BYTES_PER_PARAMETER[dtype] + int(overhead)


def parse_rate_table(text: str) -> tuple[np.ndarray, np.ndarray]:
    """``"0:27e6,50:12e6,100:6e6"`` -> distances (m, ascending from 0) and rates (bit/s).

    A step table as in The ONE's ``DistanceCapacityInterface``: the rate of the last
    breakpoint at or below the distance. Rates may not rise with distance (a table that
    does is a typo, not a radio), so it raises :class:`ValueError` saying what is allowed.
    """
    try:
        items = [part.split(":") for part in text.split(",") if part.strip()]
        distances = np.array([float(d) for d, _ in items])
        rates = np.array([float(r) for _, r in items])
    except ValueError:
        raise ValueError("DISTANCE:RATE pairs separated by commas, e.g. 0:27e6,100:6e6") from None
    if not items:
        raise ValueError("at least one DISTANCE:RATE pair, e.g. 0:6e6")
    if not (np.isfinite(distances).all() and np.isfinite(rates).all()):
        raise ValueError("finite distances and rates")
    if distances[0] != 0 or (np.diff(distances) <= 0).any():
        raise ValueError("distances ascending from 0 (the first pair is 0:RATE)")
    if (rates < 0).any():
        raise ValueError("rates >= 0 (bit/s)")
    if (np.diff(rates) > 0).any():
        raise ValueError("rates that never rise with distance")
    return distances, rates


def table_rate(distance: np.ndarray, distances: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Rate at ``distance`` from a step table (:func:`parse_rate_table`)."""
    index = np.searchsorted(distances, np.asarray(distance, float), side="right") - 1
    return rates[np.clip(index, 0, len(rates) - 1)]


def parse_kind_rates(text: str, kinds: tuple[str, ...]) -> dict[tuple[str, str], float]:
    """``"vehicle-vehicle:6e6,pedestrian-sensor:1e6"`` -> rate per unordered pair of kinds."""
    out: dict[tuple[str, str], float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        pair, sep, value = part.partition(":")
        first, dash, second = pair.partition("-")
        if not sep or not dash or first not in kinds or second not in kinds:
            raise ValueError(
                f"KIND-KIND:RATE pairs of {', '.join(kinds)}, e.g. vehicle-vehicle:6e6"
            )
        try:
            rate = float(value)
        except ValueError:
            raise ValueError("a number of bit/s after KIND-KIND:") from None
        if not rate > 0:
            raise ValueError("rates > 0 (bit/s)")
        out[tuple(sorted((first, second)))] = rate  # type: ignore[index]
    return out


def thermal_noise_dbm(bandwidth_hz: float, noise_figure_db: float) -> float:
    """Receiver noise power: ``-174 dBm/Hz + 10 log10(B) + NF`` (kT at 290 K)."""
    return -174.0 + 10.0 * math.log10(bandwidth_hz) + noise_figure_db


def log_distance_loss_db(
    distance: np.ndarray, *, loss_1m_db: float, exponent: float
) -> np.ndarray:
    """Log-distance path loss ``PL(d) = PL(1 m) + 10 n log10(d / 1 m)`` (Rappaport eq. 4.68).

    Distances under 1 m count as 1 m.
    """
    return loss_1m_db + 10.0 * exponent * np.log10(np.maximum(np.asarray(distance, float), 1.0))


def shannon_rate(
    distance: np.ndarray,
    *,
    tx_dbm: float,
    bandwidth_hz: float,
    noise_figure_db: float,
    loss_1m_db: float,
    exponent: float,
    gap_db: float,
    cap_bps: float,
    sensitivity_dbm: float,
) -> np.ndarray:
    """Rate at ``distance``: ``min(cap, B log2(1 + SNR / gap))``, 0 below sensitivity.

    SNR from the log-distance path loss and thermal noise; ``gap_db`` is the SNR gap of
    practical coding and modulation to Shannon's bound (the "gap approximation", Cioffi,
    Forney et al.), ``cap_bps`` the fastest modulation of the standard.
    """
    rx = tx_dbm - log_distance_loss_db(distance, loss_1m_db=loss_1m_db, exponent=exponent)
    snr_db = rx - thermal_noise_dbm(bandwidth_hz, noise_figure_db) - gap_db
    rate = np.minimum(cap_bps, bandwidth_hz * np.log2(1.0 + 10.0 ** (snr_db / 10.0)))
    return np.where(rx >= sensitivity_dbm, rate, 0.0)


def expected_attempts(loss: float, retries: int) -> float:
    """Mean transmissions of one frame lost with probability ``loss`` per attempt.

    Retried at most ``retries`` times: ``(1 - loss^(r+1)) / (1 - loss)`` (1 without loss).
    """
    if loss <= 0.0:
        return 1.0
    return (1.0 - loss ** (retries + 1)) / (1.0 - loss)


def message_loss_probability(
    size: np.ndarray, *, frame_bytes: int, loss: float, retries: int
) -> np.ndarray:
    """Chance that a message of ``size`` bytes is lost.

    One of its ``ceil(size / frame)`` frames failed all ``retries + 1`` attempts (MAC retries, e.g.
    802.11's retry limit 7).
    """
    frames = np.ceil(np.asarray(size, float) / frame_bytes)
    if loss <= 0.0:
        return np.zeros_like(frames)
    return 1.0 - (1.0 - loss ** (retries + 1)) ** frames


def fair_split(
    need_a: np.ndarray, need_b: np.ndarray, capacity: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each side of a half-duplex contact gets.

    Half each (max-min fair), and what one side leaves unused goes to the other. Neither side gets
    more than it needs.
    """
    need_a, need_b = np.asarray(need_a, float), np.asarray(need_b, float)
    capacity = np.asarray(capacity, float)
    half = capacity / 2.0
    got_a = np.minimum(need_a, np.maximum(half, capacity - need_b))
    got_b = np.minimum(need_b, capacity - got_a)
    return got_a, np.maximum(got_b, 0.0)


def delivered_prefix(sizes: np.ndarray, budget: float) -> tuple[int, float]:
    """Messages sent in order over ``budget`` bytes.

    How many arrive whole, and the bytes of the next one sent before the window closed (0 when none
    was begun).
    """
    ends = np.cumsum(np.asarray(sizes, float))
    count = int(np.searchsorted(ends, budget + 1e-9, side="right"))
    if count >= len(ends):
        return count, 0.0
    done = float(ends[count - 1]) if count else 0.0
    return count, max(0.0, float(budget) - done)


def overlap_counts(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For each contact interval of ``device``, how many intervals of the device overlap it.

    Itself included: the most contacts its one radio is shared among.

    Vectorised: per device, ``#(starts < end) - #(ends <= start)`` by two searchsorted calls
    on times offset by device (no per-device Python).
    """
    device = np.asarray(device, np.int64)
    if not len(device):
        return np.zeros(0, np.int64)
    span = float(max(np.max(end), 0.0) - min(np.min(start), 0.0)) + 1.0
    offset = device * (2.0 * span)
    starts = np.sort(offset + start)
    ends = np.sort(offset + end)
    before_end = np.searchsorted(starts, offset + end, side="left")
    ended = np.searchsorted(ends, offset + start, side="right")
    return np.maximum(before_end - ended, 1)


def training_flops(flops_per_sample: float, samples: np.ndarray) -> np.ndarray:
    """FLOPs of local training.

    Forward FLOPs x 3 (forward + backward) per sample seen (the usual 1:2 forward:backward ratio,
    Kaplan et al. 2020, "Scaling laws", Sec. 2.1).
    """
    return 3.0 * float(flops_per_sample) * np.asarray(samples, float)


def stay_seconds(
    client: np.ndarray,
    server: np.ndarray,
    after: np.ndarray,
    *,
    stays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> np.ndarray:
    """Seconds each ``client`` spends in ``server``'s range after time ``after``.

    Summed over ``stays`` = (client, server, t0, t1) rows (a client in range of a server from t0 to
    t1). Vectorised: one broadcast comparison of the queries with the stays.
    """
    client = np.asarray(client, np.int64)
    server = np.asarray(server, np.int64)
    after = np.broadcast_to(np.asarray(after, float), client.shape)
    who, where, t0, t1 = (np.asarray(x) for x in stays)
    if not len(client) or not len(who):
        return np.zeros(len(client))
    match = (client[:, None] == who[None, :]) & (server[:, None] == where[None, :])
    span = np.maximum(0.0, t1[None, :] - np.maximum(t0[None, :], after[:, None]))
    return np.where(match, span, 0.0).sum(axis=1)
