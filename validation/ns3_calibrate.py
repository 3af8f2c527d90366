"""Fit the link's efficiency and set-up latency to ns-3 (issue 26, item 5).

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


def _columns(contacts: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.array([sum(c["ns3_udp"]) for c in contacts])
    raw = np.array([c["raw"] for c in contacts])
    d = np.array([c["t_end"] - c["t_start"] for c in contacts])
    return y, raw, d


def cross_validated(contacts: list[dict[str, Any]]) -> dict[str, Any]:
    """Fit on all stays, and 2-fold: fit on the even-numbered stays, test on the odd, and
    back; ``errors`` are the held-out relative errors ``predicted / ns-3 - 1``."""
    y, raw, d = _columns(contacts)
    e, s = fit_efficiency_setup(y, raw, d)
    errors = np.empty(len(y))
    index = np.arange(len(y))
    for fold in (0, 1):
        train, test = index % 2 != fold, index % 2 == fold
        fe, fs = fit_efficiency_setup(y[train], raw[train], d[train])
        errors[test] = predict(raw[test], d[test], efficiency=fe, setup_s=fs) / y[test] - 1.0
    return {"efficiency": e, "setup_s": s, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m validation.ns3_calibrate",
                                description=__doc__.splitlines()[0])
    p.add_argument("json", type=Path, nargs="?",
                   default=Path("results/validation/ns3_link/ns3_link.json"))
    args = p.parse_args(argv)
    try:
        contacts = json.loads(args.json.read_text())["contacts"]
        y, raw, d = _columns(contacts)
        e, s = fit_efficiency_setup(y, raw, d)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ns3_calibrate: {args.json}: {exc} (run python -m validation --cases ns3_link)",
              file=sys.stderr)
        return 2
    fit = cross_validated(contacts)
    held = np.abs(fit["errors"])
    before = np.abs(raw * 0.84 / y - 1.0)
    print(f"{len(y)} stays, {d.sum():.0f} s in range; ns-3 delivered {y.sum() / 1e6:.1f} MB")
    print(f"fit: link.efficiency = {e:.3f}, link.setup_s = {s:.3f}")
    print(f"error |predicted / ns-3 - 1|: default (0.84, 0 s) median {np.median(before):.3f}; "
          f"fitted, held out (2-fold) median {np.median(held):.3f}, p90 "
          f"{np.percentile(held, 90):.3f}")
    print(f'settings: link = "distance_rate", link.profile = "dsrc", '
          f"link.efficiency = {e:.2f}, link.setup_s = {max(s, 0.0):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
