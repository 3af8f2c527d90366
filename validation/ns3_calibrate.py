"""Fit the link's efficiency and set-up latency to ns-3.

``python -m validation.ns3_calibrate [results/validation/ns3_link/ns3_link.json]`` reads the
per-contact numbers of the ``ns3_link`` validation case and fits, for ``distance_rate`` with
the ``dsrc`` profile, the two settings that turn the profile's raw capacity of a stay into what
ns-3 delivered (saturating UDP both ways):

    ns-3 bytes  ~  efficiency * (raw - setup_s * raw_rate)

where ``raw`` is MobiDFL's capacity of the stay with ``link.efficiency = 1`` and no set-up and
``raw_rate = raw / duration`` its mean byte rate (``LinkModel.plan``: capacity = efficiency x
the rate integrated from ``t_start + setup_s``, when the rate is flat over the first
``setup_s``). Linear in ``efficiency`` and ``efficiency * setup_s``: least squares on the
relative residuals, so short and long stays weigh alike. It prints the fit and the settings
to use.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cross_validated", "fit_efficiency_setup", "predict"]


def fit_efficiency_setup(
    measured: np.ndarray, raw: np.ndarray, duration: np.ndarray
) -> tuple[float, float]:
    """``(efficiency, setup_s)`` minimising ``sum(((e (raw - s raw / d)) - y) / y)^2``.

    ``measured`` (y): bytes the reference delivered; ``raw``: the model's bytes with
    efficiency 1 and no set-up; ``duration`` (d): the stays' lengths in seconds (> 0).
    """
    y, raw, d = (np.asarray(v, float) for v in (measured, raw, duration))
    keep = (y > 0) & (d > 0)
    if keep.sum() < 2:
        raise ValueError("at least two stays with bytes delivered")
    y, raw, d = y[keep], raw[keep], d[keep]
    design = np.stack([raw, -raw / d], axis=1) / y[:, None]
    (e, es), *_ = np.linalg.lstsq(design, np.ones_like(y), rcond=None)
    return float(e), float(es / e)


def predict(raw: np.ndarray, duration: np.ndarray, *, efficiency: float,
            setup_s: float) -> np.ndarray:
    """The model's bytes of each stay with these settings (0 when ``setup_s`` outlasts it)."""
    raw, d = np.asarray(raw, float), np.asarray(duration, float)
    return efficiency * raw * np.clip(1.0 - setup_s / np.where(d > 0, d, np.inf), 0.0, None)


def columns(contacts: list[dict[str, Any]], *, key: str = "ns3_udp"
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per stay: ns-3's bytes both ways (``key``: ``ns3_udp`` or ``ns3_tcp``), MobiDFL's raw
    capacity, and the stay's length."""
    y = np.array([sum(c[key]) for c in contacts])
    raw = np.array([c["raw"] for c in contacts])
    d = np.array([c["t_end"] - c["t_start"] for c in contacts])
    return y, raw, d


def window_limited(contacts: list[dict[str, Any]]) -> np.ndarray:
    """Stays where neither TCP transfer finished: the window, not the data, set the bytes."""
    return np.array([max(c["ns3_tcp"]) < c["need"] for c in contacts], bool)


def cross_validated(contacts: list[dict[str, Any]], *, key: str = "ns3_udp",
                    fit_on: np.ndarray | None = None) -> dict[str, Any]:
    """Fit on all stays (``fit_on``: only those), and 2-fold: fit on the even-numbered stays,
    predict the odd, and back. ``predicted``: held-out bytes per stay; ``errors``: their
    ``predicted / ns-3 - 1`` on the ``fit_on`` stays."""
    y, raw, d = columns(contacts, key=key)
    mask = np.ones(len(y), bool) if fit_on is None else np.asarray(fit_on, bool)
    e, s = fit_efficiency_setup(y[mask], raw[mask], d[mask])
    predicted = np.empty(len(y))
    index = np.arange(len(y))
    for fold in (0, 1):
        train, test = (index % 2 != fold) & mask, index % 2 == fold
        fe, fs = fit_efficiency_setup(y[train], raw[train], d[train])
        predicted[test] = predict(raw[test], d[test], efficiency=fe, setup_s=fs)
    errors = predicted[mask] / y[mask] - 1.0
    return {"efficiency": e, "setup_s": s, "stays": int(mask.sum()), "predicted": predicted,
            "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.ns3_calibrate",
                                description=__doc__.splitlines()[0])
    p.add_argument("json", type=Path, nargs="?",
                   default=Path("results/validation/ns3_link/ns3_link.json"))
    args = p.parse_args(argv)
    try:
        contacts = json.loads(args.json.read_text())["contacts"]
        limited = window_limited(contacts)
        fits = {"ns3_udp": cross_validated(contacts, key="ns3_udp"),
                "ns3_tcp": cross_validated(contacts, key="ns3_tcp", fit_on=limited)}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ns3_calibrate: {args.json}: {exc} (run python -m validation --cases ns3_link)",
              file=sys.stderr)
        return 2
    from validation.ns3_link import default_efficiency

    default = default_efficiency()
    y, raw, d = columns(contacts)
    print(f"{len(y)} stays, {d.sum():.0f} s in range; {int(limited.sum())} window-limited "
          f"for the TCP transfers")
    for key, what in (("ns3_udp", "MAC capacity (saturating UDP both ways)"),
                      ("ns3_tcp", "TCP goodput both ways (window-limited stays)")):
        fit = fits[key]
        y, raw, d = columns(contacts, key=key)
        mask = np.ones(len(y), bool) if key == "ns3_udp" else limited
        before = np.abs(raw[mask] * default / y[mask] - 1.0)
        held = np.abs(fit["errors"])
        print(f"{what}: link.efficiency = {fit['efficiency']:.3f}, link.setup_s = "
              f"{fit['setup_s']:.3f} ({fit['stays']} stays); |error| median: default ({default}, "
              f"0 s) {np.median(before):.3f}, fitted and held out (2-fold) "
              f"{np.median(held):.3f}, p90 {np.percentile(held, 90):.3f}")
    tcp = fits["ns3_tcp"]
    print(f'settings for whole-model transfers: link = "distance_rate", link.profile = "dsrc", '
          f"link.efficiency = {tcp['efficiency']:.2f}, link.setup_s = "
          f"{max(tcp['setup_s'], 0.0):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
