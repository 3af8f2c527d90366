"""The ``mobidfl`` command line: headless runs, settings, (sweeps and reports later)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from model.config import Config, settings_table
from model.errors import ConfigError


def build_config(args: argparse.Namespace) -> Config:
    base = Config.from_toml(args.config) if args.config else Config()
    return base.with_overrides(args.set or [])


def cmd_run(args: argparse.Namespace) -> int:
    import torch
    from tqdm import tqdm

    from analysis.gis import write_gis
    from analysis.plots import save_summary
    from model.world import MobiDFLModel

    torch.set_num_threads(1)
    config = build_config(args)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise ConfigError("--out", str(out), "an empty or new folder (or pass --force)")
    started = time.perf_counter()
    model = MobiDFLModel(config=config)
    with tqdm(total=config.steps, desc="steps", unit="step", disable=args.quiet) as bar:
        def progress(step: int) -> None:
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
        write_gis(model, staging, geojson=args.geojson)
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


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mobidfl", description="Mobility-aware decentralized federated learning simulator"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one simulation headless")
    run.add_argument("--out", required=True, help="output folder")
    run.add_argument("--config", help="TOML file with settings")
    run.add_argument("--set", action="append", metavar="NAME=VALUE", help="override a setting")
    run.add_argument("--geojson", action="store_true", help="also write GeoJSON layers")
    run.add_argument("--force", action="store_true", help="write into a non-empty --out")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.set_defaults(func=cmd_run)
    settings = sub.add_parser("settings", help="list every setting with its default")
    settings.add_argument("--markdown", action="store_true")
    settings.set_defaults(func=cmd_settings)
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
