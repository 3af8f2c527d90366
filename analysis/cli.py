"""The ``mobidfl`` command line: headless runs (with checkpoints), settings, sweeps, reports.

* ``mobidfl run --out DIR [--checkpoint-every N]``: one run; with checkpoints the full model
  state is written atomically to ``DIR/checkpoint/state.pt`` every N steps (and at the end),
  beside the resolved ``DIR/checkpoint/config.toml``.
* ``mobidfl run --resume DIR``: continue a killed run from its last checkpoint; the outputs
  equal those of an uninterrupted run with the same seed (tests/test_resume_cli.py).
* ``mobidfl sweep SWEEP.toml --out DIR``: see :mod:`analysis.sweep`.
* ``mobidfl report DIR``: figures and tables of a run or a sweep, see :mod:`analysis.report`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from model.atomic import write_text_atomic as _write_text
from model.config import Config, settings_table
from model.errors import ConfigError

CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_STATE = "state.pt"
CHECKPOINT_OPTIONS = "run.json"


def build_config(args: argparse.Namespace) -> Config:
    """Preset < TOML config < ``--set``: explicit values override the preset's."""
    base = Config.from_toml(args.config) if args.config else Config()
    if getattr(args, "preset", None):
        base = base.updated(preset=args.preset)
    return base.with_overrides(args.set or [])


def cmd_run(args: argparse.Namespace) -> int:
    import torch

    torch.set_num_threads(1)
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise ConfigError("--checkpoint-every", args.checkpoint_every, "an integer >= 1")
    if args.resume:
        return _resume_run(args)
    if not args.out:
        raise ConfigError("--out", None, "an output folder (required unless --resume)")
    config = build_config(args)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise ConfigError("--out", str(out), "an empty or new folder (or pass --force)")
    started = time.perf_counter()
    from model.world import MobiDFLModel

    model = MobiDFLModel(config=config)
    if args.checkpoint_every:
        folder = out / CHECKPOINT_DIR
        folder.mkdir(parents=True, exist_ok=True)
        _write_text(folder / "config.toml", config.to_toml())
        options = {"checkpoint_every": args.checkpoint_every, "geojson": bool(args.geojson)}
        _write_text(folder / CHECKPOINT_OPTIONS, json.dumps(options) + "\n")
    return _run_to_end(
        model,
        out,
        geojson=args.geojson,
        quiet=args.quiet,
        checkpoint_every=args.checkpoint_every,
        started=started,
    )


def _resume_run(args: argparse.Namespace) -> int:
    """Continue ``DIR`` from ``DIR/checkpoint``: same config, same options, same outputs."""
    from model.checkpoint import load
    from model.world import MobiDFLModel

    out = Path(args.resume)
    folder = out / CHECKPOINT_DIR
    if not (folder / CHECKPOINT_STATE).is_file() or not (folder / "config.toml").is_file():
        raise ConfigError(
            "--resume", str(out), "a run folder with checkpoint/ (written by --checkpoint-every)"
        )
    if args.set or args.config:
        raise ConfigError(
            "--resume", str(out), "no --set/--config: the run continues with checkpoint/config.toml"
        )
    if args.out and Path(args.out).resolve() != out.resolve():
        raise ConfigError("--out", args.out, f"the resumed folder {out} (or no --out)")
    started = time.perf_counter()
    config = Config.from_toml(folder / "config.toml")
    options_path = folder / CHECKPOINT_OPTIONS
    options = json.loads(options_path.read_text()) if options_path.exists() else {}
    every = args.checkpoint_every or options.get("checkpoint_every")
    model = MobiDFLModel(config=config)
    model.load_state_dict(load(folder / CHECKPOINT_STATE))
    if not args.quiet:
        print(f"resuming {out} at step {model.steps} of {config.steps}", file=sys.stderr)
    return _run_to_end(
        model,
        out,
        geojson=bool(args.geojson or options.get("geojson", False)),
        quiet=args.quiet,
        checkpoint_every=every,
        started=started,
    )


def _run_to_end(
    model: Any,
    out: Path,
    *,
    geojson: bool,
    quiet: bool,
    checkpoint_every: int | None,
    started: float,
) -> int:
    """Step ``model`` to ``config.steps`` (checkpointing), then write every output at once."""
    from tqdm import tqdm

    from analysis.gis import write_gis
    from analysis.plots import save_summary
    from model.checkpoint import save_atomic

    config = model.config
    with tqdm(
        total=config.steps, initial=model.steps, desc="steps", unit="step", disable=quiet
    ) as bar:

        def progress(step: int) -> None:
            if checkpoint_every and (step % checkpoint_every == 0 or step == config.steps):
                save_atomic(model.state_dict(), out / CHECKPOINT_DIR / CHECKPOINT_STATE)
            acc = model.datacollector.model_vars.get("acc_mean", [float("nan")])[-1]
            bar.set_postfix(acc=f"{acc:.3f}", contacts=int(model.adjacency.nnz // 2))
            bar.update(1)

        model.run(progress=progress)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".mobidfl-", dir=out.parent))
    try:
        (staging / "config.toml").write_text(config.to_toml())
        table = model.model_table()
        table.to_csv(staging / "model.csv", index=False)
        model.agent_table().to_parquet(staging / "agents.parquet", index=False)
        save_summary(table, staging / "summary.png", title=f"MobiDFL: {config.map}")
        write_gis(model, staging, geojson=geojson)
        out.mkdir(parents=True, exist_ok=True)
        for item in staging.iterdir():
            os.replace(item, out / item.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.perf_counter() - started
    last = table.iloc[-1]
    summary = f"wrote {out} in {elapsed:.1f} s: {config.steps} steps, {model.n_agents} agents"
    if "acc_mean" in table:
        summary += f", final acc_mean {last['acc_mean']:.4f}"
    print(summary)
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    rows = settings_table()
    if args.markdown:
        print("| setting | default | meaning |\n|---|---|---|")
        for name, default, help_text in rows:
            print(f"| `{name}` | `{default}` | {help_text.replace('|', '/')} |")
    else:
        width = max(len(r[0]) for r in rows)
        for name, default, help_text in rows:
            print(f"{name:<{width}}  {default:<22} {help_text}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from analysis.sweep import SWEEP_FILE, Sweep, run_sweep

    out = Path(args.out)
    if args.address and args.backend != "ray":
        raise ConfigError("--address", args.address, "only with --backend ray")
    source = args.sweep
    if source is None:
        if not args.resume:
            raise ConfigError("SWEEP", None, "a sweep TOML file (optional only with --resume)")
        source = out / SWEEP_FILE
    sweep = Sweep.from_toml(source)  # every setting checked before any run starts
    started = time.perf_counter()
    manifest = run_sweep(
        sweep,
        out,
        backend=args.backend,
        processes=args.processes,
        address=args.address,
        cpus_per_run=args.cpus_per_run,
        gpus_per_run=args.gpus_per_run,
        resume=args.resume,
        retry_errors=args.retry_errors,
        progress=not args.quiet,
    )
    counts = manifest["status"].value_counts().to_dict()
    elapsed = time.perf_counter() - started
    parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "error", "lost", "pending"))
    print(f"wrote {out} in {elapsed:.1f} s: {len(manifest)} runs ({parts})")
    return 0 if counts.get("ok", 0) == len(manifest) else 1


def cmd_presets(args: argparse.Namespace) -> int:
    from model.presets import load_preset, preset_names

    names = preset_names()
    width = max(len(n) for n in names)
    for name in names:
        preset = load_preset(name)
        print(f"{name:<{width}}  seed {preset.paper}: {preset.description}")
        if args.verbose and preset.substitutes:
            print(f"{'':<{width}}  offline: {preset.substitutes}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    import torch

    from analysis.reproduce import paper_spec, reproduce, verdict_rows

    torch.set_num_threads(1)
    if args.seeds < 1:
        raise ConfigError("--seeds", args.seeds, "an integer >= 1")
    spec = paper_spec(args.paper)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    path = reproduce(
        spec.preset,
        out=out,
        scale=args.scale,
        seeds=seeds,
        processes=args.processes,
        progress=not args.quiet,
        on_progress=None if args.quiet else lambda m: print(m, file=sys.stderr),
    )
    import pandas as pd

    per_run = pd.read_csv(out / "per_run.csv")
    for row in verdict_rows(spec, per_run):
        print(f"{row['source']}: {row['claim']}: paper {row['paper']}, "
              f"MobiDFL {row['MobiDFL (mean ± std)']} -> {row['verdict']}"
              + (f" ({row['reason']})" if row["reason"] else ""))
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.report import make_report

    written = make_report(args.dir, out=args.out)
    for path in written:
        print(path)
    return 0


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mobidfl", description="Mobility-aware decentralized federated learning simulator"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one simulation headless")
    run.add_argument("--out", help="output folder (required unless --resume)")
    run.add_argument("--config", help="TOML file with settings")
    run.add_argument(
        "--preset", help="paper preset (`mobidfl presets`); --config/--set values override it"
    )
    run.add_argument("--set", action="append", metavar="NAME=VALUE", help="override a setting")
    run.add_argument("--geojson", action="store_true", help="also write GeoJSON layers")
    run.add_argument("--force", action="store_true", help="write into a non-empty --out")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="N",
        help="write the full state to OUT/checkpoint/ every N steps (atomic)",
    )
    run.add_argument(
        "--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint"
    )
    run.set_defaults(func=cmd_run)
    settings = sub.add_parser("settings", help="list every setting with its default")
    settings.add_argument("--markdown", action="store_true")
    settings.set_defaults(func=cmd_settings)
    sweep = sub.add_parser("sweep", help="run a grid of settings x seeds (mesa.batch_run)")
    sweep.add_argument(
        "sweep", nargs="?", help="sweep TOML file (default with --resume: OUT/sweep.toml)"
    )
    sweep.add_argument("--out", required=True, help="output folder")
    sweep.add_argument("--resume", action="store_true", help="skip runs already finished")
    sweep.add_argument(
        "--retry-errors", action="store_true", help="with --resume: also re-run runs that raised"
    )
    sweep.add_argument("--backend", default="local", help="local (processes) or ray")
    sweep.add_argument("--address", help="Ray cluster: auto or ray://HOST:PORT")
    sweep.add_argument(
        "--processes",
        type=int,
        help="local worker processes (default: free cores; 0 = this process)",
    )
    sweep.add_argument("--cpus-per-run", type=float, default=1.0, help="Ray CPUs per run")
    sweep.add_argument("--gpus-per-run", type=float, default=0.0, help="Ray GPUs per run")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(func=cmd_sweep)
    presets = sub.add_parser("presets", help="list the paper presets, one line each")
    presets.add_argument("--verbose", action="store_true", help="also the offline substitutes")
    presets.set_defaults(func=cmd_presets)
    repro = sub.add_parser(
        "reproduce", help="run a paper's preset over seeds: reproduction.md with verdicts"
    )
    repro.add_argument(
        "paper", help="mobility_000, dam_001, cached_dfl_003 or psfl_004 (or 000/001/003/004)"
    )
    repro.add_argument("--scale", default="small", choices=["small", "paper"])
    repro.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    repro.add_argument("--first-seed", type=int, default=0, help="first seed (default 0)")
    repro.add_argument("--out", required=True, help="output folder (resumable)")
    repro.add_argument("--processes", type=int, help="local worker processes (0 = this one)")
    repro.add_argument("--quiet", action="store_true")
    repro.set_defaults(func=cmd_reproduce)
    report = sub.add_parser("report", help="figures and tables of a run or a sweep folder")
    report.add_argument("dir", help="a `mobidfl run` or `mobidfl sweep` output folder")
    report.add_argument("--out", help="where to write (default: DIR/report)")
    report.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"mobidfl: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
