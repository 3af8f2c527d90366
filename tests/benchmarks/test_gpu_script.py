"""benchmarks/gpu_all.py, checked without a GPU: arguments, time limits, parsing, outputs.

The GPU numbers themselves need a lent GPU machine (``bash benchmarks/gpu_all.sh``); what
can fail here is the plumbing: a bad option refused with one line, a step stopped at its
time limit keeping what it printed, the epochs of a cut reproduction turned into seconds
per lockstep epoch, the page block replaced in place, and a dry run writing its files.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_all", ROOT / "benchmarks" / "gpu_all.py")
gpu_all = importlib.util.module_from_spec(spec)
sys.modules["gpu_all"] = gpu_all
spec.loader.exec_module(gpu_all)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "tests,bogus"], "unknown step(s) bogus"),
        (["--timeout", "round:60"], "expected STEP=SECONDS"),
        (["--timeout", "nothing=60"], "expected STEP=SECONDS"),
        (["--budget", "0"], "--budget must be positive"),
    ],
)
def test_bad_options_are_refused_with_one_line(argv, message, capsys):
    # Execute
    with pytest.raises(SystemExit) as exit_:
        gpu_all.parse_args(argv)
    # Assert
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_options_reach_the_step_commands():
    # Prepare
    args = gpu_all.parse_args(["--timeout", "round=33", "--city-agents", "123", "--device",
                               "cpu", "--sweep-epochs", "7"])  # fmt: skip
    # Execute
    city = gpu_all.city_command(args)
    sweep = gpu_all.sweep_command(args)
    fig2 = gpu_all.fig2_command(args)
    # Assert
    assert args.timeouts == {"round": 33.0}
    assert city[city.index("--city-agents") + 1] == "123"
    assert "steps=7" in sweep and sweep[sweep.index("--device") + 1] == "cpu"
    tail = fig2[fig2.index("--") + 1:]
    assert tail[:2] == ["reproduce", "cached_dfl_003"]
    assert tail[tail.index("--scale") + 1] == "paper" and tail[tail.index("--seeds") + 1] == "3"
    assert tail[tail.index("--variants") + 1] == "LRU,DFL,CFL" and "--batch-runs" in tail


def test_cuda_tests_are_the_files_with_a_cuda_mark():
    # Execute
    files = gpu_all.cuda_test_files()
    # Assert: every file holding the mark, and only those
    marked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
              if "\n@pytest.mark.cuda\n" in p.read_text(encoding="utf-8")}  # fmt: skip
    assert set(files) == marked and "tests/model/learning/test_perf.py" in files
    assert "tests/benchmarks/test_gpu_script.py" not in files  # names the mark, holds no such test


def test_lockstep_epochs_from_the_epoch_lines_of_three_runs():
    # Prepare: three runs, each epoch finished 2 s after the last, the runs 0.1 s apart;
    # run c stops (early stop) after epoch 3
    beats = [(5.0 + 2.0 * (e - 1) + 0.1 * r, run, e)
             for r, run in enumerate("abc") for e in range(1, 6) if not (run == "c" and e > 3)]
    text = "\n".join(f"{gpu_all.BEAT}{t:.3f} {run} {e}" for t, run, e in beats)
    # Execute
    numbers = gpu_all.parse_child(text + "\nnoise\n")
    # Assert
    ls = numbers["lockstep"]
    assert ls["runs_seen"] == 3 and ls["epochs_done"] == 5
    assert ls["epochs_per_run"] == {"a": 5, "b": 5, "c": 3}
    assert ls["first_epoch_done_s"] == pytest.approx(5.2)
    assert ls["s_per_lockstep_epoch"] == pytest.approx(2.0, abs=0.11)
    assert ls["projected_434_epochs_s"] == pytest.approx(5.2 + 433 * ls["s_per_lockstep_epoch"])


def test_a_step_past_its_limit_is_stopped_and_keeps_what_it_printed(tmp_path):
    # Prepare: a child that logs one epoch and then hangs
    code = (f"import time; print('{gpu_all.BEAT}1.500 runa 1', flush=True); "
            "print('RESULT {\"x\": 1}', flush=True); time.sleep(60)")  # fmt: skip
    step = gpu_all.Step("hang", lambda args: [sys.executable, "-c", code], 60, gpu_all.parse_child)
    # Execute: as when the script runs in the background, where SIGINT comes ignored
    inherited = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with (tmp_path / "log").open("w") as log:
            outcome = gpu_all.run_step(step, gpu_all.parse_args([]), 3.0, log)
    finally:
        signal.signal(signal.SIGINT, inherited)
    # Assert: stopped by the Ctrl-C at its limit (not killed 15 s later)
    assert outcome.timed_out and outcome.returncode == -signal.SIGINT
    assert outcome.wall_s < 15
    assert outcome.numbers["x"] == 1 and outcome.numbers["lockstep"]["epochs_done"] == 1
    assert "hang (limit 3 s)" in (tmp_path / "log").read_text()


def test_render_and_the_page_block_is_replaced_in_place(tmp_path):
    # Prepare: a report as gpu_all writes it
    report = {
        "command": "python benchmarks/gpu_all.py", "dry_run": False, "budget_s": 420,
        "machine": {"date_utc": "2026-11-26 15:00 UTC", "host_cpu": "X", "cpus": 16,
                    "load": [0.1, 0.2, 0.3], "gpu": "NVIDIA H100", "gpu_memory_gib": 79.2,
                    "torch": "2.11", "cuda": "13.0"},
        "steps": {"city": {"returncode": 0, "wall_s": 50.0, "timeout_s": 150,
                           "timed_out": False, "numbers": {"city": [
                               {"policy": "defedavg", "agents": 10000, "setup_s": 9.0,
                                "s_per_epoch_no_eval": 4.0, "evaluate_once_s": 3.0,
                                "s_per_epoch_eval_every_10": 4.3, "gpu_peak_gib": 2.0,
                                "host_peak_rss_gib": 5.0},
                               {"policy": "cached_lru", "agents": 10000, "refused": "too big"}]}}},
    }  # fmt: skip
    page = tmp_path / "gpu.md"
    page.write_text("# GPU\n\nintro\n")
    # Execute: twice, with different numbers
    gpu_all.write_page(page, gpu_all.render(report))
    report["steps"]["city"]["numbers"]["city"][0]["s_per_epoch_eval_every_10"] = 9.9
    gpu_all.write_page(page, gpu_all.render(report))
    # Assert: one block, the latest numbers, the text around kept
    text = page.read_text()
    assert text.startswith("# GPU\n\nintro\n")
    assert text.count(gpu_all.BEGIN) == 1 and text.count(gpu_all.END) == 1
    assert "| defedavg | 10,000 | 9.0 | 4.00 | 3.00 | 9.90 |" in text and "4.30" not in text
    assert "refused: too big" in text and "NVIDIA H100" in text


@pytest.mark.slow  # starts pytest and a reproduction in subprocesses (~1 min on 2 busy cores)
def test_dry_run_writes_its_outputs(tmp_path):
    # Execute: the cuda tests (skipped here) and the Fig. 2 reproduction at toy size
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    code = gpu_all.main(["--device", "cpu", "--dry-run", "--steps", "tests,fig2", "--out", out,
                         "--work", work])  # fmt: skip
    # Assert
    assert code == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["fig2.tar.gz", "gpu_all.json",
                                                     "gpu_all.log", "gpu_all.md"]  # fmt: skip
    report = json.loads((out / "gpu_all.json").read_text())
    tests, fig2 = report["steps"]["tests"], report["steps"]["fig2"]
    assert tests["returncode"] == 0 and "deselected" in tests["numbers"]["counts"]
    assert fig2["numbers"]["exit"] == 0 and fig2["numbers"]["lockstep"]["runs_seen"] == 4
    assert fig2["numbers"]["lockstep"]["epochs_done"] == 2
    assert any(v for _, _, v in fig2["numbers"]["verdicts"])
    assert "| fig2 | 0 |" in (out / "gpu_all.md").read_text()
