"""What a link model costs per step: the 100-car Cached-DFL round, ideal vs a link (issue 26).

The round is the ``cached_dfl_003`` preset (100 cars on the Manhattan grid, the Cached-DFL
CNN, K = 10 local steps of batch 64, LRU cache 10, tau_max 5, every car evaluated). The same
seed is run with ``link = ideal`` and with a link model (default ``distance_rate``, the
802.11p profile), steps alternating between the two models so that machine load hits both
alike (one worker each by default, so neither run's process pool competes with the
other's); the link's own parts (contact intervals, the plan, the transfers) are timed
inside the linked run: on a loaded machine their share of a linked step is the steadier
number. Goal (issue 26): at most 10 % over ideal.

Run: ``python benchmarks/link_cost.py`` (``--steps 4 --test-size 2000 --link distance_rate``;
``--set link.fixed_rate.rate_bps=1e6`` and other settings pass through).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from mobidfl.model import links, world
from mobidfl.model.world import MobiDFLModel

TIMED: dict[str, float] = defaultdict(float)


def _timed(owner: object, name: str, label: str) -> None:
    """Wrap ``owner.name`` so its wall time adds up under ``label``."""
    inner = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            TIMED[label] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--test-size", type=int, default=2000)
    parser.add_argument("--link", default="distance_rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="loop-backend workers (both)")
    parser.add_argument("--set", action="append", default=[], help="name=value for the link run")
    args = parser.parse_args()
    base = {"preset": "cached_dfl_003", "test_size": args.test_size, "seed": args.seed,
            "steps": args.steps, "early_stop_patience": 0, "workers": args.workers}
    extra = {}
    for text in args.set:
        name, _, value = text.partition("=")
        extra[name] = float(value) if value.replace(".", "").replace("e", "").isdigit() else value
    _timed(world, "contact_intervals", "contact intervals")
    _timed(links.RateLink, "plan", "link plan")
    _timed(links.LinkPlan, "send", "transfers (send)")
    _timed(links.LinkPlan, "swap_models", "transfers (swap)")
    ideal = MobiDFLModel(**base)
    linked = MobiDFLModel(**base, **{"link.model": args.link, **extra})
    times: dict[str, list[float]] = {"ideal": [], args.link: []}
    for _ in range(args.steps):
        for label, model in (("ideal", ideal), (args.link, linked)):
            start = time.perf_counter()
            model.step()
            times[label].append(time.perf_counter() - start)
    table = linked.model_table().iloc[1:]
    a, b = np.array(times["ideal"]), np.array(times[args.link])
    print(f"100-car Cached-DFL round ({ideal.config.dataset}, {args.test_size} test images), "
          f"{args.steps} steps each, alternating")
    print(f"  ideal          : {a.mean():7.3f} s/step (min {a.min():.3f})")
    print(f"  {args.link:15s}: {b.mean():7.3f} s/step (min {b.min():.3f})")
    print(f"  overhead       : {100 * (b.mean() / a.mean() - 1):+.1f} % (mean), "
          f"{100 * (b.min() / a.min() - 1):+.1f} % (min)")
    own = sum(TIMED.values()) / args.steps
    for label, seconds in TIMED.items():
        print(f"  {label:20s}: {seconds / args.steps * 1e3:8.1f} ms/step")
    print(f"  link's own parts    : {own * 1e3:8.1f} ms/step = {100 * own / b.mean():.2f} % of a "
          f"linked step")
    print(f"  contacts/step {table['contacts'].mean():.0f}, contact rows/step "
          f"{len(linked.contacts_table()) / args.steps:.0f}, MB received/step "
          f"{table['bytes_received'].mean() / 1e6:.1f}, aborted/step "
          f"{table['transfers_aborted'].mean():.0f}")
    print(f"  acc_mean ideal {ideal.model_table()['acc_mean'].iloc[-1]:.4f}, "
          f"{args.link} {table['acc_mean'].iloc[-1]:.4f}")


if __name__ == "__main__":
    main()
