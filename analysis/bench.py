"""``mobidfl bench``: every exchange policy on the same standard worlds, one leaderboard.

The worlds are the scenarios of :mod:`mobidfl.analysis.bench_scenarios` (``analysis/scenarios``),
each at the ideal link and at the calibrated 802.11p link (and, for DAM/DCM's world, at
each of the UAVs' mobility strategies). Every registered policy (entry-point plug-ins
included) runs on every column where :class:`mobidfl.model.config.Config` accepts it; a refused
pair keeps its one-line reason. Each cell runs over the same seeds, so the runs of two
policies with one seed share mobility, data split and initial models.

Runs go through the sweep machinery (:mod:`mobidfl.analysis.sweep`): one sweep folder per cell
under ``OUT/cells/`` (``manifest.csv`` and one Parquet file per finished run), executed by
its process pool, Ray, or ``--batch-runs``. Finished runs are kept, so the same command
after a kill (or a full disk: one line saying so and that command) goes on where it
stopped. ``--out`` is new or empty or this same bench's folder (another bench's, a run's or
a sweep's is refused); before a resume or a report the folder is checked whole
(``manifest.json``, each cell's ``manifest.csv``, every finished run's file): a resume runs
a damaged run again and rewrites a damaged manifest, a report refuses it in one line. The
report (:func:`write_report`) then writes
``leaderboard.md`` / ``leaderboard.csv``, ``heatmap.png`` (score per policy and column),
``accuracy_<world>.png`` (mean accuracy over simulated time per policy) and
``manifest.json`` (settings, versions, machine) so that two machines' tables can be
compared. Statistics: :mod:`mobidfl.analysis.bench_stats`.

This module is the bench's front: it names what the bench offers, each in the module that
does that one job: the runner under every run (:mod:`mobidfl.analysis.runner`), running a
bench (:mod:`mobidfl.analysis.bench_run`), its plan and folder checks
(:mod:`mobidfl.analysis.bench_plan`), its results and leaderboard
(:mod:`mobidfl.analysis.bench_results`), its page and figures
(:mod:`mobidfl.analysis.bench_page`, :mod:`mobidfl.analysis.bench_figures`), its worlds'
descriptors (:mod:`mobidfl.analysis.bench_describe`) and its command line
(:mod:`mobidfl.analysis.bench_cli`).
"""

from __future__ import annotations

from mobidfl.analysis.bench_cli import (
    TUNE_RUNS_HERE,
    add_bench_parser,
    bench_command,
    check_option_pairs,
    cmd_bench,
    comma_list,
)
from mobidfl.analysis.bench_describe import DESCRIPTORS, describe_table, write_descriptors
from mobidfl.analysis.bench_figures import accuracy_plots, comm_plots, heatmap, tight
from mobidfl.analysis.bench_page import METRICS, markdown, write_report
from mobidfl.analysis.bench_plan import PLAN, check_bench_folder, read_plan
from mobidfl.analysis.bench_results import (
    HIGH,
    LOW,
    TARGET_SHARE,
    leaderboard,
    load_results,
    planned_records,
)
from mobidfl.analysis.bench_run import (
    check_flags,
    declared_policies,
    pilot_columns,
    run_bench,
    run_plan,
)
from mobidfl.analysis.runner import (
    CELLS,
    RUN_SETTINGS,
    BenchDamaged,
    open_cells,
    plan_runs,
    quiet_worlds,
)

__all__ = [
    "CELLS", "DESCRIPTORS", "HIGH", "LOW", "METRICS", "PLAN", "RUN_SETTINGS", "TARGET_SHARE",
    "TUNE_RUNS_HERE", "BenchDamaged", "accuracy_plots", "add_bench_parser", "bench_command",
    "check_bench_folder", "check_flags", "check_option_pairs", "cmd_bench", "comm_plots",
    "comma_list", "declared_policies", "describe_table", "heatmap", "leaderboard",
    "load_results", "markdown", "open_cells", "pilot_columns", "plan_runs", "planned_records",
    "quiet_worlds", "read_plan", "run_bench", "run_plan", "tight", "write_descriptors",
    "write_report",
]
