"""What every experiment script's ``main()`` shares: its flags, its CSV and its tables.

Each script in :mod:`analysis.experiments` takes ``--scale`` (default ``small``), ``--seeds``
(default 0 1 2) and ``--out`` (a CSV of the per-run rows), runs its ``run(scale=, seeds=)``
and prints titled tables. A script adds its own flags to the parser this module returns.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping

import pandas as pd

DEFAULT_SEEDS = [0, 1, 2]
"""Seeds a script runs when ``--seeds`` is not given."""


def experiment_parser(
    doc: str, scales: Iterable[str], *, out_help: str
) -> argparse.ArgumentParser:
    """``--scale``, ``--seeds`` and ``--out``; the description is the first line of ``doc``.

    ``scales`` are the choices of ``--scale`` in the order given (``small`` is the default).
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--scale", default="small", choices=list(scales))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS))
    parser.add_argument("--out", default=None, help=out_help)
    return parser


def run_and_save(run: Callable[[], pd.DataFrame], out: str | None) -> pd.DataFrame:
    """The rows of ``run()``, also written to the CSV ``out`` (without index) when given."""
    frame = run()
    if out:
        frame.to_csv(out, index=False)
    return frame


def print_tables(tables: Mapping[str, pd.DataFrame], *, index: bool = True) -> None:
    """Each table after a blank line and its title, as ``DataFrame.to_string`` writes it."""
    for title, table in tables.items():
        print(f"\n{title}\n{table.to_string(index=index)}")
