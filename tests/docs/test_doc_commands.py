"""Every shell command that the README, the validation and the benchmark pages show runs as written.

Each page's commands (```` ```bash ````, ```` ```sh ````, ```` ```shell ```` blocks, and the
``$ `` lines of ```` ```console ```` blocks) run in order, in one bash with ``set -e``, in a
fresh copy of the repository (its tracked and not-ignored files, as a clone has them, with
``.venv`` pointing at this interpreter's environment): verbatim, or

* at its CI size, where :data:`CI_SIZE` names the same command with a smaller size and why;
* not here, where :data:`COVERED` says which test or CI step runs it (a machine's set-up,
  a server, a test file the suite already runs).

A command in neither table runs verbatim: a new command on these pages is tested the day it
is written. A table entry whose command no page shows any more fails, so the tables stay
the list of exceptions. Files a page assumes the reader has (``my_world.toml``) are in
:data:`INPUTS`. The tutorials' commands run in ``tests/docs/test_docs.py``.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_docs import tutorial_env

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("README.md", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "validation").glob("*.md")
), "docs/benchmark/controlled.md", "docs/benchmark/index.md", "docs/reproduction/stability.md")
"""The pages whose commands this file runs (the tutorials: tests/docs/test_docs.py)."""
SHELL = ("bash", "sh", "shell", "console")
PROGRAMS = ("make", "python", "python3", "mobidfl", "pytest", "pip", "git", "source", "bash")
"""First words that make an unlabelled block's line a command (which must be labelled)."""
MARK = "::doc-command:: "
"""Printed before each command, to say which one failed and that each ran."""

CI_SIZE: dict[str, tuple[str, str]] = {
    "python -m mobidfl.analysis.stability dam_001 --scale ci --seeds 3 --out stability": (
        'python -m mobidfl.analysis.stability dam_001 --scale ci --seeds 3 --out stability '
        '--claims "DAM over Random"',
        "the same three arms on the same seeds, for the one claim whose published verdict "
        "tests/reproduction/test_stability.py also checks: its two variants, not all four"),
    # documented command (its trailing comment dropped): (what runs here, why)
    "mobidfl run --out results/first --set vehicles=40 --set steps=30 --set policy=dpsgd": (
        "mobidfl run --out results/first --set vehicles=40 --set steps=3 --set policy=dpsgd",
        "30 steps of the default world's 116 agents take a minute on a busy 2-core machine; 3 "
        "steps run every stage (build, train, exchange, evaluate, write every file)"),
    "mobidfl reproduce psfl_004 --scale small --seeds 3 --out repro/psfl": (
        "mobidfl reproduce psfl_004 --scale ci --seeds 1 --out repro/psfl",
        "small is minutes per seed; ci is the preset's CI size (its claims' directions are "
        "checked over 2 seeds by tests/reproduction/test_exp_004.py)"),
    "make validate": (
        "make -o .venv/.installed validate SIZE=ci VALIDATE_ARGS='--cases heredia --seeds 1'",
        "small runs every case (psfl alone is minutes); the target with the one case whose ci "
        "size takes seconds; -o: .venv is set up (by CI), not installed again"),
    "python -m validation --cases heredia --size full --seeds 3 --out OUT": (
        "python -m validation --cases heredia --size ci --seeds 1 --out OUT",
        "full is 100 nodes x 3 seeds; ci is the case's CI size"),
    "python -m validation --cases ns3_link --size full --seeds 3": (
        "python -m validation --cases ns3_link --size small --seeds 1",
        "full replays 200 stays of any length in ns-3; small (20 stays) is the page's CI line"),
    "mobidfl bench --study mobility_skew --tune recipe --scale small --out results/tune_recipe": (
        "mobidfl bench --study mobility_skew --tune recipe --scale ci --out results/tune_recipe",
        "small is 6 lr values x 6 columns x 2 tuning seeds of 60 cars (about an hour); ci runs "
        "the same protocol on the ci worlds in seconds"),
    "mobidfl bench --study mobility_skew_cnn --tune recipe --scale small --out results/tune_cnn": (
        "mobidfl bench --study mobility_skew_cnn --tune recipe --scale ci --out results/tune_cnn",
        "small is 24 CNN runs of 30 s each; ci runs the same protocol in seconds"),
    "mobidfl bench --study mobility_skew_cnn --scale small --seeds 3 --policies "
    "local,central_fedavg,dpsgd,cached_lru,psfl --out results/study_cnn": (
        "mobidfl bench --study mobility_skew_cnn --scale ci --seeds 2 --policies local,dpsgd "
        "--out results/study_cnn",
        "small is 90 CNN runs (an hour on 2 cores); ci with two policies and two seeds (the "
        "fewest the page's statistics take) feeds the page's next two commands, which run as "
        "written on it"),
}
"""Commands run at a smaller size here: each keeps its program, subcommand and first
argument."""

COVERED: dict[str, str] = {
    "python -m mobidfl.analysis.stability dam_001 --scale small --seeds 3 --out stability_small":
        "hours on 2 cores (1,000 full-batch rounds a run); run for DAM over Random with "
        "--claims, its three arms published under published/reproduction/stability_small/ "
        "and checked against the table by tests/reproduction/test_stability.py",
    "make run": "sets up a machine (creates .venv, installs, then one run of the default "
                "world): CI starts from a fresh clone with the same set-up (make test); "
                "`mobidfl run` itself is run here from the README's first-run lines",
    "make test": "is CI itself",
    "make app": "a server that runs until stopped: tests/analysis/app/test_app_browser.py starts "
                "the same `solara run app.py --host 127.0.0.1` and drives it in Chromium",
    "mobidfl bench --study mobility_skew --scale small --seeds 3 --out results/study":
        "630 runs at small; at ci still 576 (7 min on 2 busy cores): "
        "tests/published/test_published_study.py runs this command at --scale ci --seeds 2 (every "
        "column, three policies) and checks what it writes",
    "python -m validation --size full --seeds 3 --cases cached_dfl --out results/validation":
        "the case has no ci size and its smallest (small, 2 seeds: 51 s on 2 busy cores) is "
        "what tests/validation/test_validation_cached_dfl.py runs (validation.cached_dfl.measure); "
        "this CLI's folders and table are run here by make validate and by heredia.md",
    "python -m validation --cases psfl --size small": "minutes per seed (the reference's "
                "80-tick runs in its own Python 3.13); the page's CI line is "
                "tests/validation/test_validation_psfl.py (the fixed-input checks at ci size)",
    "python -m validation --cases psfl --size full": "as --size small (the same case, all "
                "of Fashion-MNIST and 9 worlds)",
    "pytest tests/validation/test_validation_psfl.py": "a file of the suite: every CI run runs it",
    "python -m validation.psfl_full sweep --size full --seeds 3 --out results/psfl_full":
        "hours (27 whole 80-tick runs of each side on all of Fashion-MNIST: 5-20 min each); "
        "tests/validation/test_validation_psfl_full.py runs the same sweep code on a made-up "
        "lattice (every reading, resume, the cell parser and its refusals)",
    "python -m validation.psfl_full mechanism --size small --seeds 3 --out results/psfl_mech":
        "minutes per run (the reference's whole runs in its own Python 3.13); the same code "
        "as the sweep above, run by tests/validation/test_validation_psfl_full.py",
    "python -m validation.psfl_full publish --run results/psfl_full --name full --to "
    "published/validation/psfl": "reads the sweep's folder, which only the sweep above "
        "writes; test_a_run_folder_becomes_per_run_tick_and_area_tables publishes a made-up "
        "run folder with the same code",
    "python -m validation.psfl_full publish --run results/psfl_mech --name mechanism --to "
    "published/validation/psfl": "as the publish line above, for the mechanism's folder",
    "pytest tests/validation/test_validation_psfl_full.py": "a file of the suite: every CI run "
                                                            "runs it",
    "python -m mobidfl.analysis.publish results/study published/benchmark/mobility_skew":
        "reads the folder of the study's bench command above (COVERED: hours at small); "
        "tests/published/test_published_study.py publishes that command's ci run with the same "
        "code (publish_bench) and checks the page it gives",
    "mobidfl bench --study mobility_skew --tune policies --scale small --seeds 3 --out "
    "results/tune_policies": "hours (every knob's grid x 3 columns x 2 tuning seeds, then "
        "the results seeds); tests/analysis/test_tuning.py runs this command at --scale ci "
        "(test_tune_policies_at_ci_chooses_then_runs_paper_and_chosen_on_results_seeds)",
    "mobidfl bench --out results/bench_small --scale small --seeds 5 --policies all "
    "--processes 2": "670 runs at small (1.5-2 h on 2 cores); the page's `--scale ci` "
        "command, run here as written, runs the same code",
    "python -m mobidfl.analysis.publish results/bench_small published/benchmark/small":
        "reads the folder only the small bench above writes (hours); the same code "
        "(publish_bench) publishes the ci study in tests/published/test_published_study.py",
    "mobidfl bench --scale small --seeds 5 --out results/bench_small": "1.5-2 h on 2 cores; "
        "the page's `--scale ci` command, run here as written, runs the same code",
    "mobidfl bench --scale full --seeds 5 --batch-runs --device cuda --out results/bench_full":
        "needs a CUDA device; benchmarks/gpu_all.py runs `--batch-runs --device cuda` when a "
        "GPU is lent, and tests/analysis/test_batch_runs.py runs --batch-runs on the CPU",
    "mobidfl bench --study mobility_regimes --pilot --scale small --policies declared --out "
    "results/regimes_pilot": "60 runs at small on the real Fashion-MNIST, which the suite "
        "hides (tests/conftest.py); tests/analysis/test_regimes_study.py runs this command at "
        "--scale ci on a made-up Fashion-MNIST and checks its worlds, seeds, arms and manifest",
    "mobidfl bench --study mobility_regimes --scale small --seeds 4 --policies declared --out "
    "results/regimes": "960 runs at small (about 45 min on 2 cores) from a clean tree; "
        "tests/analysis/test_regimes_study.py runs the same bench on the pilot at ci and checks "
        "the refusals of this command (other seeds, a tree with changes)",
    "python -m mobidfl.analysis.publish results/regimes published/benchmark/mobility_regimes":
        "reads the folder only the results run above writes; tests/analysis/test_regimes_study.py "
        "publishes the ci pilot with the same code (publish_bench) and builds its page",
    "python -m mobidfl.analysis.publish --answer-page published/benchmark/mobility_regimes "
    "docs/benchmark/regimes.md": "tests/published/test_published_answer.py regenerates the "
        "committed page, rule and figures from the published data and fails when they differ",
    "MOBIDFL_PSFL_RUNS=1 pytest tests/validation/test_validation_psfl.py": "the opt-in whole runs "
                "of the file above (minutes per seed); that the variable is what un-skips them "
                "is checked in test_the_opt_in_psfl_runs_are_what_the_page_says",
}
"""Commands not run here, each with the test or CI step that runs it."""

NEEDS: dict[str, tuple[str, str]] = {
    # command: (module it needs, why); left out (and the page's test says so) without it
    "python -m validation.ns3_calibrate results/validation/ns3_link/ns3_link.json": (
        "ns3", "reads the ns3_link case's output, which only ns-3 writes (the optional ns3 "
        "extra; without it the case gives one skipped row, as the page says)"),
}
"""Commands that need an optional extra."""

INPUTS: dict[str, dict[str, str]] = {
    # page: {file its commands assume the reader has: content}
    "README.md": {
        # the reader's own world (README: "your own scenario file"): a TOML of settings
        "my_world.toml": 'map = "nyc_uws"\nvehicles = 20\npedestrians = 0\nsensors = 0\n'
                         'uavs = 0\nvehicle_policy = "cached_lru"\n',
    },
}


def key(command: str) -> str:
    """A command without its trailing comment and repeated spaces (the tables' keys)."""
    return " ".join(re.sub(r"(^|\s)#.*$", "", command).split())


def fences(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of a page, in order; ``""`` for a block
    without a language. Fences are read line by line: a closing fence never opens one."""
    blocks, lang, body = [], None, []
    for line in text.splitlines():
        if lang is None and line.startswith("```"):
            lang, body = re.match(r"```(\w*)", line).group(1), []
        elif lang is not None and line.rstrip() == "```":
            blocks.append((lang, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def page_commands(text: str) -> list[str]:
    """The shell commands of a page, verbatim (comments kept), in order. A line ending in
    ``\\`` continues on the next."""
    commands = []
    for lang, body in fences(text):
        if lang not in SHELL:
            continue
        pending = ""
        for line in body.splitlines():
            if lang == "console":
                if not line.startswith("$ ") and not pending:
                    continue  # output
                line = line.removeprefix("$ ")
            line = pending + (line.lstrip() if pending else line)
            if line.rstrip().endswith("\\"):
                pending = line.rstrip()[:-1].rstrip() + " "
                continue
            pending = ""
            if key(line):
                commands.append(line.strip())
    return commands


def unlabelled_commands(text: str) -> list[str]:
    """Lines of blocks without a language that read like commands (they must be labelled
    ``bash`` to be run here)."""
    found = []
    for lang, body in fences(text):
        if lang:
            continue
        for line in body.splitlines():
            words = key(line).split()
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
                words = words[1:]  # VAR=value before the program
            if words and words[0] in PROGRAMS:
                found.append(line.strip())
    return found


def planned(page: str) -> tuple[list[str], list[str]]:
    """What runs for ``page``: each command verbatim or at its CI size, those in
    :data:`COVERED` left out, a command repeated by the sizes (small and full) once; and the
    commands left out for a missing extra (:data:`NEEDS`)."""
    script: list[str] = []
    missing: list[str] = []
    for command in page_commands((ROOT / page).read_text()):
        k = key(command)
        if k in COVERED:
            continue
        if k in NEEDS and importlib.util.find_spec(NEEDS[k][0]) is None:
            missing.append(f"{k} (needs {NEEDS[k][0]}: {NEEDS[k][1]})")
            continue
        run = CI_SIZE[k][0] if k in CI_SIZE else command
        if key(run) not in map(key, script):
            script.append(run)
    return script, missing


def fresh_copy(dest: Path) -> Path:
    """The repository's tracked and not-ignored files (a clone's) in ``dest``, with
    ``.venv`` pointing at this interpreter's environment (what ``make`` set up)."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(Path(sys.prefix))
    return dest


def run_commands(script: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 timeout: float = 900) -> tuple[int, list[str], str]:
    """Run ``script`` in one bash with ``set -euo pipefail`` in ``cwd``: its exit status, the
    commands that started (each says so on stderr first) and what they printed."""
    lines = ["set -euo pipefail"]
    for command in script:
        lines += [f"echo {shlex.quote(MARK + command)} >&2", command]
    done = subprocess.run(["bash", "-c", "\n".join(lines)], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    ran = [line[len(MARK):] for line in done.stderr.splitlines() if line.startswith(MARK)]
    return done.returncode, ran, done.stdout + done.stderr


def test_a_failing_command_stops_the_page_and_is_named(tmp_path):
    # the runner is real: a failing command (or a failing part of a pipe) fails the page,
    # and the commands after it do not run
    assert run_commands(["true", "echo ok | grep -q ok"], cwd=tmp_path)[:2] == (
        0, ["true", "echo ok | grep -q ok"])
    code, ran, _ = run_commands(["true", "false | cat", "echo never"], cwd=tmp_path)
    assert code != 0 and ran == ["true", "false | cat"]


def test_the_pages_show_commands_and_label_them():
    for page in PAGES:
        text = (ROOT / page).read_text()
        assert page_commands(text), f"{page}: no commands found (a block language changed?)"
        assert not unlabelled_commands(text), (
            f"{page}: commands in a block without a language (label it ```bash so this file "
            f"runs them): {unlabelled_commands(text)}")


def test_the_extraction_is_real():
    # bash and console blocks, a continued line, output and prose left out
    page = ("```bash\nmake x   # why\n\nmobidfl run \\\n  --out a\n```\n```text\nmake no\n```\n"
            "```console\n$ python -m v\nprinted\n```\n```\nmake unlabelled\n```\n")
    assert page_commands(page) == ["make x   # why", "mobidfl run --out a", "python -m v"]
    assert unlabelled_commands(page) == ["make unlabelled"]
    assert key("A=1 pytest t.py   # note") == "A=1 pytest t.py"


def test_the_tables_name_only_commands_the_pages_show():
    shown = {key(c) for page in PAGES for c in page_commands((ROOT / page).read_text())}
    stale = sorted((set(CI_SIZE) | set(COVERED) | set(NEEDS)) - shown)
    assert not stale, f"table entries no page shows any more: {stale}"
    assert not set(CI_SIZE) & set(COVERED) and not set(NEEDS) & set(COVERED)
    assert all(COVERED.values()) and all(why for _, why in NEEDS.values())
    for original, (smaller, why) in CI_SIZE.items():
        # the same program, subcommand (or module, or make target) and first argument
        assert set(original.split()[:3]) <= set(smaller.split()), original
        assert smaller.split()[0] == original.split()[0] and smaller != original, original
        assert why


def test_the_opt_in_psfl_runs_are_what_the_page_says():
    # the COVERED entry's claim: the variable is what un-skips the file's whole runs
    text = (ROOT / "tests" / "validation" / "test_validation_psfl.py").read_text()
    assert 'os.environ.get("MOBIDFL_PSFL_RUNS") != "1"' in text


@pytest.mark.parametrize("page", PAGES)
def test_every_command_of_the_page_runs_as_written(page, tmp_path):
    # Prepare: a fresh copy, the page's inputs, and the environment a reader has after
    # `make` (the interpreter's bin first on PATH, the copy's code importable)
    script, missing = planned(page)
    if not script:
        assert not missing and all(
            key(c) in COVERED for c in page_commands((ROOT / page).read_text()))
        return
    if not (Path(sys.prefix) / "bin" / "activate").is_file():
        pytest.skip("the suite runs outside a virtual environment: no .venv to activate")
    repo = fresh_copy(tmp_path / "repo")
    for name, content in INPUTS.get(page, {}).items():
        (repo / name).write_text(content)
    env = tutorial_env()
    env["PYTHONPATH"] = str(repo)
    shared = ROOT.parent / "shared"  # the references' seed beside the checkout (refcache.py)
    if shared.is_dir():
        env.setdefault("MOBIDFL_REF_SEED", str(shared))
    # Execute
    code, ran, log = run_commands(script, cwd=repo, env=env)
    # Assert
    assert code == 0, f"{page}: a command failed ({code}):\n{log[-4000:]}"
    assert ran == script, log[-2000:]
    if missing:  # the rest ran and passed; say what could not run here
        pytest.skip(f"{page}: all ran but " + "; ".join(missing))
