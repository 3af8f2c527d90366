"""How many CPU cores a run may use, and which CPU: one home for what the code asks of it.

* :func:`usable_cores`: the cores this process may run on (its affinity), the ceiling for
  any setting that counts workers;
* :func:`unloaded_cores`: usable cores minus the 1-minute load average, for sizing a sweep's
  pool of whole runs (slow to change, so the load average is the right clock);
* :func:`idle_cores`: the idle share of the machine measured over a short window, for
  deciding at a run's start whether training workers would find a free core;
* :func:`cpu_model`: the CPU's name, which every speed figure (a bench's record, a
  benchmark's printout) states beside its numbers;
* :func:`machine_record`: that name with the platform, the cores, the load, the GPU, the
  ``nice`` level, the CPU's numeric flags (:func:`cpu_flags`) and torch's threads and ISA
  (:func:`torch_record`), as a bench's manifest and a reproduction's ``machine.json`` keep it;
* :func:`source_commit` and :func:`package_versions`: the code and the libraries a result
  was made with, beside the machine in the same records.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Any

__all__ = [
    "cpu_flags",
    "cpu_model",
    "idle_cores",
    "load_average",
    "machine_record",
    "package_versions",
    "source_commit",
    "source_state",
    "torch_record",
    "unloaded_cores",
    "usable_cores",
]

RECORDED_PACKAGES = ("mobidfl", "torch", "numpy", "scipy", "pandas", "mesa", "mesa-geo")
"""The libraries whose versions a record keeps (they decide the numbers)."""


def cpu_model() -> str:
    """The CPU's model name, with its family and model numbers where the kernel gives them.

    A virtual machine often names only the vendor's line ("AMD EPYC"); the family and model
    numbers tell its generations apart (AMD family 25 model 1 is Zen 3, model 17 Zen 4;
    family 26 is Zen 5), and a speed figure or a float's last bits depend on them.

    Returns
    -------
    str
        The first ``model name`` of ``/proc/cpuinfo``, followed by ``(family F, model M)``
        when its ``cpu family`` and ``model`` lines are there; where there is no model name
        (not Linux), what :func:`platform.processor` says, else ``"unknown"``.
    """
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model") and key not in fields:
                fields[key] = value.strip()
            if not line.strip() and fields:  # the first processor's block is enough
                break
    except OSError:
        pass
    name = fields.get("model name")
    if not name:
        return platform.processor() or "unknown"
    if fields.get("cpu family") and fields.get("model"):
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


NUMERIC_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512")
"""The CPU flags that change which kernels torch and BLAS pick, hence a float's last bits
(``avx512`` stands for every ``avx512*`` flag)."""


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The CPU's flags among :data:`NUMERIC_FLAGS` (every ``avx512*`` one), sorted.

    WHY: one full-batch run grows a last-bit difference into points over many rounds, and
    which bits come out depends on the vector units the kernels use (AVX2 vs AVX-512).

    Parameters
    ----------
    cpuinfo
        The text of ``/proc/cpuinfo`` (read when ``None``).

    Returns
    -------
    list of str
        Empty where the kernel lists no flags (not Linux).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return sorted(f for f in value.split()
                          if f in NUMERIC_FLAGS or f.startswith("avx512"))
    return []


def torch_record() -> dict[str, Any]:
    """Torch's CPU threads and instruction set, as a record keeps them (empty without torch).

    Returns
    -------
    dict
        ``threads`` (:func:`torch.get_num_threads`), ``cpu_capability`` (the ISA torch's
        kernels were dispatched for, e.g. ``AVX2``), ``mkldnn`` (oneDNN available) and ``mkl``.
    """
    try:
        import torch
    except ImportError:
        return {}
    out: dict[str, Any] = {"threads": int(torch.get_num_threads())}
    try:
        out["cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):  # an older torch
        out["cpu_capability"] = ""
    out["mkldnn"] = bool(torch.backends.mkldnn.is_available())
    out["mkl"] = bool(torch.backends.mkl.is_available())
    return out


def load_average() -> list[float]:
    """The 1/5/15-minute load averages, rounded; empty where the system has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return []


def machine_record() -> dict[str, Any]:
    """The machine a result was made on, as its record keeps it.

    Returns
    -------
    dict
        ``platform``, ``cpu`` (:func:`cpu_model`), ``cores`` (:func:`usable_cores`),
        ``load_at_write`` (the 1/5/15-minute load averages, empty where there are none),
        ``gpu`` (the first CUDA device's name, empty without one), ``nice`` (this process's
        priority), ``cpu_flags`` (:func:`cpu_flags`) and ``torch`` (:func:`torch_record`).
    """
    gpu = ""
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # torch without CUDA, or a broken driver: no GPU to name
        gpu = ""
    try:
        nice: int | None = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):  # not POSIX
        nice = None
    return {"platform": platform.platform(), "cpu": cpu_model(), "cores": usable_cores(),
            "load_at_write": load_average(), "gpu": gpu, "nice": nice,
            "cpu_flags": cpu_flags(), "torch": torch_record()}


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, e.g. under taskset or a container).

    Returns
    -------
    int
        At least 1.
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def unloaded_cores() -> int:
    """Usable cores minus the rounded 1-minute load average (at least 1).

    Returns
    -------
    int
        Cores a new pool of processes would not take from running work.
    """
    try:
        busy = int(round(os.getloadavg()[0]))
    except OSError:
        busy = 0
    return max(1, usable_cores() - busy)


def idle_cores(*, window_s: float = 0.1) -> float:
    """Cores idle right now.

    The idle share of ``/proc/stat`` over ``window_s`` (this process sleeps meanwhile) times the
    machine's cores, at most the usable ones; the load average where ``/proc`` is missing.

    Parameters
    ----------
    window_s
        How long to watch the counters, in seconds.

    Returns
    -------
    float
        Between 0 and :func:`usable_cores`.
    """
    cores = usable_cores()

    def sample() -> tuple[int, int]:
        with Path("/proc/stat").open() as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    try:
        idle0, total0 = sample()
        time.sleep(window_s)
        idle1, total1 = sample()
        all_cores = os.cpu_count() or cores
        idle = all_cores * (idle1 - idle0) / max(total1 - total0, 1)
    except (OSError, ValueError, IndexError):
        idle = cores - os.getloadavg()[0]
    return float(min(cores, max(idle, 0.0)))


def source_commit(*, short: bool = False) -> str:
    """The git commit of the source tree this code runs from (``git rev-parse HEAD``).

    Parameters
    ----------
    short
        Git's abbreviated hash instead of the full one.

    Returns
    -------
    str
        The hash; empty for an installed copy without git, or where git does not run.
    """
    import subprocess

    command = ["git", "rev-parse", *(["--short"] if short else []), "HEAD"]
    try:
        done = subprocess.run(command, cwd=Path(__file__).resolve().parent, capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def source_state() -> dict[str, Any]:
    """The commit this code runs from and whether the tree differs from it.

    A result is declared against a commit; a tree with changes (tracked or untracked files,
    ``git status --porcelain``) ran code that no commit holds, so its record carries the hash
    of ``git diff HEAD`` and the untracked names, and a page can say so.

    Returns
    -------
    dict
        ``commit`` (empty without git), ``dirty`` (bool), ``diff_sha256`` (empty when clean).
    """
    import hashlib
    import subprocess

    here = Path(__file__).resolve().parent
    commit = source_commit()
    if not commit:
        return {"commit": "", "dirty": False, "diff_sha256": ""}

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout if done.returncode == 0 else ""

    status = git("status", "--porcelain")
    if not status.strip():
        return {"commit": commit, "dirty": False, "diff_sha256": ""}
    digest = hashlib.sha256((git("diff", "HEAD") + status).encode()).hexdigest()
    return {"commit": commit, "dirty": True, "diff_sha256": digest}


def package_versions() -> dict[str, str]:
    """Python's version, each of :data:`RECORDED_PACKAGES`' and the source commit (``git``).

    Returns
    -------
    dict
        ``python``, one entry per package (``not installed`` where it is not) and ``git``
        (``unknown`` without git).
    """
    from importlib import metadata

    out = {"python": platform.python_version()}
    for package in RECORDED_PACKAGES:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "not installed"
    out["git"] = source_commit() or "unknown"
    return out
