"""The ``mobidfl`` command line: headless runs (with checkpoints), settings, sweeps, reports.

* ``mobidfl run --out DIR [--checkpoint-every N]``: one run; with checkpoints the full model
  state is written atomically to ``DIR/checkpoint/state.pt`` every N steps (and at the end),
  beside the resolved ``DIR/checkpoint/config.toml``.
* ``mobidfl run --resume DIR``: continue a killed run from its last checkpoint; the outputs
  equal those of an uninterrupted run with the same seed (tests/analysis/test_resume_cli.py).
* ``mobidfl sweep SWEEP.toml --out DIR``: see :mod:`mobidfl.analysis.sweep`.
* ``mobidfl report DIR``: figures and tables of a run or a sweep, see
  :mod:`mobidfl.analysis.report`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, override

from mobidfl.analysis.folders import OutputFailed, check_output_folder, mib
from mobidfl.analysis.interrupts import CtrlC
from mobidfl.atomic import (
    publish,
    remove_temporaries,
    staging_dir,
    write_csv,
    write_parquet,
)
from mobidfl.atomic import write_text_atomic as _write_text
from mobidfl.errors import ConfigError
from mobidfl.model.config import Config, canonical_name, parse_assignments, settings_table
from mobidfl.model.contacts import one_connection_events

CHECKPOINT_DIR = "checkpoint"
CHECKPOINT_STATE = "state.pt"
CHECKPOINT_OPTIONS = "run.json"


RUN_OUTPUTS = ("config.toml", "model.csv", "agents.parquet", "summary.png", "trajectories.gpkg")
"""What ``mobidfl run`` writes (plus ``<layer>.geojson`` and ``checkpoint/``)."""


class Interrupted(Exception):
    """Ctrl-C during a command: the one line says what was saved and how to go on."""


class PluginFailed(Exception):
    """A third-party plug-in raised: one line naming it, what is kept (exit 1)."""


def _plugin_failed(exc: Exception, what: str) -> PluginFailed | None:
    """``PluginFailed`` when a registered third-party plug-in raised ``exc``, else ``None``."""
    from mobidfl.plugins import failing_plugin

    culprit = failing_plugin(exc)
    return None if culprit is None else PluginFailed(f"{culprit}; {what}")


def build_config(args: argparse.Namespace) -> Config:
    """Preset < TOML config < ``--set``: explicit values override the preset's."""
    base = Config.from_toml(args.config) if args.config else Config()
    overrides = parse_assignments(args.set or [])
    given = [(f"--preset {args.preset}", args.preset)] if getattr(args, "preset", None) else []
    if args.config and "preset" in base.explicit_settings():
        given.append((f"preset = {base.preset!r} in {args.config}", base.preset))
    given += [(f"--set {n}={v}", v) for n, v in overrides.items() if canonical_name(n) == "preset"]
    check_one_preset(given)
    if getattr(args, "preset", None):
        base = base.updated(preset=args.preset)
    return base.updated(overrides)


def check_one_preset(given: list[tuple[str, Any]]) -> None:
    """Refuse two different presets for one run (``--preset a --set preset=b``).

    WHY: a preset fills dozens of settings; silently running the second one (or mixing the
    two) gives numbers for a paper the user did not ask for.
    """
    names = {str(value) for _, value in given}
    if len(names) > 1:
        raise ConfigError(
            "preset", " and ".join(where for where, _ in given),
            "one preset per run (they name different ones; keep one)",
        )


def clear_run_outputs(out: Path) -> list[Path]:
    """``--force``: remove what a previous run wrote (its checkpoint too), nothing else."""
    from mobidfl.analysis.gis import LAYERS

    names = [*RUN_OUTPUTS, *(f"{layer}.geojson" for layer in LAYERS), CHECKPOINT_DIR]
    removed = remove_temporaries(out)
    for name in names:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed


def run_summary(config: Config) -> str:
    """The one line shown before step 1.

    What will run, which dataset stands in, every setting not at its default and where it came from
    (the preset, the user, a mobility model), and what is not the preset's.

    WHY: a preset fills dozens of settings and may swap in an offline dataset; a researcher
    should see that (and the settings they changed) before waiting hours for the numbers.
    Naming each changed setting's origin keeps a changed world from being silent (a policy
    never changes it: :meth:`mobidfl.model.config.Config.setting_origins`).
    """
    from mobidfl.model.config import COUNT_SETTING, KINDS, load_preset

    counts = ", ".join(
        f"{config.count(k)} {COUNT_SETTING[k]}" for k in KINDS if config.count(k)
    ) or "no agents"
    steps = f"{config.steps} step" + ("" if config.steps == 1 else "s")
    text = f"{counts} on {config.map}, {steps} of {config.step_s:g} s"
    if config.learning:
        text += f", {config.model} on {config.dataset}"
    if config.preset:
        preset = load_preset(config.preset)
        wanted = str(preset.settings.get("dataset", ""))
        first = wanted.removeprefix("auto:").split("|")[0].strip()
        if config.learning and wanted.startswith("auto:") and config.dataset != first:
            text += f" (in place of {first}: not found under data_root)"
        changed = [
            f"{name}={value}" for name, value in config.explicit_settings().items()
            if name != "preset" and preset.settings.get(name, object()) != value
        ]
        text = f"preset {config.preset} ({preset.description}): {text}"
    by_origin: dict[str, list[str]] = {}
    for name, origin in config.setting_origins().items():
        if name != "preset":
            by_origin.setdefault(origin, []).append(f"{name}={config.setting(name)}")
    if by_origin:
        text += "; not the defaults: " + "; ".join(
            f"{origin} [{', '.join(names)}]" for origin, names in by_origin.items()
        )
    if config.preset and changed:
        text += "; not the preset's: " + ", ".join(changed)
    return "mobidfl: " + text


def cmd_run(args: argparse.Namespace) -> int:
    """``mobidfl run``: one run headless, or ``--resume`` a killed one; returns the exit code."""
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise ConfigError("--checkpoint-every", args.checkpoint_every, "an integer >= 1")
    if args.resume:
        return _resume_run(args)
    if not args.out:
        raise ConfigError("--out", None, "an output folder (required unless --resume)")
    config = build_config(args)
    out = Path(args.out)
    if out.is_dir() and any(out.iterdir()) and not args.force:
        raise ConfigError("--out", str(out), "an empty or new folder (or pass --force)")
    check_output_folder(out)
    started = time.perf_counter()
    import torch

    from mobidfl.model.bounds import check_memory, estimate_output_bytes
    from mobidfl.model.world import MobiDFLModel

    torch.set_num_threads(1)
    # memory before disk: a world too big for memory is refused by what it is, the same on
    # every machine, not by how full this machine's disk happens to be
    check_memory(config)
    need = estimate_output_bytes(config, checkpoints=bool(args.checkpoint_every))
    check_output_folder(out, need_bytes=need)
    if not args.quiet and sys.stderr.isatty():  # a big world takes a while: say so
        print(f"building the world: map {config.map}, {config.n_agents} agents", file=sys.stderr)
    try:
        model = MobiDFLModel(config=config)  # datasets, maps and bounds are checked here
    except Exception as exc:
        failed = _plugin_failed(exc, "while building the world: nothing was written")
        if failed is None:
            raise
        raise failed from None
    if not args.quiet:  # after the checks: a refused run stays one line
        print(run_summary(config), file=sys.stderr)
    if args.force:
        clear_run_outputs(out)
    made = [p for p in (out, out / CHECKPOINT_DIR) if not p.exists()]
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
        made=made,
    )


def _resume_run(args: argparse.Namespace) -> int:
    """Continue ``DIR`` from ``DIR/checkpoint``: same config, same options, same outputs."""
    out = Path(args.resume)
    folder = out / CHECKPOINT_DIR
    written_by = "written by `mobidfl run --checkpoint-every`"
    if not out.is_dir():
        raise ConfigError("--resume", str(out), f"an existing run folder {written_by}")
    if not folder.is_dir():
        raise ConfigError("--resume", str(out), f"a run folder with checkpoint/ ({written_by})")
    if not (folder / "config.toml").is_file():
        raise ConfigError(
            "--resume", str(out), f"a run folder with checkpoint/config.toml ({written_by}; "
            "it is missing)"
        )
    if not (folder / CHECKPOINT_STATE).is_file():
        raise ConfigError(
            "--resume",
            str(out),
            f"a run with a saved state: {folder / CHECKPOINT_STATE} is missing (the run stopped "
            "before its first checkpoint; start it again with --force)",
        )
    if args.set or args.config:
        raise ConfigError(
            "--resume", str(out), "no --set/--config: the run continues with checkpoint/config.toml"
        )
    if args.out and Path(args.out).resolve() != out.resolve():
        raise ConfigError("--out", args.out, f"the resumed folder {out} (or no --out)")
    check_output_folder(out, option="--resume")
    started = time.perf_counter()
    config_path = folder / "config.toml"
    try:
        config = Config.from_toml(config_path, source="checkpoint config")
    except ConfigError as exc:
        if exc.setting == "checkpoint config":
            raise
        raise ConfigError(
            "checkpoint config", str(config_path), f"the config it was written with ({exc})"
        ) from None
    options_path = folder / CHECKPOINT_OPTIONS
    try:
        options = json.loads(options_path.read_text()) if options_path.exists() else {}
        if not isinstance(options, dict):
            raise ValueError(options)
    except (ValueError, UnicodeDecodeError):
        raise ConfigError(
            "checkpoint options", str(options_path), f"the JSON {written_by}"
        ) from None
    import torch

    from mobidfl.model.checkpoint import config_unchanged, load
    from mobidfl.model.world import MobiDFLModel
    from mobidfl.model.world_state import IncompatibleCheckpoint

    torch.set_num_threads(1)
    state_path = folder / CHECKPOINT_STATE
    state = load(state_path, required=("steps", "rng", "model_vars"))
    saved_sha = state.pop("config_sha256", None)
    if saved_sha is None:
        raise ConfigError(
            "checkpoint file", str(state_path),
            "a checkpoint that records its config's config_sha256 (without it an edited "
            "checkpoint/config.toml cannot be told apart; start a new run with --force)",
        )
    if not config_unchanged(saved_sha, config_path, config.to_toml()):  # text or settings
        raise ConfigError(
            "checkpoint config",
            str(config_path),
            "the config.toml the checkpoint was written with (it was changed after; restore it, "
            "or start a new run with --force)",
        )
    every = args.checkpoint_every or options.get("checkpoint_every")
    model = MobiDFLModel(config=config)
    try:
        model.load_state_dict(state)
    except IncompatibleCheckpoint as exc:  # before any step: the checkpoint stays as it is
        raise ConfigError(
            "checkpoint file", str(state_path),
            f"a checkpoint this MobiDFL can continue ({exc}; it is left as it was: finish "
            "the run with the version that wrote it, or start it again with --force)",
        ) from None
    except (KeyError, ValueError, TypeError, IndexError, RuntimeError) as exc:
        raise ConfigError(
            "checkpoint file",
            str(state_path),
            f"a state.pt that matches checkpoint/config.toml ({type(exc).__name__})",
        ) from None
    remove_temporaries(out)
    remove_temporaries(folder)
    if not args.quiet:
        print(f"resuming {out} at step {model.steps} of {config.steps}", file=sys.stderr)
    return _run_to_end(
        model,
        out,
        geojson=bool(args.geojson or options.get("geojson", False)),
        quiet=args.quiet,
        checkpoint_every=every,
        started=started,
        saved_at=model.steps,
    )


def _checkpoint_step(path: Path, recorded: int | None) -> int | None:
    """The step of the checkpoint at ``path`` (``recorded`` when it cannot be read)."""
    import torch

    try:
        return int(torch.load(path, weights_only=True, map_location="cpu")["steps"])
    except (OSError, KeyError, RuntimeError, ValueError, EOFError):
        return recorded


def _config_sha(config: Config) -> str:
    return hashlib.sha256(config.to_toml().encode()).hexdigest()


class _Saved:
    """What a stopped run has kept on disk, and the one line that says so.

    WHY: a Ctrl-C, a failed write and a failing plug-in each end a run with a line that
    names the checkpoint to resume from (or what was removed).
    """

    def __init__(
        self,
        out: Path,
        *,
        checkpoint_every: int | None,
        step: int | None,
        steps: int,
        made: list[Path] | None,
    ) -> None:
        self.out = out
        self.checkpoint_every = checkpoint_every
        self.step = step
        """The step of the latest checkpoint this run wrote (``None``: none yet)."""
        self.steps = steps
        self.made = made

    def kept(self) -> str:
        """What a stopped run kept: its checkpoint and how to resume, or nothing."""
        out, checkpoint_every = self.out, self.checkpoint_every
        if checkpoint_every:
            # What is on disk, not what was recorded: a Ctrl-C may land after the rename
            # that publishes a checkpoint but before `step` is updated.
            self.step = _checkpoint_step(out / CHECKPOINT_DIR / CHECKPOINT_STATE, self.step)
        if checkpoint_every and self.step is not None:
            return (
                f"the checkpoint at step {self.step} is saved in {out / CHECKPOINT_DIR}; "
                f"resume with: mobidfl run --resume {out}"
            )
        if checkpoint_every:
            return "no checkpoint was saved yet; start again with --force"
        return "nothing was saved (use --checkpoint-every N to make runs resumable)"

    def unwritten(self) -> str:
        """Clean up after a plug-in failed.

        Keep a whole checkpoint (resumable once it is fixed); remove what this run made before its
        first one (nothing half-written).
        """
        if self.checkpoint_every and _checkpoint_step(
            self.out / CHECKPOINT_DIR / CHECKPOINT_STATE, None
        ) is not None:
            return self.kept()
        for path in self.made or ():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
        return "nothing was written"

    def interrupted(self, where: str) -> Interrupted:
        """The error of a Ctrl-C ``where`` in the run."""
        return Interrupted(f"interrupted {where} of {self.steps}: {self.kept()}")

    def failed(self, what: str, exc: OSError) -> OutputFailed:
        """The error of a failed write of ``what``."""
        why = exc.strerror or str(exc)
        where = f", {exc.filename}" if exc.filename else ""
        return OutputFailed(f"could not write {what} ({why}{where}); {self.kept()}")


def _run_to_end(
    model: Any,
    out: Path,
    *,
    geojson: bool,
    quiet: bool,
    checkpoint_every: int | None,
    started: float,
    saved_at: int | None = None,
    made: list[Path] | None = None,
) -> int:
    """Step ``model`` to ``config.steps`` (checkpointing), then write every output at once.

    Outputs are staged in a hidden folder inside ``out`` (same filesystem, so the final
    renames work on any mounted volume) and renamed into place at the end.
    """
    config = model.config
    saved = _Saved(
        out, checkpoint_every=checkpoint_every, step=saved_at, steps=config.steps, made=made
    )
    _step_to_end(model, out, saved=saved, quiet=quiet)
    staging = staging_dir(out)
    try:
        table = _write_run_outputs(model, staging, geojson=geojson)
        publish(staging, out)
    except KeyboardInterrupt:
        raise saved.interrupted(f"while writing the outputs after step {model.steps}") from None
    except OSError as exc:
        raise saved.failed(f"the outputs to {out}", exc) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _print_run_summary(model, out, table, started=started)
    return 0


def _step_to_end(model: Any, out: Path, *, saved: _Saved, quiet: bool) -> None:
    """Run ``model`` to its last step with a progress bar, checkpointing as ``saved`` asks."""
    from tqdm import tqdm

    from mobidfl.model.checkpoint import save_atomic

    config = model.config
    sha = _config_sha(config)
    checkpoint_every = saved.checkpoint_every
    try:
        with CtrlC() as ctrl_c, tqdm(
            total=config.steps, initial=model.steps, desc="steps", unit="step", disable=quiet
        ) as bar:

            def save_checkpoint(step: int) -> None:
                state = model.state_dict()
                state["config_sha256"] = sha
                try:
                    save_atomic(state, out / CHECKPOINT_DIR / CHECKPOINT_STATE)
                except OSError as exc:
                    raise saved.failed(f"the checkpoint of step {step}", exc) from None
                saved.step = step

            def progress(step: int) -> None:
                ctrl_c.check()  # a Ctrl-C lost inside a finaliser still stops the run
                if checkpoint_every and (step % checkpoint_every == 0 or step == config.steps):
                    save_checkpoint(step)
                acc = model.datacollector.model_vars.get("acc_mean", [float("nan")])[-1]
                bar.set_postfix(acc=f"{acc:.3f}", contacts=int(model.adjacency.nnz // 2))
                bar.update(1)

            model.run(progress=progress)
            if checkpoint_every and saved.step != model.steps:
                save_checkpoint(model.steps)  # an early stop ends before config.steps
    except KeyboardInterrupt:
        raise saved.interrupted(f"at step {model.steps}") from None
    except Exception as exc:
        where = f"at step {model.steps} of {config.steps}: {saved.unwritten()}"
        failed = _plugin_failed(exc, where)
        if failed is None:
            raise
        raise failed from None


def _write_run_outputs(model: Any, staging: Path, *, geojson: bool) -> Any:
    """Write every output of a finished run into ``staging``; returns its model table."""
    from mobidfl.analysis.gis import write_gis
    from mobidfl.analysis.plots import save_summary

    config = model.config
    _write_text(staging / "config.toml", config.to_toml())
    table = model.model_table()
    write_csv(table, staging / "model.csv", index=False)
    write_parquet(model.agent_table(), staging / "agents.parquet", index=False)
    if model.contact_outputs:  # the contact table of every step (contacts_out)
        contacts = model.contacts_table()
        if "csv" in model.contact_outputs:
            write_csv(contacts, staging / "contacts.csv", index=False)
        if "parquet" in model.contact_outputs:
            write_parquet(contacts, staging / "contacts.parquet", index=False)
        if "one" in model.contact_outputs:
            write_csv(
                one_connection_events(contacts, step_s=config.step_s),
                staging / "contacts_one.txt", sep=" ", header=False, index=False,
                float_format="%.9f",
            )
    save_summary(table, staging / "summary.png", title=f"MobiDFL: {config.map}")
    write_gis(model, staging, geojson=geojson)
    for *_, mobility in model.groups:  # e.g. sumo's trace.csv (sumo_fcd)
        mobility.write_outputs(staging)
    return table


def _print_run_summary(model: Any, out: Path, table: Any, *, started: float) -> None:
    """The run's one-line summary and density line; warnings for a regime mobility cannot shape."""
    config = model.config
    elapsed = time.perf_counter() - started
    last = table.iloc[-1]
    summary = f"wrote {out} in {elapsed:.1f} s: {config.steps} steps, {model.n_agents} agents"
    if "acc_mean" in table:
        summary += f", final acc_mean {last['acc_mean']:.4f}"
    print(summary)
    print(model.density_summary()[0])
    regime = model.contact_regime()
    if regime in REGIME_WARNINGS:
        print(f"mobidfl: warning: {REGIME_WARNINGS[regime]}", file=sys.stderr)
    for kind, groups in model.static_groups().items():
        if groups > 1 and regime != "isolated":
            print(
                f"mobidfl: warning: the static {kind}s form {groups} groups out of range of "
                f"each other (radius_m = {config.radius_m:g}): no model crosses between "
                "groups, so e.g. PSFL federations cannot span them",
                file=sys.stderr,
            )


REGIME_WARNINGS = {
    "saturated": "saturated contact regime (every agent meets most of the fleet each step, "
    "so mobility hardly matters): use a larger map, fewer agents or a smaller radius_m",
    "isolated": "isolated contact regime (no agent came within radius_m of another at any "
    "step, so every agent trained alone and no exchange ran): use a smaller map, more "
    "agents or a larger radius_m",
}


_mib = mib


def settings_markdown() -> str:
    """The settings table as Markdown rows (``mobidfl settings --markdown``).

    The settings reference page, docs/reference/settings.md, holds the same table.
    """
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    rows += [
        f"| `{name}` | `{default}` | {help_text.replace('|', '/')} |"
        for name, default, help_text in settings_table()
    ]
    return "\n".join(rows) + "\n"


def cmd_settings(args: argparse.Namespace) -> int:
    """``mobidfl settings``: print every setting with its default and help (or Markdown)."""
    rows = settings_table()
    if args.markdown:
        print(settings_markdown(), end="")
    else:
        width = max(len(r[0]) for r in rows)
        for name, default, help_text in rows:
            print(f"{name:<{width}}  {default:<22} {help_text}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    """``mobidfl sweep``: run or resume a sweep file's runs; returns the exit code."""
    from mobidfl.analysis.executors import SweepStopped
    from mobidfl.analysis.sweep import SWEEP_FILE, Sweep, run_sweep

    out = Path(args.out)
    if args.address and args.backend != "ray":
        raise ConfigError("--address", args.address, "only with --backend ray")
    source = args.sweep
    if source is None:
        if not args.resume:
            raise ConfigError("SWEEP", None, "a sweep TOML file (optional only with --resume)")
        source = out / SWEEP_FILE
    sweep = Sweep.from_toml(source)  # every setting checked before any run starts
    from mobidfl.maps.sources import check_spec

    firsts = {}  # one run per (preset, map): a preset may name the map
    for run in sweep.runs():
        firsts.setdefault((str(run.settings.get("preset")), str(run.settings.get("map"))), run)
    for run in firsts.values():  # a missing map file: one line now, not an error per run
        check_spec(Config.from_settings(run.settings, seed=run.seed).map)
    check_output_folder(out)
    started = time.perf_counter()
    try:
        manifest = run_sweep(
            sweep,
            out,
            backend=args.backend,
            processes=args.processes,
            address=args.address,
            cpus_per_run=args.cpus_per_run,
            gpus_per_run=args.gpus_per_run,
            memory_per_run=args.memory_per_run,
            resume=args.resume,
            retry_errors=args.retry_errors,
            progress=not args.quiet,
            batch_runs=args.batch_runs,
        )
    except KeyboardInterrupt:
        raise Interrupted(_sweep_interrupted(out)) from None
    except SweepStopped as exc:  # a failed write, the Ray head gone, a second driver
        raise OutputFailed(str(exc)) from None
    counts = manifest["status"].value_counts().to_dict()
    elapsed = time.perf_counter() - started
    parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "error", "lost", "pending"))
    print(f"wrote {out} in {elapsed:.1f} s: {len(manifest)} runs ({parts})")
    return 0 if counts.get("ok", 0) == len(manifest) else 1


def _sweep_interrupted(out: Path) -> str:
    """What an interrupted sweep kept: finished runs are saved one by one."""
    from mobidfl.analysis.sweep import MANIFEST, read_manifest, run_path

    if not (out / MANIFEST).exists():
        return f"interrupted before the first run: nothing was saved in {out}"
    try:
        manifest = read_manifest(out)
        done = sum(run_path(out, run_id).exists() for run_id in manifest["run_id"])
        total = len(manifest)
    except Exception:  # the manifest is rewritten atomically; be safe in a signal path
        return f"interrupted: finished runs are saved in {out}; resume with: " \
            f"mobidfl sweep --resume --out {out}"
    return (
        f"interrupted: {done} of {total} runs are saved in {out}; resume with: "
        f"mobidfl sweep --resume --out {out}"
    )


def cmd_presets(args: argparse.Namespace) -> int:
    """``mobidfl presets``: list the paper presets; returns the exit code."""
    from mobidfl.model.config import load_preset, preset_names

    names = preset_names()
    width = max(len(n) for n in names)
    for name in names:
        preset = load_preset(name)
        print(f"{name:<{width}}  {preset.description}")
        if args.verbose and preset.substitutes:
            print(f"{'':<{width}}  offline: {preset.substitutes}")
    return 0


def reproduce_overrides(assignments: list[str], *, preset: str) -> dict[str, Any]:
    """``reproduce --set name=value`` as typed values, checked on the preset before any run."""
    extra = parse_assignments(assignments)
    check_no_seed(extra)
    check_one_preset([(f"the paper's preset {preset}", preset)] + [
        (f"--set {n}={v}", v) for n, v in extra.items() if canonical_name(n) == "preset"
    ])
    Config.from_settings({"preset": preset, **extra})  # one line naming a bad value, now
    return extra


def check_no_seed(extra: dict[str, Any]) -> None:
    """Refuse ``reproduce --set seed=N``, named as typed.

    The seeds are ``--first-seed`` and ``--seeds`` (the sweep underneath used to refuse it as
    ``base.seed``, after making ``--out``).
    """
    from mobidfl.analysis.reproduce import check_no_seed as check

    check(extra)


def check_reproduce_flags(args: argparse.Namespace) -> None:
    """``--seeds``/``--first-seed``/``--processes`` checked before any work or folder.

    WHY: ``--seeds 1000000000`` used to build the seed list first (a MemoryError and an
    empty output folder), ``--processes -1`` was found only when the first sweep started.
    """
    from mobidfl.analysis.sweep import MAX_RUNS
    from mobidfl.model.config import SEED_MAX

    if not 1 <= args.seeds <= MAX_RUNS:
        raise ConfigError("--seeds", args.seeds, f"an integer in [1, {MAX_RUNS}]")
    if not 0 <= args.first_seed <= SEED_MAX - (args.seeds - 1):
        raise ConfigError(
            "--first-seed", args.first_seed,
            f"an integer >= 0 with first seed + seeds - 1 <= {SEED_MAX} (seeds are int64)",
        )
    if args.processes is not None and args.processes < 0:
        raise ConfigError("--processes", args.processes, "an integer >= 0 (0 = in this process)")


def reproduce_command(args: argparse.Namespace) -> str:
    """The command line that resumes this reproduction (finished runs are skipped)."""
    import shlex

    parts = ["mobidfl", "reproduce", args.paper, "--out", args.out, "--scale", args.scale,
             "--seeds", str(args.seeds), "--first-seed", str(args.first_seed)]
    if args.processes is not None:
        parts += ["--processes", str(args.processes)]
    if args.device is not None:
        parts += ["--device", args.device]
    if args.batch_runs:
        parts.append("--batch-runs")
    if args.variants:
        parts += ["--variants", args.variants]
    for assignment in args.set or []:
        parts += ["--set", assignment]
    return " ".join(shlex.quote(p) for p in parts)


def _reproduce_interrupted(args: argparse.Namespace, out: Path, total: int) -> str:
    from mobidfl.analysis.sweep import RUNS

    saved = len(list(out.glob(f"{RUNS}/*/{RUNS}/*.parquet"))) if out.is_dir() else 0
    return (
        f"interrupted: {saved} of {total} runs are saved in {out}; resume with: "
        f"{reproduce_command(args)}"
    )


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``mobidfl reproduce``: run a paper's experiment with its preset; returns the exit code."""
    check_reproduce_flags(args)  # before torch, the presets and any folder
    import torch

    from mobidfl.analysis.reproduce import chosen_variants, paper_spec, reproduce
    from mobidfl.analysis.sweep import MAX_RUNS

    torch.set_num_threads(1)
    spec = paper_spec(args.paper)
    assignments = list(args.set or [])
    if args.device is not None:
        if any(a.partition("=")[0].strip() == "device" for a in assignments):
            raise ConfigError("--device", args.device, "not together with --set device=...")
        assignments.append(f"device={args.device}")
    extra = reproduce_overrides(assignments, preset=spec.preset)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants else None
    chosen = chosen_variants(spec, variants, scale=args.scale)  # an unknown name fails now
    if len(chosen) * args.seeds > MAX_RUNS:
        raise ConfigError(
            "--seeds", args.seeds,
            f"at most {MAX_RUNS // max(1, len(chosen))} seeds for {len(chosen)} variants "
            f"(at most {MAX_RUNS} runs)",
        )
    out = Path(args.out)
    check_output_folder(out)  # reproduce() makes it once every variant's settings are checked
    started = time.perf_counter()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    try:
        path = reproduce(
            spec.name,
            out=out,
            scale=args.scale,
            seeds=seeds,
            processes=args.processes,
            progress=not args.quiet,
            on_progress=None if args.quiet else lambda m: print(m, file=sys.stderr),
            extra=extra,
            variants=variants,
            readings=args.readings,
            batch_runs=args.batch_runs,
        )
    except KeyboardInterrupt:
        raise Interrupted(_reproduce_interrupted(args, out, len(chosen) * len(seeds))) from None
    import pandas as pd

    for row in pd.read_csv(out / "verdicts.csv", keep_default_na=False).to_dict("records"):
        print(f"{row['source']}: {row['claim']}: paper {row['paper']}, "
              f"MobiDFL {row['MobiDFL (mean ± std)']} -> {row['verdict']}"
              + (f" ({row['reason']})" if row["reason"] else ""))
    failed = out / "failed_runs.csv"
    if failed.exists():
        count = len(pd.read_csv(failed))
        print(f"mobidfl: warning: {count} run(s) failed and are not in the numbers: see "
              f"{failed}", file=sys.stderr)
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``mobidfl report``: write a folder's report and print each file written."""
    from mobidfl.analysis.report import make_report

    written = make_report(args.dir, out=args.out)
    for path in written:
        print(path)
    return 0


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line, exit 2, like every other refusal of the CLI.

    Subcommand parsers are of the same class (``add_subparsers`` uses the parent's).
    """

    @override
    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"mobidfl: error: {' '.join(message.split())} (see `{self.prog} --help`)",
              file=sys.stderr)
        sys.exit(2)


def make_parser() -> argparse.ArgumentParser:
    """The ``mobidfl`` argument parser, one subparser per command."""
    parser = OneLineParser(
        prog="mobidfl", description="Mobility-aware decentralized federated learning simulator"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_parser(sub)
    settings = sub.add_parser("settings", help="list every setting with its default")
    settings.add_argument("--markdown", action="store_true")
    settings.set_defaults(func=cmd_settings)
    _add_sweep_parser(sub)
    presets = sub.add_parser("presets", help="list the paper presets, one line each")
    presets.add_argument("--verbose", action="store_true", help="also the offline substitutes")
    presets.set_defaults(func=cmd_presets)
    _add_reproduce_parser(sub)
    report = sub.add_parser("report", help="figures and tables of a run or a sweep folder")
    report.add_argument("dir", help="a `mobidfl run` or `mobidfl sweep` output folder")
    report.add_argument("--out", help="where to write (default: DIR/report)")
    report.set_defaults(func=cmd_report)
    from mobidfl.analysis.bench import add_bench_parser

    add_bench_parser(sub)  # `mobidfl bench` (analysis/bench.py)
    sub.choices["bench"].set_defaults(func=_bench)  # --tune: analysis/tuning.py
    return parser


def _add_run_parser(sub: Any) -> None:
    """Register ``mobidfl run`` on the CLI's subparsers."""
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


def _add_sweep_parser(sub: Any) -> None:
    """Register ``mobidfl sweep`` on the CLI's subparsers."""
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
    sweep.add_argument("--memory-per-run", type=float, default=0.0,
                       help="Ray memory per run in bytes (0 = none reserved)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--batch-runs", action="store_true",
                       help="run all runs in this process, those sharing net, data and learning "
                       "settings as one program (one training/evaluation call over runs x "
                       "agents; each run's table as alone); --processes is then unused")
    sweep.set_defaults(func=cmd_sweep)


def _add_reproduce_parser(sub: Any) -> None:
    """Register ``mobidfl reproduce`` on the CLI's subparsers."""
    repro = sub.add_parser(
        "reproduce", help="run a paper's preset over seeds: reproduction.md with verdicts"
    )
    repro.add_argument(
        "paper", help="mobility_000, dam_001, mofel_002, cached_dfl_003 or psfl_004 (or "
        "000/001/002/003/004); cached_dfl_003_sumo (Cached-DFL under SUMO traffic) or "
        "cached_dfl_003_areas (its group-based caching, Fig. 6)"
    )
    repro.add_argument("--scale", default="small", choices=["ci", "small", "medium", "paper"],
                       help="small (CPU-sized), medium (where a paper defines one: closer to the "
                       "paper, see its scale note), paper (the preset as is) or ci (the tests' "
                       "size: directions in seconds, not a verdict)")
    repro.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    repro.add_argument("--first-seed", type=int, default=0, help="first seed (default 0)")
    repro.add_argument("--out", required=True, help="output folder (resumable)")
    repro.add_argument("--processes", type=int, help="local worker processes (0 = this one)")
    repro.add_argument("--variants", metavar="A,B", help="run only these variants (a claim "
                       "needing another is reported 'not run'); default: all of the scale")
    repro.add_argument("--set", action="append", metavar="NAME=VALUE",
                       help="a setting added to every variant, e.g. backend=batched, device=cuda "
                       "(listed in reproduction.md as not the paper's)")
    repro.add_argument("--readings", action="store_true",
                       help="also run the paper's other readings of ambiguous passages (e.g. "
                       "DAM/DCM momentum reset) as extra variants: a sensitivity table of "
                       "verdicts in reproduction.md (the preset's reading stays of record)")
    repro.add_argument("--device", choices=["cpu", "cuda"],
                       help="where the learning runs (same as --set device=...)")
    repro.add_argument("--batch-runs", action="store_true",
                       help="run every run of every variant in this process, those sharing net, "
                       "data and learning settings as one program (one training/evaluation "
                       "call over runs x agents; each run's model.csv as alone); --processes "
                       "is then unused")
    repro.add_argument("--quiet", action="store_true")
    repro.set_defaults(func=cmd_reproduce)


def _bench(args: argparse.Namespace) -> int:
    """``mobidfl bench``: the tuning of a study (``--tune``) or the bench itself."""
    from mobidfl.analysis.tuning import cmd_tune

    return cmd_tune(args)


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` names; refusals are one line on stderr, the exit code returned."""
    parser = make_parser()
    args = parser.parse_args(argv)
    from mobidfl.model.config import one_report

    try:
        with one_report():  # each warning line once per command, not per config or worker
            return int(args.func(args))
    except ConfigError as exc:
        return _fail(str(exc), 2)
    except Interrupted as exc:
        return _fail(str(exc), 130, prefix="mobidfl: ")
    except (OutputFailed, PluginFailed) as exc:
        return _fail(str(exc), 1)
    except RuntimeError as exc:
        if type(exc).__name__ != "ReproductionFailed":
            raise
        return _fail(str(exc), 1)
    except KeyboardInterrupt:
        return _fail("interrupted before step 1: nothing was written", 130, prefix="mobidfl: ")
    except ValueError as exc:
        from mobidfl.errors import DatasetUnavailable

        if not isinstance(exc, DatasetUnavailable):  # DatasetDamaged included
            raise
        return _fail(str(exc), 2)  # missing/corrupt dataset files: says what provides them
    except OSError as exc:  # outputs are caught as OutputFailed: this may be a read too
        where = f" {exc.filename}" if exc.filename else ""
        return _fail(f"could not access{where}: {exc.strerror or exc}", 1)


def _fail(message: str, code: int, *, prefix: str = "mobidfl: error: ") -> int:
    """One line on stderr (newlines folded), and the exit code."""
    print(prefix + " ".join(message.split()), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
