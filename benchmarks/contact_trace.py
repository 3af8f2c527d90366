"""What reading and replaying a published-size contact trace costs (issue 26, item 6).

Writes a synthetic CRAWDAD-style table (``a b t_start t_end c n``, ids from 1, the Haggle
iMote layout) of about the size of a conference trace: ``--contacts`` stays among
``--devices`` devices over ``--days`` days, overlapping stays of a pair dropped; then times
:func:`mobidfl.maps.contact_trace.read_contacts` (parse and whole-file checks), the step index of
:class:`mobidfl.maps.contact_trace.ContactTrace`, and per step the contact table, adjacency and
encounter order the world takes from it.

Run: ``python benchmarks/contact_trace.py`` (``--contacts 200000 --devices 98 --days 4
--step-s 120``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mobidfl.maps.contact_trace import ContactTrace, read_contacts


def synthetic_trace(path: Path, *, contacts: int, devices: int, days: float, seed: int) -> int:
    """Write the table; returns the rows kept (a stay overlapping an earlier one of its pair
    is dropped)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, devices + 1, contacts)
    b = (a + rng.integers(1, devices, contacts) - 1) % devices + 1
    start = np.round(rng.uniform(0, days * 86400, contacts))
    end = start + np.round(rng.exponential(300, contacts))
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((start, hi, lo))
    lo, hi, start, end = lo[order], hi[order], start[order], end[order]
    pair = np.cumsum(np.concatenate([[True], (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])]))
    big = float(end.max()) + 1.0  # offsets make one running max restart at every pair
    latest = np.maximum.accumulate(end + pair * big) - pair * big
    previous = np.concatenate([[-1.0], latest[:-1]])
    first = np.concatenate([[True], pair[1:] != pair[:-1]])
    keep = first | (start >= previous)  # after every earlier stay of its pair ended
    table = np.stack([lo, hi, start, end, np.ones(len(lo)), np.zeros(len(lo))], axis=1)[keep]
    np.savetxt(path, table, fmt="%d")
    return int(keep.sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contacts", type=int, default=200_000)
    parser.add_argument("--devices", type=int, default=98)
    parser.add_argument("--days", type=float, default=4.0)
    parser.add_argument("--step-s", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "contacts.dat"
        rows = synthetic_trace(path, contacts=args.contacts, devices=args.devices,
                               days=args.days, seed=args.seed)
        started = time.perf_counter()
        contacts = read_contacts(path)
        read_s = time.perf_counter() - started
    started = time.perf_counter()
    trace = ContactTrace(contacts, step_s=args.step_s, n_agents=args.devices, id_base=1)
    index_s = time.perf_counter() - started
    steps = int(trace.step.max())
    started = time.perf_counter()
    for step in range(1, steps + 1):
        table = trace.table(step)
        trace.adjacency(table)
        trace.encounters(table)
    per_step_ms = (time.perf_counter() - started) / steps * 1e3
    print(f"{rows:,} contacts among {args.devices} devices over {args.days:g} days, "
          f"step_s {args.step_s:g}: {len(trace.step):,} step rows over {steps:,} steps")
    print(f"read and check {read_s:.2f} s, index {index_s:.2f} s, "
          f"{per_step_ms:.3f} ms per step (table, adjacency, encounter order)")


if __name__ == "__main__":
    main()
