"""MobiDFL's link model beside ns-3 802.11p on real contacts.

Contacts are sampled from a MobiDFL run of the Cached-DFL preset ``cached_dfl_003`` (Wang et
al., AAAI 2025: 100 cars on the authors' Manhattan ``manhattan_cdfl``, 120 s epochs, R = 138 m,
learning off). Each sampled stay in range is replayed in ns-3 (the ``ns3`` package, ns-3 3.44):
the two cars follow MobiDFL's own sampled positions (``WaypointMobilityModel``: straight lines
between the samples, the chords of every MobiDFL contact test), over ad-hoc 802.11p (10 MHz,
5.9 GHz) with the ``dsrc`` profile's radio (23 dBm, log-distance loss with exponent 2.1 and
47.9 dB at 1 m, 9 dB noise figure; ``IdealWifiManager`` picks the 802.11p rate by SNR) and a
``RangePropagationLossModel`` cut at R, so the window is MobiDFL's exactly. Two replays each:

* **capacity**: saturating UDP both ways (1472 B datagrams) from the contact's start to its end,
  against the capacity ``distance_rate`` (profile ``dsrc``) gives the same stay;
* **policy bytes**: what Cached-DFL sends (Alg. 1-2: "they not only exchange their own local
  models, but also share their cached models"): each car its own model then a full cache of 10
  (the preset's C_max; at tau_max = 5 and 120 s epochs Table 2's unlimited cache holds 35, so
  C_max = 10 is full in steady state), 116,200 B each (the CNN's 29,034 fp32 parameters + 64 B),
  as one TCP stream each way (ordered and reliable, as the policy's messages), against
  :meth:`mobidfl.model.links.LinkPlan.send`. A message counts when all its bytes arrived.

Pairs are replayed alone: ``link.shared_radio`` is off on the MobiDFL side (a car's other
contacts are not in the ns-3 replay). ``python -m validation.ns3_calibrate`` fits the link's
efficiency and set-up latency from this case's JSON.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mobidfl.atomic import write_text_atomic
from mobidfl.errors import ConfigError
from validation import Row

REFERENCE = "ns-3 3.44 (the ns3 package), 802.11p ad hoc"
CASE = "ns3_link"
PRESET = "cached_dfl_003"
NUM_CAR = 100
PARAMS = 29_034
"""Cached-DFL's CNN (``cached_cnn``), parameters."""
CACHE = 10
"""``cached.size`` of the preset: messages after the own model."""
PROFILE = "dsrc"
WITHIN = 0.10
"""An error within +-10 % counts as a contact that agrees."""


@dataclass(frozen=True)
class Sizes:
    """What ``--size`` runs: contacts sampled, and the longest stay replayed (seconds)."""

    contacts: int
    max_s: float


SIZES = {"small": Sizes(contacts=20, max_s=4.0), "full": Sizes(contacts=200, max_s=130.0)}
"""``small`` (CI) draws from the short stays (<= 4 s: crossings and grazes, about one in ten),
where ns-3 is cheap and the window limits even the CNN's messages; ``full`` from every stay
(a step is 120 s)."""


def message_size() -> int:
    """Bytes of one Cached-DFL model message (fp32 and the link's default overhead)."""
    from mobidfl.model.links import LinkSettings
    from mobidfl.model.maths.link import message_bytes

    o = LinkSettings()
    return message_bytes(PARAMS, dtype=o.dtype, overhead=o.overhead_bytes)


def link_settings(**extra: Any) -> dict[str, Any]:
    """MobiDFL's link for the comparison: ``distance_rate`` with the ``dsrc`` profile."""
    return {"link.model": "distance_rate", "link.profile": PROFILE, "link.shared_radio": False,
            **extra}


def sample_contacts(*, n: int, seed: int, max_s: float) -> list[dict[str, Any]]:
    """``n`` stays in range from a MobiDFL run (preset ``cached_dfl_003``, learning off).

    Steps run until enough stays (each pair's best stay of its step, the one the policies
    use, of at most ``max_s``) are collected, then ``n`` are drawn at random (seeded). Each
    record carries both cars' sampled positions over the stay and MobiDFL's numbers for it.
    """
    from mobidfl.model.config import Config
    from mobidfl.model.contacts import contact_intervals
    from mobidfl.model.links import make_link
    from mobidfl.model.world import MobiDFLModel

    m = MobiDFLModel(preset=PRESET, learning=False, steps=1000, seed=seed, vehicles=NUM_CAR)
    config = m.config
    kinds = np.array(["vehicle"] * m.n_agents)
    size = message_size()
    links = {
        "default": make_link(Config.from_settings(link_settings())),
        "raw": make_link(Config.from_settings(link_settings(**{"link.efficiency": 1.0}))),
    }
    pool: list[dict[str, Any]] = []
    rng = np.random.default_rng([seed, 0x35])
    while len(pool) < 3 * n and m.steps < 50:
        m.step()
        trajectory = m.trajectory
        table = contact_intervals(trajectory, radius_m=config.radius_m, step_s=config.step_s)
        plans = {k: v.plan(table, kinds=kinds, message_bytes=size, n=m.n_agents)
                 for k, v in links.items()}
        best = plans["default"].rows_of(np.stack([table.a, table.b], axis=1))
        dt = config.step_s / (trajectory.shape[0] - 1)
        for row in np.flatnonzero((best == np.arange(len(table))) & (table.duration <= max_s)):
            a, b = int(table.a[row]), int(table.b[row])
            t0, t1 = float(table.t_start[row]), float(table.t_end[row])
            k0 = int(math.floor(t0 / dt))
            k1 = min(int(math.ceil(t1 / dt)), trajectory.shape[0] - 1)
            out = [(k, size) for k in range(1 + CACHE)]
            got_b, got_a = plans["default"].send(a, b, out, out)
            pool.append({
                "seed": seed, "step": int(m.steps), "a": a, "b": b, "t_start": t0, "t_end": t1,
                "d_min": float(table.d_min[row]), "t0": k0 * dt, "dt": dt,
                "pos_a": trajectory[k0:k1 + 1, a].tolist(),
                "pos_b": trajectory[k0:k1 + 1, b].tolist(),
                "capacity": float(plans["default"].capacity[row]),
                "raw": float(plans["raw"].capacity[row]),
                "policy": [len(got_b) * size, len(got_a) * size],
                "need": len(out) * size,
            })
    if len(pool) < n:
        raise ConfigError("--size", len(pool), f"at least {n} stays of <= {max_s} s in 50 steps")
    pick = rng.choice(len(pool), n, replace=False)
    return [pool[k] for k in sorted(pick)]


def ns3_replay(contact: dict[str, Any], *, mode: str, radius_m: float) -> list[float]:
    """Bytes each car received in ns-3 over one stay, ``[at b, at a]``
    (:func:`mobidfl.model.links_ns3.replay_pair` on both cars' sampled positions): ``udp`` saturates
    both ways, ``tcp`` sends ``contact["need"]`` bytes each way."""
    from mobidfl.model.links_ns3 import replay_pair

    dt = contact["dt"]
    paths = tuple([(i * dt, x, y) for i, (x, y) in enumerate(contact[key])]
                  for key in ("pos_a", "pos_b"))
    return replay_pair(paths, start_s=contact["t_start"] - contact["t0"],
                       stop_s=contact["t_end"] - contact["t0"], mode=mode, radius_m=radius_m,
                       profile=PROFILE, need=int(contact["need"]))


def whole_bytes(received: float, *, need: int) -> float:
    """Bytes of the whole messages in an in-order stream of ``received`` bytes."""
    from mobidfl.model.maths.link import delivered_prefix

    size = message_size()
    count, _ = delivered_prefix(np.full(need // size, float(size)), received)
    return float(count * size)


def policy_whole(capacity: float, *, need: int) -> float:
    """Whole-message bytes both ways when a stay carries ``capacity`` bytes: what
    :meth:`mobidfl.model.links.LinkPlan.send` delivers without loss (half each way, what one side
    leaves to the other, in order, the unfinished message lost)."""
    from mobidfl.model.maths.link import delivered_prefix, fair_split

    size = message_size()
    sizes = np.full(need // size, float(size))
    got = fair_split(np.array([need]), np.array([need]), np.array([capacity]))
    return float(sum(delivered_prefix(sizes, float(g[0]))[0] * size for g in got))


def relative_errors(mobidfl: np.ndarray, ns3: np.ndarray, *, floor: float) -> np.ndarray:
    """``MobiDFL / ns-3 - 1`` per contact, the denominator at least ``floor`` bytes (a
    contact ns-3 gives nothing counts MobiDFL's bytes against one message, not against 0)."""
    mobidfl, ns3 = np.asarray(mobidfl, float), np.asarray(ns3, float)
    return (mobidfl - ns3) / np.maximum(ns3, floor)


def summary(err: np.ndarray) -> dict[str, float]:
    """Median and p90 of the error, p90 of its magnitude, share of contacts within +-10 %."""
    err = np.asarray(err, float)
    return {
        "median": float(np.median(err)), "p10": float(np.percentile(err, 10)),
        "p90": float(np.percentile(err, 90)),
        "abs_p90": float(np.percentile(np.abs(err), 90)),
        "within_10pc": float(np.mean(np.abs(err) <= WITHIN + 1e-12)),
    }


def measure(*, size: str, seeds: int) -> dict[str, Any]:
    """Sample the contacts, replay each in ns-3 twice, and collect both sides' bytes."""
    from mobidfl.model.config import Config
    from validation.ns3_calibrate import cross_validated, window_limited

    if size not in SIZES:
        raise ConfigError("--size", size, "small or full")
    try:
        started = time.perf_counter()
        from ns import ns  # noqa: F401 - seconds to import: timed apart
    except ImportError:
        raise ConfigError("ns3", "not installed", "pip install 'mobidfl[ns3]'") from None
    import_s = time.perf_counter() - started
    sizes = SIZES[size]
    radius = Config.from_settings({"preset": PRESET}).radius_m
    per_seed = [sizes.contacts // seeds + (k < sizes.contacts % seeds) for k in range(seeds)]
    started = time.perf_counter()
    contacts = [c for k, n in enumerate(per_seed) if n
                for c in sample_contacts(n=n, seed=k, max_s=sizes.max_s)]
    mobidfl_s = time.perf_counter() - started
    started = time.perf_counter()
    for k, c in enumerate(contacts):
        if k and not k % 25:
            print(f"ns3_link: {k} of {len(contacts)} stays replayed, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        c["ns3_udp"] = ns3_replay(c, mode="udp", radius_m=radius)
        c["ns3_tcp"] = ns3_replay(c, mode="tcp", radius_m=radius)
        c["ns3_whole"] = [whole_bytes(r, need=c["need"]) for r in c["ns3_tcp"]]
    ns3_s = time.perf_counter() - started
    cap_ns3 = np.array([sum(c["ns3_udp"]) for c in contacts])
    cap_ours = np.array([c["capacity"] for c in contacts])
    pol_ns3 = np.array([sum(c["ns3_whole"]) for c in contacts])
    pol_ours = np.array([sum(c["policy"]) for c in contacts])
    msg = float(message_size())
    fit = cross_validated(contacts)
    limited = window_limited(contacts)
    try:  # each half needs two window-limited stays to fit the TCP goodput
        tcp = cross_validated(contacts, key="ns3_tcp", fit_on=limited)
    except ValueError:
        tcp = None
    if tcp is not None:
        pol_fitted = np.array([policy_whole(cap, need=c["need"])
                               for cap, c in zip(tcp["predicted"], contacts, strict=True)])
    return {
        "size": size, "seeds": seeds, "radius_m": radius, "profile": PROFILE,
        "message_bytes": int(msg), "messages_per_side": 1 + CACHE,
        "import_s": import_s, "mobidfl_s": mobidfl_s, "ns3_s": ns3_s,
        "replayed_s": float(sum(c["t_end"] - c["t_start"] for c in contacts)),
        "duration": summary([c["t_end"] - c["t_start"] for c in contacts]),
        "capacity": summary(relative_errors(cap_ours, cap_ns3, floor=msg)),
        "capacity_calibrated": summary(fit["errors"]),
        "fit": {k: v for k, v in fit.items() if k not in ("errors", "predicted")},
        "fit_tcp": None if tcp is None else
        {k: v for k, v in tcp.items() if k not in ("errors", "predicted")},
        "window_limited": int(limited.sum()),
        "policy_fitted": None if tcp is None else
        summary(relative_errors(pol_fitted, pol_ns3, floor=msg)),
        "policy": summary(relative_errors(pol_ours, pol_ns3, floor=msg)),
        "policy_all_delivered": {
            "ns3": float(np.mean(pol_ns3 >= 2 * (1 + CACHE) * msg)),
            "mobidfl": float(np.mean(pol_ours >= 2 * (1 + CACHE) * msg)),
        },
        "totals_mb": {"capacity_ns3": float(cap_ns3.sum() / 1e6),
                      "capacity_mobidfl": float(cap_ours.sum() / 1e6),
                      "policy_ns3": float(pol_ns3.sum() / 1e6),
                      "policy_mobidfl": float(pol_ours.sum() / 1e6)},
        "contacts": [{k: v for k, v in c.items() if k not in ("pos_a", "pos_b")}
                     for c in contacts],
    }


def _pc(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _dist(s: dict[str, float]) -> str:
    return (f"median {_pc(s['median'])}, p10 {_pc(s['p10'])}, p90 {_pc(s['p90'])}, "
            f"{100 * s['within_10pc']:.0f} % within ±10 %")


def _agrees(s: dict[str, float]) -> bool:
    return abs(s["median"]) <= WITHIN and s["within_10pc"] >= 0.8


def default_efficiency() -> float:
    """``link.efficiency``'s default (fitted from this case: 0.59)."""
    from mobidfl.model.config import Config
    from mobidfl.model.links import make_link

    return float(make_link(Config.from_settings({"link.model": "fixed_rate"})).options.efficiency)


TOLERANCE = "median within ±10 % and ≥ 80 % of contacts within ±10 %"


def rows_from(m: dict[str, Any]) -> list[Row]:
    """The verdict table of :func:`measure`'s numbers."""
    n = len(m["contacts"])
    cap, cal, pol = m["capacity"], m["capacity_calibrated"], m["policy"]
    fit, tcp = m["fit"], m["fit_tcp"]
    t = m["totals_mb"]
    rows = [
        Row(CASE, f"capacity per contact ({n} stays, saturating UDP both ways)",
            f"ns-3: {t['capacity_ns3']:.1f} MB in all", f"distance_rate dsrc (efficiency "
            f"{default_efficiency()}): {t['capacity_mobidfl']:.1f} MB; error {_dist(cap)}",
            TOLERANCE, "agree" if _agrees(cap) else "differs",
            "the default efficiency is this case's fit (before it: 0.84, measured with one car "
            "sending at 6 Mbit/s; two cars sending at once at 802.11p's 27 Mbit/s lose more to "
            f"per-frame overhead and collisions); fit here: efficiency {fit['efficiency']:.3f}, "
            f"set-up {fit['setup_s']:.3f} s (python -m validation.ns3_calibrate)"),
        Row(CASE, "capacity per contact, efficiency and set-up fitted (2-fold cross-validated)",
            "ns-3", f"error {_dist(cal)}", TOLERANCE, "agree" if _agrees(cal) else "differs",
            f"fitted on half the stays, tested on the other half; on all: efficiency "
            f"{fit['efficiency']:.3f}, set-up {fit['setup_s']:.3f} s"),
        Row(CASE, f"policy bytes per contact (own model + {CACHE} cached, whole messages, "
            "TCP both ways)",
            f"ns-3: {t['policy_ns3']:.1f} MB; all delivered in "
            f"{100 * m['policy_all_delivered']['ns3']:.0f} %",
            f"LinkPlan.send: {t['policy_mobidfl']:.1f} MB; all in "
            f"{100 * m['policy_all_delivered']['mobidfl']:.0f} %; error {_dist(pol)}",
            TOLERANCE, "agree" if _agrees(pol) else "differs",
            "TCP's goodput is below the MAC's capacity (its ACKs share the channel, slow "
            "start); a stay ns-3 gives nothing is measured against one message"),
    ]
    if tcp is not None:
        pf = m["policy_fitted"]
        rows.append(Row(
            CASE, "policy bytes per contact, efficiency and set-up fitted to TCP (2-fold)",
            "ns-3", f"error {_dist(pf)}", TOLERANCE, "agree" if _agrees(pf) else "differs",
            f"fitted on one half's window-limited stays ({tcp['stays']} in all), tested on the "
            f"other half; on all: efficiency {tcp['efficiency']:.3f}, set-up "
            f"{tcp['setup_s']:.3f} s"))
    return rows


def markdown(m: dict[str, Any]) -> str:
    """Per-contact table: duration, closest distance, both sides' bytes."""
    lines = ["| seed | step | a | b | stay (s) | d_min (m) | capacity ns-3 (kB) | MobiDFL (kB) "
             "| policy ns-3 (kB) | MobiDFL (kB) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c in m["contacts"]:
        lines.append(
            f"| {c['seed']} | {c['step']} | {c['a']} | {c['b']} | "
            f"{c['t_end'] - c['t_start']:.2f} | {c['d_min']:.0f} | {sum(c['ns3_udp']) / 1e3:.0f} "
            f"| {c['capacity'] / 1e3:.0f} | {sum(c['ns3_whole']) / 1e3:.0f} | "
            f"{sum(c['policy']) / 1e3:.0f} |")
    return "\n".join(lines)


def have_ns3() -> bool:
    """Whether the optional extra is installed (``pip install 'mobidfl[ns3]'``)."""
    import importlib.util

    return importlib.util.find_spec("ns") is not None


def run(*, size: str, seeds: int, out: Path) -> list[Row]:
    """The ns-3 case of ``python -m validation``; numbers also in ``out/ns3_link.json``.

    Without the ``ns3`` package: one row, verdict ``skipped``, saying how to install it.
    """
    if not have_ns3():
        return [Row(CASE, "bytes per contact", REFERENCE, "not run", TOLERANCE, "skipped",
                    "ns-3 is not installed: pip install 'mobidfl[ns3]'")]
    m = measure(size=size, seeds=seeds)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "ns3_link.json", json.dumps(m, indent=1))
    write_text_atomic(out / "contacts.md", markdown(m) + "\n")
    return rows_from(m)
