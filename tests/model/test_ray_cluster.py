"""A real multi-node Ray cluster on this machine: a head and two worker nodes on 127.0.0.1.

``ray.cluster_utils.Cluster`` starts real raylets (one CPU each, a small object store), as
Ray's own fault-tolerance tests do. On it: a sweep gives the local-process tables bit for
bit; a worker node killed under a running run is survived (the run is sent again, the
manifest says so); a run's training workers spread over two nodes with unchanged numbers;
a run no node can hold is refused before any run; the head going away stops the sweep with one line
and a folder that resumes to the same tables; every Ray server listens on the loopback only.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install -e '.[ray]')")
psutil = pytest.importorskip("psutil", reason="psutil lists sockets and processes (with Ray)")

from mobidfl.analysis.sweep import Sweep, load_runs, read_manifest, run_sweep  # noqa: E402 - after the optional extras are found

ROOT = Path(__file__).resolve().parents[2]
NODE = {"node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20,
        "include_dashboard": False}
FAST_FAILURE = {  # the GCS declares a silent node dead in ~1.5 s, not 30 s (Ray defaults)
    "RAY_health_check_initial_delay_ms": "500", "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500", "RAY_health_check_failure_threshold": "2",
    # the machine's memory is other processes' too: Ray's OOM killer (95 % of the machine
    # in use) must not kill this test's tiny workers for them
    "RAY_memory_monitor_refresh_ms": "0",
}
WORLD = {"map": "grid:4x4:100", "vehicles": 4, "pedestrians": 0, "sensors": 0, "uavs": 0,
         "dataset": "digits", "model": "mlp", "steps": 2, "local_steps": 1, "batch_size": 8,
         "test_size": 40, "vehicle": {"mobility": "random_walk"}}
# runs of ~1.6 s on an idle machine (150 cheap steps; longer beside other tests): a node
# killed, or the head removed, after the first finished run must find runs still running or
# waiting. A node's second run is the kill window; the test polls every 0.05 s
SWEEP = {"replicates": 2, "base": {**WORLD, "steps": 150}, "grid": {"policy": ["dpsgd", "local"]}}
KEY = ["run_id", "step"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _toml(data: dict, prefix: str = "") -> str:
    """A tiny TOML writer for the sweep above (tables last)."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append(_toml(value, f"{prefix}{key}."))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    head = [f"[{prefix[:-1]}]"] if prefix else []
    return "\n".join(head + lines + [""] + tables)


def _forget(address: str) -> None:
    """Remove this cluster from Ray's "current cluster" file: ``Cluster`` writes it, and a
    plain ``ray.init()`` anywhere on the machine (another test, another job) would then
    join this test's cluster instead of starting its own. Every driver here names the
    address."""
    try:
        from ray._common.utils import get_ray_address_file  # Ray's own, no public API
    except ImportError:
        return
    path = Path(get_ray_address_file(None))
    if path.is_file() and path.read_text().strip() == address:
        path.unlink()


def _start_cluster() -> tuple[object, list, str]:
    """Head (no CPU: runs go to the workers) + two one-CPU worker nodes, loopback only."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **NODE})
    workers = [cluster.add_node(num_cpus=1, **NODE), cluster.add_node(num_cpus=1, **NODE)]
    cluster.wait_for_nodes()
    address = cluster.address  # None once the head is removed
    _forget(address)
    return cluster, workers, address


@pytest.fixture(scope="module")
def _clusters():
    """The module's one cluster at a time. A test that damages it (a node killed, the head
    removed) marks it spent, and the next test gets a new one: every test sees a whole
    cluster in any order (``make test-random``), and the file's own order starts one extra
    cluster (after the node is killed)."""
    from mobidfl.model.ray_local import local_ray_env

    saved = dict(os.environ)
    os.environ.update(FAST_FAILURE)
    local_ray_env()
    holder: dict = {"now": None, "spent": False}
    try:
        yield holder
    finally:
        if holder["now"] is not None:
            holder["now"][0].shutdown()
            _forget(holder["now"][2])
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def cluster(_clusters):
    """A whole cluster: the module's, or a new one where the last test damaged it."""
    if _clusters["now"] is None or _clusters["spent"]:
        if _clusters["now"] is not None:
            _clusters["now"][0].shutdown()
            _forget(_clusters["now"][2])
            _clusters["now"] = None
        _clusters["now"], _clusters["spent"] = _start_cluster(), False
    cl, workers, _ = _clusters["now"]
    return cl, workers


@pytest.fixture
def doomed_cluster(cluster, _clusters):
    """A whole cluster that this test damages: the next test gets a new one."""
    yield cluster
    _clusters["spent"] = True


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same sweep run locally, in this process (``processes=0``: no pool to start while
    the 2 cores also run the cluster)."""
    out = tmp_path_factory.mktemp("local") / "sweep"
    run_sweep(Sweep.from_dict(SWEEP), out, processes=0, progress=False)
    return _tables(out)


def _tables(out: Path) -> pd.DataFrame:
    return load_runs(out).sort_values(KEY).reset_index(drop=True)


def _sweep_cmd(folder: Path, address: str, *extra: str) -> list[str]:
    (folder / "sweep.toml").write_text(_toml(SWEEP))
    return [sys.executable, "-m", "mobidfl.analysis.cli", "sweep", str(folder / "sweep.toml"),
            "--out", str(folder / "out"), "--backend", "ray", "--address", address,
            "--quiet", *extra]


def _running_a_run(node) -> bool:
    """Whether one of ``node``'s Ray workers is running a sweep run now (Ray titles a
    worker process ``ray::<task>`` while it runs one, ``ray::IDLE`` between tasks)."""
    for info in node.all_processes.get("raylet", []):
        try:
            workers = psutil.Process(info.process.pid).children(recursive=True)
        except psutil.Error:
            continue
        for worker in workers:
            try:
                if any("ray::_ray_run" in part for part in worker.cmdline()):
                    return True
            except psutil.Error:
                pass
    return False


def _first_node(out: Path, nodes) -> object | None:
    """A node that finished one of the sweep's runs and is running another now: killing
    it loses a running run (on a busy machine the manifest can lag the runs, so "finished
    first" alone may name a node that has already finished everything it will get)."""
    if not (out / "manifest.csv").exists():
        return None
    done = read_manifest(out).query("status == 'ok'")["worker"]
    for node in nodes:
        if done.str.contains(f"node={node.node_id[:12]}").any() and _running_a_run(node):
            return node
    return None


def _freeze(node) -> list[psutil.Process]:
    """Stop (SIGSTOP) every process of ``node``: its raylet, object store and workers, so
    none of its runs can finish until :meth:`psutil.Process.resume`."""
    stopped = []
    for infos in node.all_processes.values():
        for info in infos:
            try:
                proc = psutil.Process(info.process.pid)
                tree = [proc, *proc.children(recursive=True)]
            except psutil.Error:
                continue
            for p in tree:
                with contextlib.suppress(psutil.Error):
                    p.suspend()
                    stopped.append(p)
    return stopped


def _wait_for(what, proc: subprocess.Popen, *, timeout: float = 300.0) -> None:
    """Poll ``what`` while the sweep ``proc`` runs (a busy 2-core box: minutes, not s)."""
    deadline = time.monotonic() + timeout
    while not what():
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended first: {proc.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what.__name__}"
        time.sleep(0.05)


def test_every_ray_server_of_the_cluster_listens_on_the_loopback_only(cluster):
    # Prepare
    cl, workers = cluster
    # Execute: every process of every node and what it listens on
    listening = set()
    for node in cl.list_all_nodes():
        for infos in node.all_processes.values():
            for info in infos:
                proc = psutil.Process(info.process.pid)
                for p in [proc, *proc.children(recursive=True)]:
                    try:
                        for conn in p.net_connections(kind="inet"):
                            if conn.status == psutil.CONN_LISTEN:
                                listening.add((p.name(), conn.laddr.ip))
                    except psutil.Error:
                        pass
    # Assert: three raylets and the GCS seen; nothing outside the loopback
    names = {name for name, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening
    assert len(cl.list_all_nodes()) == 3
    outside = [s for s in listening if s[1] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
    assert not outside, outside


_WORKERS = textwrap.dedent(
    """
    import json, sys
    import ray
    from mobidfl.model.world import MobiDFLModel
    world = json.loads(sys.argv[1])
    model = MobiDFLModel(**world, workers=2, worker_backend="ray", ray_address=sys.argv[2])
    for _ in range(world["steps"]):
        model.step()
    pool = model.learner.engine._pool  # made at the first training step
    nodes = ray.get([a.__ray_call__.remote(
        lambda self: ray.get_runtime_context().get_node_id()) for a in pool.actors])
    model.datacollector.get_model_vars_dataframe().to_parquet(sys.argv[3])  # exact floats
    print(json.dumps({"nodes": nodes}))
    """
)


def test_a_runs_training_workers_spread_over_nodes_with_the_same_numbers(cluster, tmp_path):
    # Prepare: two worker nodes (a whole cluster: the fixture replaces a damaged one)
    cl, _ = cluster
    world = {**{k: v for k, v in WORLD.items() if k != "vehicle"},
             "vehicle.mobility": "random_walk", "policy": "dpsgd", "seed": 3,
             "eval_every": 1}
    from mobidfl.model.world import MobiDFLModel

    alone = MobiDFLModel(**world, workers=1)
    for _ in range(world["steps"]):
        alone.step()
    # Execute: the same run with two Ray actors as its training workers
    table = tmp_path / "model.parquet"
    proc = subprocess.run([sys.executable, "-c", _WORKERS, json.dumps(world), cl.address,
                           str(table)],
                          check=False, cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    spread = pd.read_parquet(table)
    # Assert: one actor per worker node, the numbers of one worker
    assert len(set(out["nodes"])) == 2
    expected = alone.datacollector.get_model_vars_dataframe()
    pd.testing.assert_frame_equal(spread.reset_index(drop=True),
                                  expected.reset_index(drop=True), check_dtype=False)


def test_a_sweep_survives_a_worker_node_killed_under_a_run(doomed_cluster, reference,
                                                           tmp_path):
    # Prepare
    cl, workers = doomed_cluster
    proc = subprocess.Popen(_sweep_cmd(tmp_path, cl.address), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Execute: kill a node that finished a run (raylet, its workers, object store) while it
    # runs another. The node is frozen (SIGSTOP) first and still seen running a run, so the
    # run cannot finish between the look and the kill, however fast the CPU
    try:
        doomed, frozen = None, []

        def a_node_busy_after_a_finished_run() -> bool:
            nonlocal doomed, frozen
            doomed = _first_node(tmp_path / "out", workers)
            if doomed is None:
                return False
            frozen = _freeze(doomed)
            if _running_a_run(doomed):
                return True
            for p in frozen:  # it finished in between: let it go on, look again
                with contextlib.suppress(psutil.Error):
                    p.resume()
            doomed, frozen = None, []
            return False

        _wait_for(a_node_busy_after_a_finished_run, proc)
        cl.remove_node(doomed, allow_graceful=False)
        for p in frozen:  # a stopped worker that remove_node left holds its sockets open
            with contextlib.suppress(psutil.Error):
                p.kill()
        stdout, stderr = proc.communicate(timeout=400)
    finally:
        proc.kill()
    manifest = read_manifest(tmp_path / "out")
    # Assert: every run ok, the lost one sent again, tables as on local processes
    assert proc.returncode == 0, stderr[-2000:]
    assert (manifest["status"] == "ok").all() and (manifest["backend"] == "ray").all()
    retried = manifest[manifest["attempts"] > 1]
    assert len(retried) >= 1, manifest[["run_id", "attempts", "retried"]]
    assert retried["retried"].str.startswith("attempt 1: ").all()
    nodes = manifest["worker"].str.extract(r"node=(\w+)")[0]
    assert nodes.nunique() == 2  # runs went to both worker nodes before one was lost
    assert manifest["worker"].str.endswith('{"CPU": 1.0}').all()  # what each run was granted
    pd.testing.assert_frame_equal(_tables(tmp_path / "out"), reference)


def test_a_run_no_node_can_hold_is_refused_in_one_line_before_any_run(cluster, tmp_path):
    # Prepare: one-CPU nodes without GPUs, a few GB of memory each
    cl, _ = cluster
    (tmp_path / "sweep.toml").write_text(_toml(SWEEP))
    asks = {"gpu": ["--gpus-per-run", "1"], "cpus": ["--cpus-per-run", "2"],
            "memory": ["--memory-per-run", "1e15"]}
    # Execute: the three drivers at once (each is mostly its start-up)
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "mobidfl.analysis.cli", "sweep", str(tmp_path / "sweep.toml"),
             "--out", str(tmp_path / name), "--backend", "ray", "--address", cl.address,
             "--quiet", *ask], cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        for name, ask in asks.items()
    }
    done = {name: (proc, proc.communicate(timeout=400)[1]) for name, proc in started.items()}
    # Assert: one line each naming what the nodes have; no manifest, no run started
    for name, (proc, stderr) in done.items():
        lines = stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (name, stderr[-2000:])
        assert "what one node of the cluster has (nodes: CPU" in lines[0]
        assert not (tmp_path / name / "manifest.csv").exists()


def test_the_head_going_away_stops_the_sweep_in_one_line_and_it_resumes(doomed_cluster,
                                                                        reference, tmp_path):
    # Prepare
    cl, workers = doomed_cluster
    proc = subprocess.Popen(_sweep_cmd(tmp_path, cl.address), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = tmp_path / "out"

    def one_run_saved() -> bool:
        return any((out / "runs").glob("*.parquet")) if (out / "runs").is_dir() else False

    # Execute: the head (GCS, its raylet) goes away after the first finished run. The worker
    # nodes are frozen (SIGSTOP) first, so no other run can finish while the head goes: the
    # verdict waits on events (a run saved, the nodes stopped), not on how fast runs are
    # (a fast CPU once finished every run before the head was gone)
    frozen: list[psutil.Process] = []
    try:
        _wait_for(one_run_saved, proc)
        for node in workers:
            frozen += _freeze(node)
        cl.remove_node(cl.head_node, allow_graceful=False)
        _, stderr = proc.communicate(timeout=400)
    finally:
        proc.kill()
        for p in frozen:
            with contextlib.suppress(psutil.Error):
                p.resume()
    manifest = read_manifest(out)
    saved = manifest[manifest["status"] == "ok"]
    resumed = run_sweep(Sweep.from_toml(out / "sweep.toml"), out, resume=True, processes=0,
                        progress=False)  # in this process, as the reference
    # Assert: one line naming the head and how to resume; finished runs readable; resumed
    lines = stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, stderr[-3000:]
    assert "head" in lines[0] and "mobidfl sweep --resume --out" in lines[0]
    assert 1 <= len(saved) < len(manifest)
    assert (resumed["status"] == "ok").all()
    pd.testing.assert_frame_equal(_tables(out), reference)
