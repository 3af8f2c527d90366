"""Every GPU measurement of the project in one time-boxed run, for a lent GPU machine.

Runs, one subprocess each with its own timeout (a step that hangs or runs out of memory
costs its own time only), and writes their numbers to ``--out``:

1. ``tests``: ``pytest -m cuda`` over the test files that hold a ``pytest.mark.cuda`` test;
2. ``round``: ``benchmarks/gpu_round.py`` (Cached-DFL's full round, fp32 and bf16, beside
   the 1-thread CPU loop on a reduced round);
3. ``city``: N learning cars (default 10,000) on Cached-DFL's Manhattan with the MLP,
   Fashion-MNIST, a caching and a mixing policy, evaluation every 10 epochs on a shared
   1,000-image test set: seconds per epoch (train, evaluate, the rest) and peak memory;
4. ``sweep``: ``benchmarks/gpu_sweep.py`` (a reproduction's runs one after the other vs
   batched as one program, ``--batch-runs``' code path);
5. ``fig2``: Cached-DFL's Fig. 2 at the paper's scale (3 variants x 3 seeds),
   ``mobidfl reproduce cached_dfl_003 --scale paper --seeds 3 --variants LRU,DFL,CFL
   --device cuda --set backend=batched --batch-runs``, with whatever time is left: every
   epoch of every run is logged, so a run stopped at its time limit still gives seconds per
   lockstep epoch and a projection.

Outputs (at most 8 files, as the device tool returns): ``gpu_all.json`` (every number),
``gpu_all.md`` (the tables for docs/performance), ``gpu_all.log`` (every step's output),
``fig2.tar.gz`` (the reproduction's folder, when it finished).

``--dry-run`` runs the same steps at toy sizes (seconds, any device) to check the
plumbing; ``--render JSON --page FILE`` puts the tables of a fetched ``gpu_all.json`` into
a page between ``<!-- gpu_all:begin -->`` and ``<!-- gpu_all:end -->``.

Run on the GPU machine through ``benchmarks/gpu_all.sh`` (installs the carried wheels and
data first); here: ``python benchmarks/gpu_all.py --device cpu --dry-run --out /tmp/g``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "benchmarks"))  # loaded by file (its tests): shadow nothing
from machine import cpu_model  # noqa: E402 - after benchmarks/ is put on sys.path

STEPS = ("tests", "round", "city", "sweep", "fig2")
FIG2_VARIANTS = "LRU,DFL,CFL"
BEGIN, END = "<!-- gpu_all:begin -->", "<!-- gpu_all:end -->"
RESULT = "RESULT "  # a child's last line: its numbers as JSON
BEAT = "EPOCH "  # a fig2 / city child's line per finished epoch of a run


# --- what each step runs -----------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One measurement: its command (full and dry-run sizes), time limit and parser."""

    name: str
    command: Callable[[argparse.Namespace], list[str]]
    timeout_s: float
    parse: Callable[[str], dict[str, Any]]
    takes_rest: bool = False  # the last step gets whatever of the budget is left


def _py() -> list[str]:
    return [sys.executable, "-u"]


def cuda_test_files(tests: Path = ROOT / "tests") -> list[str]:
    """Test files holding a ``pytest.mark.cuda`` test (collecting only these keeps the
    step independent of the packages the other test files need)."""
    return sorted(
        str(p.relative_to(ROOT))
        for p in tests.rglob("test_*.py")
        if re.search(r"^\s*@pytest\.mark\.cuda\b", p.read_text(encoding="utf-8"), flags=re.M)
    )


def tests_command(args: argparse.Namespace) -> list[str]:
    return [*_py(), "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "-rs",
            *cuda_test_files()]  # fmt: skip


def round_command(args: argparse.Namespace) -> list[str]:
    if args.dry_run:
        return [*_py(), "benchmarks/gpu_round.py", "--scale", "0.02", "--rounds", "1",
                "--cpu-scale", "0.02", "--precision", "fp32"]  # fmt: skip
    return [*_py(), "benchmarks/gpu_round.py", "--scale", "1", "--rounds", "3",
            "--cpu-scale", "0.03"]  # fmt: skip


def sweep_command(args: argparse.Namespace) -> list[str]:
    base = [*_py(), "benchmarks/gpu_sweep.py", "--device", args.device, "--backend", "batched"]
    if args.dry_run:
        return [*base, "--scale", "ci", "--seeds", "1", "--variants", "LRU,DFL",
                "--set", "steps=2", "--set", "vehicles=6"]  # fmt: skip
    return [*base, "--scale", "paper", "--seeds", "2", "--variants", "LRU,DFL",
            "--set", f"steps={args.sweep_epochs}"]  # fmt: skip


def fig2_command(args: argparse.Namespace) -> list[str]:
    out = str(Path(args.work) / "fig2")
    child = [*_py(), str(Path(__file__).resolve()), "--child", "fig2", "--"]
    if args.dry_run:
        return [*child, "reproduce", "cached_dfl_003", "--scale", "ci", "--seeds", "2",
                "--variants", "LRU,DFL", "--out", out, "--device", args.device,
                "--set", "backend=batched", "--set", "steps=2", "--batch-runs"]  # fmt: skip
    return [*child, "reproduce", "cached_dfl_003", "--scale", "paper", "--seeds", "3",
            "--variants", FIG2_VARIANTS, "--out", out, "--device", args.device,
            "--set", "backend=batched", "--batch-runs"]  # fmt: skip


def city_command(args: argparse.Namespace) -> list[str]:
    agents = 40 if args.dry_run else args.city_agents
    epochs = 2 if args.dry_run else args.city_epochs
    return [*_py(), str(Path(__file__).resolve()), "--child", "city", "--device", args.device,
            "--city-agents", str(agents), "--city-epochs", str(epochs),
            "--city-policies", args.city_policies]  # fmt: skip


# --- parsers: the numbers of each step's output ------------------------------------------------
def _num(pattern: str, text: str, cast: Callable[[str], Any] = float) -> Any:
    m = re.search(pattern, text)
    return None if m is None else cast(m.group(1))


def parse_tests(text: str) -> dict[str, Any]:
    """pytest's summary line: counts of passed / failed / skipped / deselected / errors."""
    counts = {k: int(v) for v, k in re.findall(
        r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)", text)}  # fmt: skip
    return {"counts": counts, "seconds": _num(r"in ([\d.]+)s", text)}


def parse_round(text: str) -> dict[str, Any]:
    """gpu_round.py: per precision and round the train / evaluate / round seconds, GFLOP/s."""
    rounds = [
        {"precision": p, "round": int(r), "train_s": float(a), "evaluate_s": float(b),
         "round_s": float(c), "gflops": float(g), "acc": float(acc)}
        for p, r, a, b, c, g, acc in re.findall(
            r"cuda (\w+) round (\d+): train ([\d.]+) s, evaluate ([\d.]+) s, round ([\d.]+) s,"
            r" ([\d.]+) GFLOP/s, acc ([\d.]+)", text)
    ]  # fmt: skip
    return {
        "no_cuda": "no CUDA device" in text,
        "device_name": _num(r"^(.+?): \d+ cars x", text, str) if "cars x" in text else None,
        "tflop_per_round": _num(r"([\d.]+) TFLOP per round", text),
        "rounds": rounds,
        "bf16_speedup": _num(r"bf16 / fp32 round: ([\d.]+)x", text),
        "cpu_train_s": _num(r"cpu loop .*?train ([\d.]+) s", text),
        "cpu_ms_per_car_step": _num(r"per car-step cpu ([\d.]+) ms", text),
        "cuda_ms_per_car_step": _num(r"vs cuda ([\d.]+) ms", text),
        "cuda_over_cpu": _num(r"vs cuda [\d.]+ ms: ([\d.]+)x", text),
    }


def parse_sweep(text: str) -> dict[str, Any]:
    """gpu_sweep.py: peak, sequential vs batched set-up / stepping, speed-up, difference."""
    return {
        "no_cuda": "no CUDA device" in text,
        "cuda_peak_gflops": _num(r"fp32 matmul peak ([\d.]+) GFLOP/s", text),
        "runs": _num(r"= (\d+) runs", text, int),
        "seq_setup_s": _num(r"sequential: set-up ([\d.]+) s", text),
        "seq_stepping_s": _num(r"sequential: .*?stepping ([\d.]+) s", text),
        "seq_s_per_run_epoch": _num(r"sequential: .*?, ([\d.]+) s per run-epoch", text),
        "batched_setup_s": _num(r"batched: .*?set-up ([\d.]+) s", text),
        "batched_stepping_s": _num(r"batched: .*?stepping ([\d.]+) s", text),
        "batched_s_per_lockstep_epoch": _num(r"([\d.]+) s per lockstep epoch", text),
        "speedup_stepping": _num(r"speed-up: stepping ([\d.]+)x", text),
        "speedup_end_to_end": _num(r"end to end ([\d.]+)x", text),
        "largest_difference": _num(r"largest model.csv difference ([\d.e+-]+)", text),
    }


def lockstep_epochs(beats: list[tuple[float, str, int]]) -> dict[str, Any]:
    """From ``(seconds, run, epoch)`` lines: the time each epoch was finished by every run
    that reached it, and the median seconds per lockstep epoch after the first."""
    if not beats:
        return {"epochs_done": 0}
    done: dict[int, float] = {}
    last: dict[str, int] = {}
    for t, run, epoch in beats:
        done[epoch] = max(done.get(epoch, 0.0), t)
        last[run] = max(last.get(run, 0), epoch)
    epochs = sorted(done)
    gaps = sorted(done[b] - done[a] for a, b in zip(epochs, epochs[1:], strict=False)
                  if b == a + 1)  # fmt: skip
    steady = gaps[len(gaps) // 2] if gaps else None
    return {
        "runs_seen": len(last),
        "epochs_done": max(epochs),
        "epochs_per_run": dict(sorted(last.items())),
        "first_epoch_done_s": done[epochs[0]],
        "s_per_lockstep_epoch": steady,
        "projected_434_epochs_s": None if steady is None else done[epochs[0]] + 433 * steady,
        "projected_1000_epochs_s": None if steady is None else done[epochs[0]] + 999 * steady,
    }


def parse_beats(text: str) -> list[tuple[float, str, int]]:
    return [(float(t), run, int(e)) for t, run, e in
            re.findall(rf"^{BEAT}([\d.]+) (\S+) (\d+)$", text, flags=re.M)]  # fmt: skip


def parse_child(text: str) -> dict[str, Any]:
    """A child's ``RESULT {json}`` line, and the epochs it logged (also when it was cut)."""
    found: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith(RESULT):
            for key, value in json.loads(line[len(RESULT):]).items():
                if isinstance(value, list) and isinstance(found.get(key), list):
                    found[key] += value  # a child's rows, one line each (kept when cut)
                else:
                    found[key] = value
    beats = parse_beats(text)
    if beats:
        found["lockstep"] = lockstep_epochs(beats)
    verdicts = re.findall(r"^(.+?): paper .*?MobiDFL (.+?) -> ([a-z ]+)", text, flags=re.M)
    if verdicts:
        found["verdicts"] = [[c, x, v.strip()] for c, x, v in verdicts]
    return found


def make_steps() -> dict[str, Step]:
    return {
        "tests": Step("tests", tests_command, 120, parse_tests),
        "round": Step("round", round_command, 120, parse_round),
        "city": Step("city", city_command, 150, parse_child),
        "sweep": Step("sweep", sweep_command, 150, parse_sweep),
        "fig2": Step("fig2", fig2_command, 0, parse_child, takes_rest=True),
    }


# --- running a step ----------------------------------------------------------------------------
@dataclass
class Outcome:
    name: str
    command: list[str]
    timeout_s: float
    returncode: int | None = None
    timed_out: bool = False
    wall_s: float = 0.0
    numbers: dict[str, Any] = field(default_factory=dict)
    tail: str = ""


def run_step(step: Step, args: argparse.Namespace, timeout: float, log) -> Outcome:
    """Run ``step`` in its own process group; at ``timeout`` send it Ctrl-C, then kill it."""
    command = step.command(args)
    outcome = Outcome(step.name, command, round(timeout, 1))
    log.write(f"\n===== {step.name} (limit {timeout:.0f} s): {' '.join(command)}\n")
    log.flush()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": _pythonpath()}
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True,
                            preexec_fn=_ctrl_c_stops)  # fmt: skip  # noqa: PLW1509 - no other way to reset SIGINT in the child
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        outcome.timed_out = True
        os.killpg(proc.pid, signal.SIGINT)  # a reproduce stops after its current epoch
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
    outcome.wall_s = round(time.perf_counter() - started, 2)
    outcome.returncode = proc.returncode
    log.write(out)
    log.write(f"\n----- {step.name}: exit {proc.returncode}, {outcome.wall_s:.1f} s"
              f"{' (time limit)' if outcome.timed_out else ''}\n")  # fmt: skip
    log.flush()
    try:
        outcome.numbers = step.parse(out)
    except Exception as exc:  # a parser must never lose the other steps' numbers
        outcome.numbers = {"parse_error": f"{type(exc).__name__}: {exc}"}
    outcome.tail = "\n".join(out.strip().splitlines()[-12:])
    return outcome


def _ctrl_c_stops() -> None:
    """In the step's process, before it starts: SIGINT's default action, so the Ctrl-C at
    its limit stops it after its current epoch. A script started in the background
    (``nohup python benchmarks/gpu_all.py &``, or under a test runner) hands its children
    SIGINT as ignored, and the step would then run on until it is killed, 15 s later."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pythonpath() -> str:
    parts = [str(ROOT), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return os.pathsep.join(dict.fromkeys(parts))


def machine_info(device: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host_cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "load": [round(v, 2) for v in os.getloadavg()],
        "python": platform.python_version(),
        "device": device,
    }
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = props.name
            info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
            info["cuda"] = torch.version.cuda
    except Exception as exc:  # the report is still written without torch
        info["torch_error"] = str(exc)
    return info


# --- children: fig2 and city -------------------------------------------------------------------
def child_fig2(argv: list[str]) -> int:
    """``mobidfl reproduce ...`` in this process, every run's finished epoch logged."""
    from mobidfl.analysis.cli import main as cli_main
    from mobidfl.model import MobiDFLModel

    started = time.perf_counter()
    step = MobiDFLModel.step

    def logged_step(self) -> None:
        step(self)
        print(f"{BEAT}{time.perf_counter() - started:.3f} run{id(self):x} {self.steps}",
              flush=True)  # fmt: skip

    MobiDFLModel.step = logged_step
    code = cli_main(argv)
    out = Path(argv[argv.index("--out") + 1])
    print(RESULT + json.dumps({"exit": code, "wall_s": round(time.perf_counter() - started, 2),
                               "out": str(out)}))  # fmt: skip
    return code


def child_city(args: argparse.Namespace) -> int:
    """N learning cars on Cached-DFL's Manhattan (MLP, Fashion-MNIST, shards), per policy:
    set-up, seconds per epoch split into train / evaluate / the rest (move, contacts,
    exchange), evaluation every 10 epochs on 1,000 shared test images, and peak memory."""
    import torch

    from mobidfl.errors import ConfigError
    from mobidfl.model import MobiDFLModel

    cuda = args.device == "cuda"

    def now() -> float:
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    spent = {"train": 0.0, "evaluate": 0.0}

    def timed(name: str, fn: Callable) -> Callable:
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = now()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += now() - t0

        return wrapper

    for policy in args.city_policies.split(","):
        row: dict[str, Any] = {"policy": policy, "agents": args.city_agents}
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t = now()
        try:
            model = MobiDFLModel(
                preset="cached_dfl_003", vehicles=args.city_agents, model="mlp",
                dataset="fashion_mnist", test_size=1000, eval_every=10, eval_initial=False,
                steps=args.city_epochs, policy=policy, backend="batched", device=args.device,
                early_stop_patience=0, seed=0,
            )  # fmt: skip
        except (ConfigError, RuntimeError, MemoryError) as exc:
            row["refused"] = str(exc).splitlines()[0][:300]
            print(f"{policy}: refused: {row['refused']}", flush=True)
            print(RESULT + json.dumps({"city": [row]}), flush=True)
            continue
        row["setup_s"] = round(now() - t, 3)
        engine = model.learner.engine
        engine.train = timed("train", engine.train)
        engine.evaluate = timed("evaluate", engine.evaluate)
        epochs = []
        for e in range(args.city_epochs):
            spent.update(train=0.0, evaluate=0.0)
            t = now()
            model.step()
            wall = now() - t
            rest = wall - spent["train"] - spent["evaluate"]
            epochs.append({
                "epoch": e + 1, "wall_s": round(wall, 3), "train_s": round(spent["train"], 3),
                "evaluate_s": round(spent["evaluate"], 3), "rest_s": round(rest, 3),
            })  # fmt: skip
            print(f"{BEAT}{wall:.3f} city-{policy} {e + 1}", flush=True)
        spent.update(evaluate=0.0)
        engine.evaluate()  # one evaluation of every car on the shared 1,000 images
        row["evaluate_once_s"] = round(spent["evaluate"], 3)
        steady = epochs[1:] or epochs
        train_epoch = sum(r["wall_s"] - r["evaluate_s"] for r in steady) / len(steady)
        row["epochs"] = epochs
        row["s_per_epoch_no_eval"] = round(train_epoch, 3)
        row["s_per_epoch_eval_every_10"] = round(train_epoch + row["evaluate_once_s"] / 10, 3)
        if cuda:
            row["gpu_peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        row["host_peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                         / 2**20, 2)  # fmt: skip
        print(RESULT + json.dumps({"city": [row]}), flush=True)
        print(f"{policy}: set-up {row['setup_s']:.1f} s, {row['s_per_epoch_no_eval']:.2f} s per "
              f"epoch without evaluation, {row['s_per_epoch_eval_every_10']:.2f} s with "
              f"evaluation every 10", flush=True)  # fmt: skip
        del model, engine
    return 0


# --- the report --------------------------------------------------------------------------------
def _f(value: Any, fmt: str = "{:.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def render(report: dict[str, Any]) -> str:
    """The markdown tables of a report (``gpu_all.json``)."""
    m = report["machine"]
    gpu = m.get("gpu", "no GPU")
    lines = [
        f"Measured {m['date_utc']} on {gpu} ({m.get('gpu_memory_gib', '–')} GiB), host "
        f"{m['host_cpu']} ({m['cpus']} CPUs, load {' / '.join(map(str, m['load']))} at the "
        f"start), torch {m.get('torch', '–')}, CUDA {m.get('cuda', '–')}; "
        f"`{report['command']}`{' (dry run: toy sizes)' if report['dry_run'] else ''}.",
        "",
        "| step | exit | wall s | limit s | result |",
        "|---|---|---|---|---|",
    ]
    for name in STEPS:
        o = report["steps"].get(name)
        if o is None:
            continue
        summary = _summary(name, o["numbers"])
        cut = " (stopped at its limit)" if o["timed_out"] else ""
        lines.append(f"| {name} | {o['returncode']} | {o['wall_s']:.1f} | {o['timeout_s']:.0f} | "
                     f"{summary}{cut} |")  # fmt: skip
    rnd = report["steps"].get("round", {}).get("numbers", {})
    if rnd.get("rounds"):
        lines += ["", "Cached-DFL round (`gpu_round.py`):", "",
                  "| precision | round | train s | evaluate s | round s | GFLOP/s | acc |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in rnd["rounds"]:
            lines.append(f"| {r['precision']} | {r['round']} | {r['train_s']:.2f} | "
                         f"{r['evaluate_s']:.2f} | {r['round_s']:.2f} | {r['gflops']:.0f} | "
                         f"{r['acc']:.3f} |")  # fmt: skip
    fig2 = report["steps"].get("fig2", {}).get("numbers", {})
    if fig2.get("verdicts"):
        lines += ["", "Cached-DFL Fig. 2 at the paper's scale (`mobidfl reproduce cached_dfl_003 "
                  "--scale paper --seeds 3 --variants LRU,DFL,CFL`):", "",
                  "| claim | MobiDFL | verdict |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {c} | {x} | {v} |" for c, x, v in fig2["verdicts"]]
    city = report["steps"].get("city", {}).get("numbers", {}).get("city", [])
    if city:
        lines += ["", "Learning city (MLP, Fashion-MNIST, Cached-DFL's Manhattan, evaluation "
                  "every 10 epochs on 1,000 shared images):", "",
                  "| policy | agents | set-up s | s/epoch (no eval) | one evaluation s | "
                  "s/epoch (eval every 10) | GPU peak GiB | host peak RSS GiB |",
                  "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in city:
            if "refused" in r:
                lines.append(f"| {r['policy']} | {r['agents']} | refused: {r['refused']} "
                             "| | | | | |")  # fmt: skip
                continue
            lines.append(f"| {r['policy']} | {r['agents']:,} | {r['setup_s']:.1f} | "
                         f"{r['s_per_epoch_no_eval']:.2f} | {r['evaluate_once_s']:.2f} | "
                         f"{r['s_per_epoch_eval_every_10']:.2f} | {_f(r.get('gpu_peak_gib'))} | "
                         f"{_f(r.get('host_peak_rss_gib'))} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def _summary(name: str, n: dict[str, Any]) -> str:
    if "parse_error" in n:
        return f"parse error: {n['parse_error']}"
    if n.get("no_cuda"):
        return "no CUDA device"
    if name == "tests":
        c = n.get("counts", {})
        return ", ".join(f"{v} {k}" for k, v in c.items()) or "no summary"
    if name == "round":
        best = min((r for r in n.get("rounds", []) if r["precision"] == "fp32"),
                   key=lambda r: r["round_s"], default=None)  # fmt: skip
        if best is None:
            return "no round"
        return (f"fp32 round {best['round_s']:.2f} s ({best['gflops']:.0f} GFLOP/s, "
                f"{_f(n.get('tflop_per_round'))} TFLOP); bf16 {_f(n.get('bf16_speedup'))}x; "
                f"{_f(n.get('cuda_over_cpu'), '{:.0f}')}x the 1-thread CPU per car-step")
    if name == "sweep":
        return (f"{n.get('runs')} runs: sequential {_f(n.get('seq_s_per_run_epoch'), '{:.3f}')} "
                f"s per run-epoch, batched {_f(n.get('batched_s_per_lockstep_epoch'), '{:.3f}')}"
                f" s per lockstep epoch; stepping {_f(n.get('speedup_stepping'))}x, end to end "
                f"{_f(n.get('speedup_end_to_end'))}x; largest difference "
                f"{_f(n.get('largest_difference'), '{:.1e}')}")
    if name == "city":
        parts = [f"{r['policy']}: refused" if "refused" in r else
                 f"{r['policy']} {r['s_per_epoch_eval_every_10']:.2f} s/epoch"
                 for r in n.get("city", [])]  # fmt: skip
        return "; ".join(parts) or "no result"
    if name == "fig2":
        ls = n.get("lockstep", {})
        text = (f"{ls.get('runs_seen', 0)} runs, {ls.get('epochs_done', 0)} lockstep epochs, "
                f"{_f(ls.get('s_per_lockstep_epoch'), '{:.3f}')} s per lockstep epoch "
                f"(first done at {_f(ls.get('first_epoch_done_s'), '{:.1f}')} s); "
                f"434 epochs ~ {_f(_div(ls.get('projected_434_epochs_s'), 60), '{:.1f}')} min")
        if "exit" in n:
            text += f"; finished in {n['wall_s']:.0f} s"
        return text
    return json.dumps(n)[:200]


def _div(x: float | None, y: float) -> float | None:
    return None if x is None else x / y


def write_page(page: Path, markdown: str) -> None:
    """Replace the block between the markers in ``page`` (appended when absent)."""
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    block = f"{BEGIN}\n{markdown}{END}"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    page.write_text(text, encoding="utf-8")


# --- main --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_all_out")),
                   help="folder for gpu_all.json / .md / .log (default $OUT)")
    p.add_argument("--work", type=Path, default=Path("/tmp/gpu_all_work"),
                   help="scratch folder (the Fig. 2 reproduction's outputs)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--steps", default=",".join(STEPS), help=f"subset of {','.join(STEPS)}")
    p.add_argument("--budget", type=float, default=420.0,
                   help="seconds for every step together; the last one gets the rest")
    p.add_argument("--dry-run", action="store_true", help="toy sizes: checks the plumbing")
    p.add_argument("--city-agents", type=int, default=10_000)
    p.add_argument("--city-epochs", type=int, default=2)
    p.add_argument("--city-policies", default="defedavg,cached_lru")
    p.add_argument("--sweep-epochs", type=int, default=5)
    p.add_argument("--timeout", action="append", default=[], metavar="STEP=SECONDS",
                   help="another time limit for one step, e.g. round=60")
    p.add_argument("--render", type=Path, help="a gpu_all.json to render (no run)")
    p.add_argument("--page", type=Path, help="with --render: the page to write the tables in")
    p.add_argument("--child", choices=["fig2", "city"], help=argparse.SUPPRESS)
    p.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = set(args.steps.split(",")) - set(STEPS)
    if unknown:
        p.error(f"--steps: unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")
    args.timeouts = {}
    for item in args.timeout:
        name, _, value = item.partition("=")
        if name not in STEPS or not re.fullmatch(r"\d+(\.\d+)?", value):
            p.error(f"--timeout {item!r}: expected STEP=SECONDS with STEP in {', '.join(STEPS)}")
        args.timeouts[name] = float(value)
    if args.budget <= 0:
        p.error("--budget must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child == "fig2":
        return child_fig2(args.rest)
    if args.child == "city":
        return child_city(args)
    if args.render is not None:
        markdown = render(json.loads(args.render.read_text(encoding="utf-8")))
        if args.page is not None:
            write_page(args.page, markdown)
        else:
            print(markdown, end="")
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    fig2_out = args.work / "fig2"
    if fig2_out.exists():
        import shutil

        shutil.rmtree(fig2_out)
    chosen = [s for s in STEPS if s in args.steps.split(",")]
    steps = make_steps()
    report: dict[str, Any] = {
        "command": "python benchmarks/gpu_all.py " + " ".join(sys.argv[1:] if argv is None
                                                               else argv),  # fmt: skip
        "dry_run": args.dry_run,
        "budget_s": args.budget,
        "machine": machine_info(args.device),
        "steps": {},
    }
    started = time.perf_counter()
    with (args.out / "gpu_all.log").open("w", encoding="utf-8") as log:
        log.write(json.dumps(report["machine"]) + "\n")
        for i, name in enumerate(chosen):
            step = steps[name]
            left = args.budget - (time.perf_counter() - started)
            later = sum(args.timeouts.get(s, steps[s].timeout_s) for s in chosen[i + 1:]
                        if not steps[s].takes_rest)  # fmt: skip
            limit = args.timeouts.get(name, step.timeout_s)
            limit = left - later if step.takes_rest and name not in args.timeouts else limit
            limit = min(limit, left)
            if limit < 5:
                report["steps"][name] = {**Outcome(name, step.command(args), 0).__dict__,
                                         "skipped": "no time left in the budget"}  # fmt: skip
                continue
            print(f"[{time.perf_counter() - started:6.1f} s] {name} (limit {limit:.0f} s)",
                  flush=True)  # fmt: skip
            outcome = run_step(step, args, limit, log)
            report["steps"][name] = outcome.__dict__
            print(f"    exit {outcome.returncode}, {outcome.wall_s:.1f} s: "
                  f"{_summary(name, outcome.numbers)}", flush=True)  # fmt: skip
            _write(report, args.out)  # after every step: a later crash keeps these
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["machine"]["load_end"] = [round(v, 2) for v in os.getloadavg()]
    if fig2_out.exists():
        with tarfile.open(args.out / "fig2.tar.gz", "w:gz") as tar:
            tar.add(fig2_out, arcname="fig2")
    _write(report, args.out)
    print(render(report))
    failed = [n for n, o in report["steps"].items()
              if o.get("returncode") not in (0, None) and not o.get("timed_out")]
    return 1 if failed else 0


def _write(report: dict[str, Any], out: Path) -> None:
    (out / "gpu_all.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "gpu_all.md").write_text(render(report))


if __name__ == "__main__":
    sys.exit(main())
