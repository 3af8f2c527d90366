"""Every bad input gets one line (exit 2), every output survives (issue 13).

The table runs each class of bad input through the real CLI (``mobidfl.analysis.cli`` as
``__main__``) in its own process and asserts: exit 2, exactly one stderr line naming the
setting or file and what is allowed, no traceback, nothing new or changed in ``--out`` or
beside it. To stay fast the cases share one interpreter that has imported torch and Mesa
once and forks a child per case (the child runs the CLI module exactly as ``python -m``);
two cases also run as plain ``python -m mobidfl.analysis.cli`` subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mobidfl.analysis.cli import main
from mobidfl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--set", "map=grid:3x3", "--set", "learning=false", "--set", "steps=2",
        "--set", "vehicles=3", "--set", "pedestrians=0", "--set", "sensors=0",
        "--set", "uavs=0", "--quiet"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


_DRIVER = textwrap.dedent(
    """
    import json, os, runpy, sys, traceback
    cases = json.loads(sys.stdin.read())
    import torch, mesa, mobidfl.model.world, mobidfl.model.checkpoint  # warm
    import mobidfl.analysis.gis, mobidfl.analysis.plots  # noqa: E401 - warm
    import mobidfl.analysis.report, mobidfl.analysis.sweep  # noqa: E401 - warm
    codes = []
    for case in cases:
        pid = os.fork()
        if pid == 0:
            fd = os.open(case["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.chdir(case["cwd"])
            sys.argv = ["mobidfl", *case["argv"]]
            code = 0
            try:
                runpy.run_module("mobidfl.analysis.cli", run_name="__main__", alter_sys=True)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    print(json.dumps(codes))
    """
)


def run_cli_cases(cases: list[dict]) -> list[int]:
    """Run each ``{"argv", "cwd", "stderr"}`` as its own CLI process; return the exit codes.

    The cases go through stdin: as one argument they passed Linux's 128 KiB limit on a
    single argument (MAX_ARG_STRLEN; the 100,000-character map case alone is most of it)."""
    proc = subprocess.run([sys.executable, "-c", _DRIVER], check=False, input=json.dumps(cases),
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder`` with its size and modification time."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.stat().st_size if p.is_file() else -1,
                                         p.stat().st_mtime_ns if p.is_file() else 0)
            for p in sorted(folder.rglob("*"))}


# --- fixtures -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory) -> Path:
    """A finished tiny run with a checkpoint (the resume cases corrupt copies of it)."""
    out = tmp_path_factory.mktemp("ckpt") / "run"
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", *TINY]) == 0
    return out


def _copy_run(src: Path) -> Callable[[Path], None]:
    def setup(out: Path) -> None:
        shutil.copytree(src, out)
    return setup


def _state(write: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    def setup(out: Path, src: Path) -> None:
        shutil.copytree(src, out)
        write(out / "checkpoint" / "state.pt")
    return setup


def _malicious(path: Path) -> None:
    import torch

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {path.parent / 'PWNED'}",))

    torch.save({"steps": Payload()}, path)


def _foreign(path: Path) -> None:
    import torch

    torch.save({"weights": torch.ones(3)}, path)


def _edit_config(old: str, new: str) -> Callable[[Path, Path], None]:
    def setup(out: Path, src: Path) -> None:
        shutil.copytree(src, out)
        path = out / "checkpoint" / "config.toml"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    return setup


def _bad_fashion(root: Path) -> None:
    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / f"{name}.gz").write_bytes(b"this is not gzip")


def _grid_graphml() -> bytes:
    import osmnx as ox

    from mobidfl.maps.sources import street_grid

    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"mobidfl-grid-{os.getpid()}.graphml"
    ox.save_graphml(street_grid(rows=4, cols=6, spacing_m=100.0), path)
    raw = path.read_bytes()
    path.unlink()
    return raw


def _write(name: str, data: bytes | str) -> Callable[[Path], None]:
    """Setup: write ``data`` beside ``--out`` (lazily: a callable gives the bytes)."""
    def setup(out: Path) -> None:
        value = data() if callable(data) else data
        (out.parent / name).write_bytes(value.encode() if isinstance(value, str) else value)
    return setup


def _half_graphml() -> bytes:
    raw = _grid_graphml()
    return raw[: len(raw) // 2]


_NET = (
    '<net version="1.20"><location netOffset="0.00,0.00" convBoundary="0,0,100,100" '
    'origBoundary="0,0,100,100" projParameter="{proj}"/>'
    '<edge id="e0" from="a" to="b"{shape}><lane id="e0_0" index="0" speed="13" length="100" '
    'shape="0,0 100,0"/></edge><edge id="e1" from="b" to="a"><lane id="e1_0" index="0" '
    'speed="13" length="100" shape="100,0 0,0"/></edge>'
    '<junction id="a" type="priority" x="0" y="0"/>'
    '<junction id="b" type="priority" x="100" y="0"/></net>'
)


def _corrupt_gz() -> bytes:
    import gzip

    raw = bytearray(gzip.compress(_NET.format(proj="!", shape="").encode(), mtime=0))
    raw[30] ^= 0xFF
    return bytes(raw)


def _truncated_fashion(root: Path) -> None:
    import gzip

    raw = root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    header = bytes([0, 0, 8, 3]) + (60000).to_bytes(4, "big") + (28).to_bytes(4, "big")
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / f"{name}.gz").write_bytes(gzip.compress(header))  # cut inside the header


def _far_trace(out: Path) -> None:
    # grid:3x3 lies near (586000, 4515000) in UTM 18N; this trace is 500 km east
    rows = ["id,time,x,y"] + [f"{i},{t},{1086000 + 10 * t},{4515000 + 50 * i}"
                              for i in range(3) for t in range(3)]
    (out.parent / "far.csv").write_text("\n".join(rows) + "\n")


def _unsigned_state(edit: tuple[str, str]) -> Callable[[Path, Path], None]:
    """A checkpoint saved without config_sha256 (older or hand-made), config then edited."""
    def setup(out: Path, src: Path) -> None:
        import torch

        shutil.copytree(src, out)
        state_path = out / "checkpoint" / "state.pt"
        state = torch.load(state_path, weights_only=True)
        state.pop("config_sha256")
        torch.save(state, state_path)
        config = out / "checkpoint" / "config.toml"
        config.write_text(config.read_text().replace(*edit))
    return setup


@dataclass
class Case:
    """One bad input: CLI arguments (``{out}``, ``{here}`` filled in) and what the line names."""

    name: str
    argv: list[str]
    names: tuple[str, ...]
    setup: Callable[..., None] | None = None


RUN = ["run", "--out", "{out}", *TINY]
CASES = [
    # 3. values that used to raise deep inside numpy/torch
    Case("step_s_inf", [*RUN, "--set", "step_s=inf"], ("'step_s' = inf", "a finite number")),
    Case("speed_inf", [*RUN, "--set", "vehicle.speed=inf"], ("'vehicle.speed'", "finite")),
    Case("beta_inf", [*RUN, "--set", "random_walk.beta=inf"],
         ("'random_walk.beta' = inf", "finite")),
    Case("seed_negative", [*RUN, "--set", "seed=-1"], ("'seed' = -1", "[0, ")),
    Case("seed_65_bits", [*RUN, "--set", f"seed={2**64}"], ("'seed'", "2**63 - 1")),
    Case("vehicles_not_int", [*RUN, "--set", "vehicles=x"], ("'vehicles'", "type int")),
    Case("lr_inf", [*RUN, "--set", "lr=inf"], ("'lr' = inf", "finite")),
    # 3./6. allocations bounded up front
    Case("step_s_huge", [*RUN, "--set", "step_s=1e15"], ("'step_s'", "at most", "contact = end")),
    Case("radius_tiny", [*RUN, "--set", "radius_m=1e-9"], ("'radius_m'", "at least")),
    Case("cell_tiny", [*RUN, "--set", "cell_m=0.001", "--set", "uavs=1"],
         ("'cell_m'", "at most 1000000 grid cells")),
    Case("vehicles_huge", [*RUN, "--set", "vehicles=10000000"], ("'vehicles'", "fits in memory")),
    # 7. validation gaps
    Case("beta_nan", [*RUN, "--set", "random_walk.beta=nan"],
         ("'random_walk.beta' = nan", "not NaN")),
    Case("rm_cells_nan", [*RUN, "--set", "dam.rm_cells=nan"], ("'dam.rm_cells'", "not NaN")),
    Case("areas_empty", [*RUN, "--set", "areas=50"], ("'areas' = 50", "at most 9")),
    Case("dam_on_vehicle", [*RUN, "--set", "vehicle.mobility=dam"],
         ("'vehicle.mobility' = 'dam'", "for vehicles")),
    Case("grid_on_pedestrian", [*RUN, "--set", "pedestrian.mobility=random_grid"],
         ("'pedestrian.mobility'", "for pedestrians")),
    Case("route_on_sensor", [*RUN, "--set", "sensor.mobility=route"],
         ("'sensor.mobility' = 'route'", "psfl_walker, static")),
    Case("walker_on_vehicle", [*RUN, "--set", "vehicle.mobility=psfl_walker"],
         ("'vehicle.mobility'", "manhattan")),
    Case("data_root_missing", [*RUN, "--set", "data_root={here}/nothing"],
         ("'data_root'", "an existing folder")),
    # issue 43: settings that model/maths also checks (there a ValueError, an internal
    # invariant) are refused by the settings themselves, before the policy's maths runs
    Case("mobility_alpha_2", [*RUN, "--set", "policy=mobility_aware", "--set",
                              "mobility_aware.alpha=2"], ("'mobility_aware.alpha' = 2", "[0, 1]")),
    Case("psfl_loss_sum", [*RUN, "--set", "policy=psfl", "--set", "psfl.loss=sum"],
         ("'psfl.loss' = 'sum'", "batch_sum, mean")),
    Case("psfl_loss_batch_0", [*RUN, "--set", "policy=psfl", "--set", "psfl.loss_batch=0"],
         ("'psfl.loss_batch' = 0", ">= 1")),
    Case("psfl_loss_batches_negative", [*RUN, "--set", "policy=psfl", "--set",
                                        "psfl.loss_batches=-1"],
         ("'psfl.loss_batches' = -1", ">= 0")),
    Case("psfl_sigma_negative", [*RUN, "--set", "policy=psfl", "--set", "psfl.sigma=-1"],
         ("'psfl.sigma' = -1", "> 0")),
    Case("cached_tau_max_0", [*RUN, "--set", "policy=cached_lru", "--set", "cached.tau_max=0"],
         ("'cached.tau_max' = 0", ">= 1")),
    Case("cache_size_negative", [*RUN, "--set", "policy=cached_lru", "--set", "cached.size=-1"],
         ("'cached.size' = -1", ">= 1")),
    Case("mofel_horizon_inf", [*RUN, "--set", "policy=mofel", "--set", "vehicle.mobility=route",
                               "--set", "mofel.horizon=inf"], ("'mofel.horizon' = inf", "finite")),
    Case("mofel_max_clients_negative", [*RUN, "--set", "policy=mofel", "--set",
                                        "vehicle.mobility=route", "--set",
                                        "mofel.max_clients=-1"],
         ("'mofel.max_clients' = -1", ">= 0")),
    Case("mofel_train_time_0", [*RUN, "--set", "policy=mofel", "--set", "vehicle.mobility=route",
                                "--set", "mofel.train_time_min_fraction=0"],
         ("'mofel.train_time_min_fraction' = 0", "(0, 1]")),
    # --config that is not a TOML file
    Case("config_binary", [*RUN, "--config", "{here}/bin.toml"], ("'--config'", "binary"),
         lambda out: (out.parent / "bin.toml").write_bytes(b"\x00\xff\xfe\x01")),
    Case("config_folder", [*RUN, "--config", "{here}/conf"], ("'--config'", "folder"),
         lambda out: (out.parent / "conf").mkdir()),
    # 2. outputs that cannot be written, found before step 1
    Case("out_is_file", [*RUN], ("'--out'", "this is a file"),
         lambda out: out.write_text("x")),
    Case("out_under_file", ["run", "--out", "{here}/afile/out", *TINY], ("'--out'", "is a file"),
         lambda out: (out.parent / "afile").write_text("x")),
    Case("out_not_empty", [*RUN], ("'--out'", "--force"),
         lambda out: (out.mkdir(), (out / "mine.txt").write_text("x"))),
    Case("checkpoint_every_0", [*RUN, "--checkpoint-every", "0"], ("'--checkpoint-every'",)),
    # datasets: the way to get them, in one line
    Case("dataset_missing", [*RUN, "--set", "learning=true", "--set", "dataset=cifar10"],
         ("dataset 'cifar10' needs data_root", "cifar-10-batches-py")),
    Case("dataset_corrupt", [*RUN, "--set", "learning=true", "--set", "dataset=fashion_mnist",
                             "--set", "data_root={here}/data"], ("cannot be read", ".gz"),
         lambda out: _bad_fashion(out.parent / "data")),
    # report of a damaged run
    Case("report_corrupt_csv", ["report", "{out}"], ("'report file'", "model.csv"),
         lambda out: (out.mkdir(), (out / "model.csv").write_bytes(b'step,a\n"x,1\n\x00\xff'))),
    # sweeps
    Case("sweep_replicates", ["sweep", "{here}/s.toml", "--out", "{out}", "--quiet"],
         ("'replicates' = 1000000000", "at most"),
         lambda out: (out.parent / "s.toml").write_text(
             "replicates = 1000000000\n[base]\nmap = 'grid:3x3'\nlearning = false\n")),
    Case("sweep_grid_runs", ["sweep", "{here}/s.toml", "--out", "{out}", "--quiet"],
         ("'grid x replicates'", "at most 100000 runs"),
         lambda out: (out.parent / "s.toml").write_text(
             "replicates = 1000\n[base]\nlearning = false\n[grid]\nlr = ["
             + ", ".join(str(0.001 * (i + 1)) for i in range(200)) + "]\n")),
    Case("sweep_binary", ["sweep", "{here}/s.toml", "--out", "{out}"], ("'sweep file'", "binary"),
         lambda out: (out.parent / "s.toml").write_bytes(b"\xff\xfe\x00")),
    Case("sweep_out_is_file", ["sweep", "{here}/s.toml", "--out", "{out}", "--quiet"],
         ("'--out'", "this is a file"),
         lambda out: ((out.parent / "s.toml").write_text("[base]\nlearning = false\n"),
                      out.write_text("x"))),
    Case("sweep_seeds_negative", ["sweep", "{here}/s.toml", "--out", "{out}", "--quiet"],
         ("'seeds'", "[0, "), lambda out: (out.parent / "s.toml").write_text("seeds = [-1, 2]\n")),
    Case("resume_no_folder", ["run", "--resume", "{out}", "--quiet"],
         ("'--resume'", "an existing run folder")),
    # issue 23: readers that check a file whole
    Case("graphml_cut_in_half", [*RUN, "--set", "map={here}/half.graphml"],
         ("'map'", "half.graphml", "cut short"), _write("half.graphml", _half_graphml)),
    Case("osm_one_closed_way", [*RUN, "--set", "map={here}/ring.osm"], ("'map'", "ring.osm"),
         _write("ring.osm", '<?xml version="1.0"?><osm version="0.6">'
                '<node id="1" lat="40.7" lon="-73.9"/><node id="2" lat="40.71" lon="-73.9"/>'
                '<node id="3" lat="40.71" lon="-73.91"/><way id="5"><nd ref="1"/><nd ref="2"/>'
                '<nd ref="3"/><nd ref="1"/><tag k="highway" v="residential"/></way></osm>')),
    Case("osm_missing_node", [*RUN, "--set", "map={here}/cut.osm"],
         ("'map'", "every node its ways use"),
         _write("cut.osm", '<?xml version="1.0"?><osm version="0.6">'
                '<node id="1" lat="40.7" lon="-73.9"/><way id="5"><nd ref="1"/><nd ref="2"/>'
                '<tag k="highway" v="residential"/></way></osm>')),
    Case("geojson_latitude_95", [*RUN, "--set", "map={here}/north.geojson"],
         ("'map'", "latitude [-90, 90]", "95"),
         _write("north.geojson", '{"type": "FeatureCollection", "features": [{"type": "Feature",'
                ' "properties": {}, "geometry": {"type": "LineString", "coordinates": '
                '[[-73.9, 95.0], [-73.91, 40.7]]}}]}')),
    Case("sumo_corrupt_gzip", [*RUN, "--set", "map={here}/bad.net.xml.gz"],
         ("'map'", "SUMO network"), _write("bad.net.xml.gz", _corrupt_gz)),
    Case("sumo_shape_not_numeric", [*RUN, "--set", "map={here}/shape.net.xml"],
         ("'map'", "shapes"),
         _write("shape.net.xml", _NET.format(proj="!", shape=' shape="0,0 5,abc 100,0"'))),
    Case("sumo_nonsense_projection", [*RUN, "--set", "map={here}/proj.net.xml"],
         ("'map'", "projParameter", "+proj=nonsense"),
         _write("proj.net.xml", _NET.format(proj="+proj=nonsense", shape=""))),
    Case("idx_cut_short", [*RUN, "--set", "learning=true", "--set", "dataset=fashion_mnist",
                           "--set", "data_root={here}/data"], ("idx", "cut short"),
         lambda out: _truncated_fashion(out.parent / "data")),
    # bounds that follow the machine
    Case("workers_over_cores", [*RUN, "--set", "workers=100"], ("'workers' = 100", "cores")),
    Case("trace_500_km_away", [*RUN, "--set", "vehicle.mobility=trace",
                               "--set", "trace.file={here}/far.csv"],
         ("'trace.file'", "outside", "trace.outside = clip"), _far_trace),
    Case("old_and_new_name", [*RUN, "--set", "cache_size=3", "--set", "cached.size=7"],
         ("cache_size", "cached.size", "one name per setting")),
    Case("two_presets", [*RUN, "--preset", "mofel_002", "--set", "preset=psfl_004"],
         ("'preset'", "mofel_002", "psfl_004", "one preset per run")),
    Case("huge_value_shortened", [*RUN, "--set", "map=" + "x" * 100_000], ("'map'", "characters")),
    Case("reproduce_seeds_huge", ["reproduce", "mobility_000", "--seeds", "1000000000",
                                  "--out", "{out}"], ("'--seeds'", "[1, 100000]")),
    Case("reproduce_seeds_over_runs", ["reproduce", "mobility_000", "--seeds", "100000",
                                       "--out", "{out}"], ("'--seeds'", "variants")),
    Case("reproduce_processes_negative", ["reproduce", "mobility_000", "--processes", "-1",
                                          "--out", "{out}"], ("'--processes'", ">= 0")),
    Case("reproduce_bad_flag", ["reproduce", "mobility_000", "--seeds", "x", "--out", "{out}"],
         ("--seeds", "invalid int value", "mobidfl reproduce --help")),
    Case("reproduce_missing_out", ["reproduce", "mobility_000"],
         ("--out", "required", "mobidfl reproduce --help")),
    Case("sweep_bad_flag", ["sweep", "{here}/s.toml", "--out", "{out}", "--processes", "two"],
         ("--processes", "invalid int value", "mobidfl sweep --help")),
    Case("sweep_missing_map", ["sweep", "{here}/s.toml", "--out", "{out}", "--quiet"],
         ("'map'", "nothing.graphml", "an existing, readable map file"),
         lambda out: (out.parent / "s.toml").write_text(
             f"replicates = 2\n[base]\nmap = '{out.parent}/nothing.graphml'\nlearning = false\n"
             "vehicles = 2\npedestrians = 0\nsensors = 0\nuavs = 0\nsteps = 1\n")),
]
RESUME_CASES = [
    Case("state_empty", ["run", "--resume", "{out}", "--quiet"], ("'checkpoint file'", "empty"),
         _state(lambda p: p.write_bytes(b""))),
    Case("state_truncated", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint file'", "truncated"),
         _state(lambda p: p.write_bytes(p.read_bytes()[:300]))),
    Case("state_foreign", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint file'", "other torch file"), _state(_foreign)),
    Case("state_malicious", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint file'", "refused unread"), _state(_malicious)),
    Case("state_missing", ["run", "--resume", "{out}", "--quiet"],
         ("'--resume'", "state.pt is missing", "--force"),
         _state(lambda p: p.unlink())),
    Case("config_changed", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint config'", "config.toml", "changed"), _edit_config("seed = 0", "seed = 7")),
    Case("config_invalid", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint config'", "checkpoint/config.toml", "'seed' = -3"),
         _edit_config("seed = 0", "seed = -3")),
    Case("no_checkpoint", ["run", "--resume", "{out}", "--quiet"], ("'--resume'", "checkpoint/"),
         lambda out, src: (shutil.copytree(src, out), shutil.rmtree(out / "checkpoint"))),
    Case("no_config_sha_and_edited", ["run", "--resume", "{out}", "--quiet"],
         ("'checkpoint file'", "config_sha256"), _unsigned_state(("seed = 0", "seed = 7"))),
]


def test_each_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, checkpointed):
    # Prepare: one folder per case (its --out and anything beside it), snapshotted
    cases, folders = [], []
    for index, case in enumerate(CASES + RESUME_CASES):
        here = tmp_path / f"c{index:02d}"
        here.mkdir()
        out = here / "out"
        if case.setup is not None:
            if case in RESUME_CASES:
                case.setup(out, checkpointed)
            else:
                case.setup(out)
        argv = [a.replace("{out}", str(out)).replace("{here}", str(here)) for a in case.argv]
        cases.append({"argv": argv, "cwd": str(here), "stderr": str(tmp_path / f"e{index}.txt")})
        folders.append((case, here, snapshot(here)))
    # Execute
    codes = run_cli_cases(cases)
    # Assert
    for (case, here, before), code, spec in zip(folders, codes, cases, strict=True):
        err = Path(spec["stderr"]).read_text()
        lines = err.splitlines()
        assert code == 2, (case.name, code, err[-2000:])
        assert len(lines) == 1, (case.name, err[-2000:])
        assert lines[0].startswith("mobidfl: error: "), (case.name, lines[0])
        assert len(lines[0]) < 1000, (case.name, len(lines[0]))  # huge values shortened
        assert "Traceback" not in err and "weights_only=False" not in err, case.name
        for fragment in case.names:
            assert fragment in lines[0], (case.name, fragment, lines[0])
        after = snapshot(here)
        assert after == before, (case.name, set(after) ^ set(before))
    assert not list(tmp_path.rglob("PWNED")), "the malicious checkpoint ran code"


def test_the_real_entry_point_gives_the_same_line(tmp_path):
    # Prepare: a case found before torch is imported (the table covers the others)
    runs = [(["--set", "step_s=inf"], "'step_s' = inf"),
            (["--set", "seed=-1"], "'seed' = -1")]
    for extra, fragment in runs:
        out = tmp_path / "out"
        # Execute
        proc = subprocess.run([sys.executable, "-m", "mobidfl.analysis.cli", "run", "--out",
                               str(out), *TINY, *extra], check=False, cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=300)
        # Assert
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and fragment in proc.stderr, proc.stderr
        assert not out.exists() and not list(tmp_path.iterdir())


def test_read_only_out_is_refused_before_step_1(tmp_path):
    # Prepare: a read-only folder (root ignores permission bits: then /sys, read-only here)
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.access(parent, os.W_OK):
        parent = Path("/sys")
        if os.access(parent, os.W_OK) and os.geteuid() != 0:
            pytest.skip("no read-only folder available")
    out = parent / "mobidfl-out-test"
    try:
        # Execute
        code = main(["run", "--out", str(out), *TINY])
    finally:
        (tmp_path / "ro").chmod(stat.S_IRWXU)
    # Assert
    assert code == 2
    assert not out.exists()


def test_python_api_with_wrong_types_raises_config_error():
    from mobidfl.model.world import MobiDFLModel

    # Execute / Assert: the same ConfigError as the CLI, before any map is read
    for settings, name in [({"vehicles": "x"}, "vehicles"), ({"map": 3}, "map"),
                           ({"step_s": [1.0]}, "step_s"), ({"vehicle_speed": None}, "speed"),
                           ({"seed": -5}, "seed"), ({"beta": float("nan")}, "beta")]:
        with pytest.raises(ConfigError, match=name):
            MobiDFLModel(**settings)


def test_every_mobility_declares_the_kinds_it_fits():
    from mobidfl.agents.mobility import MOBILITY_MODELS
    from mobidfl.model.config import KINDS, Config

    # Assert: declared, non-empty, known kinds; the defaults fit; paper constraints hold
    for name, model in MOBILITY_MODELS.items():
        assert model.kinds and model.kinds <= set(KINDS), name
    for kind in KINDS:
        assert kind in MOBILITY_MODELS[Config().kind(kind).mobility].kinds
    assert MOBILITY_MODELS["dam"].kinds == MOBILITY_MODELS["dcm"].kinds == {"uav"}
    assert MOBILITY_MODELS["random_grid"].kinds == {"uav"}
    assert MOBILITY_MODELS["route"].kinds == {"vehicle"}
    assert MOBILITY_MODELS["psfl_walker"].kinds == {"sensor"}
    assert Config.from_settings({"uav.mobility": "dcm", "rm_cells": float("inf")})


# --- outputs that survive -------------------------------------------------------------------------
def test_out_on_another_filesystem_succeeds(tmp_path):
    # Prepare: an --out whose filesystem differs from the working tree's temporary folder
    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem (e.g. /dev/shm) here")
    parent = other / f"mobidfl-test-{os.getpid()}"
    out = parent / "out"
    try:
        # Execute
        code = main(["run", "--out", str(out), *TINY])
        # Assert: every output, nothing hidden left beside or inside it
        assert code == 0
        assert {p.name for p in out.iterdir()} >= {"model.csv", "agents.parquet", "config.toml"}
        assert [p.name for p in parent.iterdir()] == ["out"]
        assert not list(out.glob(".mobidfl-*"))
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def test_force_clears_the_previous_run_and_its_checkpoint(tmp_path):
    # Prepare: a run with a checkpoint, and a file of the user's own in the folder
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--checkpoint-every", "1", *TINY,
                 "--set", "seed=1"]) == 0
    (out / "notes.txt").write_text("mine")
    # Execute: replace it with --force (no checkpoints), then try to resume
    assert main(["run", "--out", str(out), "--force", *TINY, "--set", "seed=2"]) == 0
    resumed = main(["run", "--resume", str(out), "--quiet"])
    # Assert: the old checkpoint is gone, so --resume cannot bring back the old run
    assert not (out / "checkpoint").exists()
    assert resumed == 2
    assert "seed = 2" in (out / "config.toml").read_text()
    assert (out / "notes.txt").read_text() == "mine"


def test_full_disk_is_refused_before_step_1(tmp_path, monkeypatch, capsys):
    from mobidfl.analysis import cli

    # Prepare: the disk reports 1 MiB free
    monkeypatch.setattr(cli.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 2**20, 2**20))
    out = tmp_path / "out"
    # Execute
    code = main(["run", "--out", str(out), "--checkpoint-every", "1", *TINY])
    # Assert
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1 and "'--out'" in err[0] and "free" in err[0]
    assert not out.exists()


def test_a_world_too_big_for_memory_is_refused_for_memory_even_on_a_full_disk(
        tmp_path, monkeypatch, capsys):
    from mobidfl.analysis import cli

    # Prepare: the disk reports 1 MiB free, so the outputs would not fit either
    monkeypatch.setattr(cli.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 2**20, 2**20))
    out = tmp_path / "out"
    # Execute
    code = main(["run", "--out", str(out), *TINY, "--set", "vehicles=10000000"])
    # Assert: the refusal names the world's size, not this machine's disk
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    assert "'vehicles'" in err[0] and "fits in memory" in err[0], err[0]
    assert not out.exists()


def test_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path, monkeypatch, capsys):
    from mobidfl.model import checkpoint

    # Prepare: the second checkpoint write fails half-way as on a full disk
    real_save, calls = checkpoint.torch.save, []

    def save(obj, fh):
        calls.append(1)
        if len(calls) == 2:
            fh.write(b"partial")
            raise OSError(28, "No space left on device")
        real_save(obj, fh)

    monkeypatch.setattr(checkpoint.torch, "save", save)
    out = tmp_path / "out"
    # Execute
    code = main(["run", "--out", str(out), "--checkpoint-every", "1",
                 *[a if a != "steps=2" else "steps=3" for a in TINY]])
    err = capsys.readouterr().err.splitlines()
    monkeypatch.undo()
    # Assert: one line that says what is kept; the step-1 checkpoint resumes to the end
    assert code == 1 and len(err) == 1, err
    assert "No space left" in err[0] and "step 1" in err[0] and "--resume" in err[0]
    assert not list((out / "checkpoint").glob(".mobidfl-*"))
    assert main(["run", "--resume", str(out), "--quiet"]) == 0
    assert (out / "model.csv").read_text().count("\n") == 5  # header + steps 0..3


def test_interrupt_while_writing_outputs_leaves_no_hidden_folder(tmp_path, monkeypatch, capsys):
    from mobidfl.analysis import gis

    # Prepare: Ctrl-C arrives while the GIS layers are written (the last output)
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gis, "write_gis", interrupted)
    parent = tmp_path / "parent"
    out = parent / "out"
    # Execute
    code = main(["run", "--out", str(out), *TINY])
    # Assert
    err = capsys.readouterr().err.splitlines()
    assert code == 130 and len(err) == 1 and "interrupted while writing" in err[0]
    assert [p.name for p in parent.iterdir()] == ["out"]
    assert list(out.iterdir()) == []


def test_checkpoint_and_sweep_files_follow_the_umask(tmp_path):
    from mobidfl.analysis.sweep import Sweep, run_sweep

    # Prepare: a umask that differs from mkstemp's 0600
    old = os.umask(0o027)
    try:
        # Execute
        out = tmp_path / "run"
        assert main(["run", "--out", str(out), "--checkpoint-every", "1", *TINY]) == 0
        sweep = Sweep.from_dict({"base": {"map": "grid:3x3", "learning": False, "steps": 1,
                                          "vehicles": 2, "pedestrians": 0, "sensors": 0,
                                          "uavs": 0}})
        run_sweep(sweep, tmp_path / "sweep", processes=0, progress=False)
    finally:
        os.umask(old)
    # Assert
    files = [out / "checkpoint" / "state.pt", out / "checkpoint" / "config.toml",
             out / "model.csv", tmp_path / "sweep" / "manifest.csv",
             *(tmp_path / "sweep" / "runs").glob("*.parquet")]
    assert len(files) == 5
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path


def test_local_ray_listens_on_loopback_only(monkeypatch):
    import types

    from mobidfl.analysis import executors
    from mobidfl.model.ray_local import SINGLE_MACHINE_ENV

    monkeypatch.setenv(SINGLE_MACHINE_ENV, "1")  # restored after: init_ray sets it

    # Prepare: a stand-in for the ray module that records how it is started
    calls: list[dict] = []
    fake = types.SimpleNamespace(
        is_initialized=lambda: False, init=lambda **kw: calls.append(kw),
        shutdown=lambda: None, remote=lambda f: types.SimpleNamespace(options=lambda **kw: f))
    monkeypatch.setitem(sys.modules, "ray", fake)
    # Execute: no runs to do, only start and stop
    executors.run_ray([], lambda r: None, address=None, resources={"num_cpus": 1})
    executors.run_ray([], lambda r: None, address="ray://head:10001",
                      resources={"num_cpus": 1})
    # Assert
    assert calls[0]["_node_ip_address"] == "127.0.0.1"
    assert "_node_ip_address" not in calls[1] and calls[1]["address"] == "ray://head:10001"


_RAY_SOCKETS = textwrap.dedent(
    """
    import json, psutil, ray
    from mobidfl.model.ray_local import init_ray
    init_ray(ray, address=None, num_cpus=1, log_to_driver=False)
    try:
        me = psutil.Process()
        found = set()
        for proc in [me, *me.children(recursive=True)]:
            try:
                for conn in proc.net_connections(kind="inet"):
                    if conn.status == psutil.CONN_LISTEN:
                        found.add((proc.name(), conn.laddr.ip, conn.laddr.port))
            except psutil.Error:
                pass
    finally:
        ray.shutdown()
    print(json.dumps(sorted(found)))
    """
)


@pytest.mark.ray
def test_a_local_ray_start_opens_no_socket_outside_loopback():
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install -e '.[ray]')")
    pytest.importorskip("psutil", reason="psutil lists the sockets (installed with Ray)")
    # Execute: start a local Ray as sweeps and training workers do; list what listens
    proc = subprocess.run([sys.executable, "-c", _RAY_SOCKETS], check=False, cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    listening = json.loads(proc.stdout.strip().splitlines()[-1])
    # Assert: Ray's servers were seen (GCS, raylet, ...), each on the loopback only
    names = {name for name, _, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening
    loopback = ("127.0.0.1", "::1", "::ffff:127.0.0.1")
    outside = [s for s in listening if s[1] not in loopback]
    assert not outside, outside


def test_a_map_that_cannot_be_read_says_read_not_write(tmp_path, monkeypatch, capsys):
    # Prepare: a map file whose read fails as without read permission (root reads anyway,
    # so the failure is made by the open the reader calls)
    path = tmp_path / "locked.graphml"
    path.write_text("<graphml/>")
    real_open = Path.open

    def locked(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", locked)
    # Execute
    code = main(["run", "--out", str(tmp_path / "out"), *TINY, "--set", f"map={path}"])
    # Assert
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    assert "'map'" in err[0] and "cannot read it: Permission denied" in err[0], err[0]
    assert "write" not in err[0]


def test_ctrl_c_in_reproduce_says_what_is_saved_and_how_to_resume(tmp_path):
    # Prepare: a reproduction of many short runs, stopped after its first finished run
    out = tmp_path / "out"
    args = ["reproduce", "mobility_000", "--seeds", "10", "--processes", "0", "--out", str(out),
            "--variants", "p=0", "--set", "steps=2", "--set", "learning=false", "--quiet"]
    proc = _start(args)
    _wait_for(lambda: list(out.glob("runs/*/runs/*.parquet")), proc)
    # Execute
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    saved = len(list(out.glob("runs/*/runs/*.parquet")))
    # Assert: one line with the count and the command that resumes
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "interrupted before step 1" not in err
    assert f"interrupted: {saved} of " in err and "runs are saved in" in err, err
    assert (f"resume with: mobidfl reproduce mobility_000 --out {out} --scale small "
            "--seeds 10 --first-seed 0 --processes 0 --variants p=0 --set steps=2 "
            "--set learning=false") in err, err


# --- Ctrl-C and kill ------------------------------------------------------------------------------
SLOW = ["--set", "map=grid:3x3", "--set", "learning=false", "--set", "vehicles=3",
        "--set", "pedestrians=0", "--set", "sensors=0", "--set", "uavs=0",
        "--set", "steps=100000", "--quiet"]


def _start(args: list[str]) -> subprocess.Popen:
    """The CLI in its own session, with SIGINT's default action as under a terminal: a test
    runner started in the background inherits SIGINT as ignored, and so would the CLI."""
    return subprocess.Popen([sys.executable, "-m", "mobidfl.analysis.cli", *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509 - no other way to reset SIGINT in the child


def _wait_for(path_glob: Callable[[], list], proc: subprocess.Popen, timeout: float = 150):
    deadline = time.monotonic() + timeout
    while not path_glob() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path_glob(), f"nothing appeared: {proc.poll()} {proc.stderr.read()[-2000:]}"


def test_ctrl_c_in_run_says_what_was_saved_and_resume_finishes(tmp_path):
    # Prepare: a long run with a checkpoint every 50 steps
    out = tmp_path / "out"
    proc = _start(["run", "--out", str(out), "--checkpoint-every", "50", *SLOW])
    _wait_for(lambda: list(out.glob("checkpoint/state.pt")), proc)
    # Execute
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # Assert
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("mobidfl: interrupted at step ")
    assert f"resume with: mobidfl run --resume {out}" in err
    import torch

    saved = torch.load(out / "checkpoint" / "state.pt", weights_only=True)["steps"]
    assert f"checkpoint at step {saved} " in err and saved % 50 == 0


def _sweep_file(folder: Path, runs: int) -> Path:
    path = folder / "sweep.toml"
    path.write_text(f"replicates = {runs}\n[base]\nmap = 'grid:3x3'\nlearning = false\n"
                    "vehicles = 3\npedestrians = 0\nsensors = 0\nuavs = 0\nsteps = 20\n")
    return path


@pytest.mark.parametrize(("sig", "processes"), [(signal.SIGINT, "2"), (signal.SIGKILL, "0")],
                         ids=["SIGINT-pool", "SIGKILL"])
def test_interrupted_or_killed_sweep_resumes_the_rest(tmp_path, sig, processes):
    from mobidfl.analysis.sweep import read_manifest

    # Prepare: a sweep of 8 runs, stopped after its first finished run; Ctrl-C goes to the
    # whole process group (driver and pool workers) as a terminal sends it
    out = tmp_path / "out"
    proc = _start(["sweep", str(_sweep_file(tmp_path, 8)), "--out", str(out),
                   "--processes", processes, "--quiet"])
    _wait_for(lambda: list(out.glob("runs/*.parquet")), proc)
    # Execute
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    saved = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.parquet")}
    # Assert: one line on Ctrl-C; either way the finished runs are kept and resume does the rest
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"{len(saved)} of 8 runs are saved in {out}" in err
        assert f"resume with: mobidfl sweep --resume --out {out}" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    assert 1 <= len(saved) < 8
    assert main(["sweep", "--resume", "--out", str(out), "--processes", "0", "--quiet"]) == 0
    assert (read_manifest(out)["status"] == "ok").all()
    for name, stamp in saved.items():
        assert (out / "runs" / name).stat().st_mtime_ns == stamp


def test_memory_check_counts_cached_dfl_caches_before_step_1():
    import mobidfl.model.world  # noqa: F401 - registers the policies
    from mobidfl.model.bounds import check_memory, estimate_memory_bytes, held_model_copies
    from mobidfl.model.config import Config

    # Prepare: 2,000 cars with the MLP (101,770 parameters); Cached-DFL caches C = 10 models
    cached = Config.from_settings({"preset": "cached_dfl_003", "vehicles": 2000,
                                   "model": "mlp", "steps": 3}).validated()
    no_cache = cached.updated(policy="defedavg").validated()
    # Execute
    copies = held_model_copies(cached), held_model_copies(no_cache)
    need = estimate_memory_bytes(cached), estimate_memory_bytes(no_cache)
    # Assert: shared snapshots count once: per car its own snapshot plus the cached ones of
    # the last tau_max - 1 = 4 epochs (not C_max = 10 copies; assigned models are computed
    # one at a time, so they add no copy per car), ~0.4 MB each
    assert copies == (2000 * (1 + 4), 0)
    assert need[0] - need[1] == 4 * 101_770 * 10_000
    # a machine with 4 GiB free runs the plain fleet but refuses the cached one, naming
    # vehicles and how many would fit, before any agent exists
    check_memory(no_cache, available=4 * 1024**3)
    with pytest.raises(ConfigError) as info:
        check_memory(cached, available=4 * 1024**3)
    assert info.value.setting == "vehicles" and "fits in memory" in str(info.value)
    assert f"at most about {4 * 1024**3 // (need[0] // 2000)} vehicles" in str(info.value)


def test_a_run_too_long_to_record_is_refused_naming_steps_not_a_fleet():
    from mobidfl.model.bounds import RECORD_BYTES, check_memory, estimate_memory_bytes
    from mobidfl.model.config import Config

    # Prepare: a small fleet, 1e12 steps: its agent rows alone exceed the memory
    config = Config.from_settings({"vehicles": 10, "pedestrians": 0, "sensors": 0,
                                   "uavs": 0, "steps": 10**12}).validated()
    available = 4 * 1024**3
    without_rows = estimate_memory_bytes(config) - 10 * RECORD_BYTES * 10**12
    # Execute
    with pytest.raises(ConfigError) as info:
        check_memory(config, available=available)
    # Assert: steps is named, with the most steps that would fit
    fits = (available - without_rows) // (10 * RECORD_BYTES)
    assert info.value.setting == "steps" and info.value.value == 10**12
    assert f"at most about {fits} steps" in str(info.value)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the lost one
def test_ctrl_c_lost_inside_a_finaliser_still_stops_the_run_at_the_next_step():
    from mobidfl.analysis.interrupts import CtrlC

    class Finaliser:
        def __del__(self):  # Ctrl-C lands while Python runs a finaliser
            os.kill(os.getpid(), signal.SIGINT)

    # Prepare: Python's own Ctrl-C handler, as in a terminal (a background test runner may
    # have inherited SIGINT as ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # Execute
        with CtrlC() as ctrl_c:
            Finaliser()  # the KeyboardInterrupt raised in __del__ is printed and ignored
            lost_but_remembered = ctrl_c.pressed
            with pytest.raises(KeyboardInterrupt):
                ctrl_c.check()  # what the run's step callback calls after every step
        restored = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, inherited)
    # Assert: remembered, raised at the step boundary, and the old handler is back
    assert lost_but_remembered
    assert restored is signal.default_int_handler
