"""Up-front bounds on what a configuration will allocate, checked before step 1.

A setting can be valid on its own and still ask for terabytes: ten million vehicles, a
1 mm grid cell over a city, or a step so long (or a radio range so short) that contact
detection samples every step trillions of times. These checks estimate the allocation
from the settings (and the map, once it is loaded) and refuse with one line naming the
setting, instead of failing deep inside numpy minutes later.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config import COUNT_SETTING, KINDS, Config

MAX_GRID_CELLS = 1_000_000
"""Grid cells over the map: every cell is a polygon in the GIS export and a candidate cell."""

MAX_SUB_SAMPLES = 100_000
"""Contact sub-samples per step (``contact = during``): positions are held for all of them."""

MAX_TRAJECTORY_BYTES = 2 * 1024**3
"""One step's sampled positions ``[F + 1, N, 2]`` float64."""

AGENT_BASE_BYTES = 4_096
"""Per agent without learning: arrays, a mesa-geo GeoAgent with its shapely point, contacts."""

RECORD_BYTES = 160
"""Per agent per recorded step (the ``agents.parquet`` row kept in memory until the end)."""

_INPUT_SHAPES = {"cifar10": ((3, 32, 32), 10), "digits": ((1, 8, 8), 10),
                 "emnist_letters": ((1, 28, 28), 26)}
_TRAIN_SAMPLES = {"mnist5k": 4_000, "digits": 1_437, "fashion_mnist": 60_000, "mnist": 60_000,
                  "cifar10": 50_000, "emnist_letters": 124_800}
"""Training images per data set (float32 tensors held once per process)."""


def available_memory_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (Linux), else physical memory, else ``None``."""
    try:
        with Path("/proc/meminfo").open() as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def model_parameters(config: Config) -> int:
    """Parameters of one agent's network (0 without learning), from the dataset's shape."""
    if not config.learning:
        return 0
    from mobidfl.model.learning.nets import build_net, num_params

    shape, classes = _INPUT_SHAPES.get(config.dataset, ((1, 28, 28), 10))
    return num_params(build_net(config.model, shape, classes))


def held_model_copies(config: Config) -> int:
    """Distinct model snapshots the exchange policies hold at their peak, over all agents.

    Counted once however many caches share a snapshot (a Cached-DFL cache entry is a
    reference: :meth:`ExchangePolicy.held_models` bounds the distinct snapshots per member).
    """
    from mobidfl.plugins import POLICIES

    return sum(
        config.count(kind) * POLICIES[config.policy_of(kind)].held_models(config)
        for kind in KINDS
        if config.count(kind) and config.policy_of(kind) in POLICIES
    )


def optimizer_copies(config: Config) -> int:
    """Optimiser state per agent in model copies: SGD momentum 1, Adam 2 (two moments)."""
    if config.optimizer == "adam":
        return 2
    return 1 if config.momentum else 0


def dataset_bytes(config: Config) -> int:
    """The data set's float32 images, training set and test sample, held once per process."""
    if not config.learning:
        return 0
    shape, _ = _INPUT_SHAPES.get(config.dataset, ((1, 28, 28), 10))
    images = _TRAIN_SAMPLES.get(config.dataset, 60_000) + config.test_size
    return 4 * math.prod(shape) * images


def estimate_memory_bytes(config: Config, *, parameters: int | None = None) -> int:
    """An estimate of a run's peak memory: what is really held, each thing once.

    Per agent: its row of the parameter stacks (one float32 model copy; worker processes
    map the same shared stacks) and its optimiser state (:func:`optimizer_copies`); the
    distinct snapshots the policies hold (:func:`held_model_copies`: a cache entry is a
    reference to a shared snapshot); :data:`AGENT_BASE_BYTES`; the ``agents.parquet`` rows
    kept until the end. Once: the data set (:func:`dataset_bytes`). D-PSGD's mixing works
    block by block in place (:func:`mobidfl.model.learning.params.mix_stacks`), so it adds no copy.
    """
    n = config.n_agents
    params = model_parameters(config) if parameters is None else parameters
    records = config.steps // config.record_every + 2
    held = held_model_copies(config) if params else 0
    models = n * (1 + optimizer_copies(config)) + held
    return (
        n * (AGENT_BASE_BYTES + RECORD_BYTES * records)
        + 4 * params * models
        + dataset_bytes(config)
    )


def check_memory(config: Config, *, available: int | None = None) -> None:
    """Refuse a run whose estimated memory exceeds what the machine has available."""
    if not config.learning and config.n_agents <= 10_000 and config.steps <= 100_000:
        return  # far below any machine's memory without models
    available = available_memory_bytes() if available is None else available
    if available is None:
        return
    params = model_parameters(config)
    need = estimate_memory_bytes(config, parameters=params)
    if need <= available:
        return
    n = config.n_agents
    recorded = n * RECORD_BYTES * (config.steps // config.record_every)
    if need - recorded <= available:  # the agent rows of a long run are what does not fit
        fits = (available - (need - recorded)) // max(1, n * RECORD_BYTES) * config.record_every
        raise ConfigError(
            "steps",
            config.steps,
            f"a run whose agent records fit in memory: about {_gib(need)} needed, "
            f"{_gib(available)} available (at most about {fits} steps with record_every "
            f"{config.record_every} and {n} agents)",
        )
    counts = {COUNT_SETTING[k]: config.count(k) for k in KINDS}
    name = max(counts, key=counts.__getitem__)
    per_agent = max(1, need // max(1, config.n_agents))
    fits = max(0, available // per_agent - (config.n_agents - counts[name]))
    raise ConfigError(
        name,
        counts[name],
        f"a world that fits in memory: about {_gib(need)} needed, {_gib(available)} "
        f"available (at most about {fits} {name} with these settings)",
    )


def estimate_output_bytes(config: Config, *, checkpoints: bool) -> int:
    """Rough size of a run's outputs: agent rows (Parquet, GeoPackage points) and checkpoints.

    A checkpoint holds every agent's model (and optimiser buffer) plus the recorded rows, and
    the previous one is kept until the next is complete, hence twice.
    """
    rows = config.n_agents * (config.steps // config.record_every + 2)
    need = 1024**2 + rows * 400 + config.steps * 200
    if checkpoints:
        need += 2 * (rows * RECORD_BYTES + config.n_agents * 8 * model_parameters(config))
    return need


def check_grid(config: Config, n_cells: int, *, map_width_m: float, map_height_m: float) -> None:
    """Refuse a ``cell_m`` that lays more than :data:`MAX_GRID_CELLS` cells over the map."""
    if n_cells <= MAX_GRID_CELLS:
        return
    smallest = math.sqrt(max(map_width_m * map_height_m, 1.0) / MAX_GRID_CELLS)
    raise ConfigError(
        "cell_m",
        config.cell_m,
        f"a cell size giving at most {MAX_GRID_CELLS} grid cells on this map "
        f"(at least about {math.ceil(smallest)} m; this one gives {n_cells:.3g})",
    )


def check_sub_samples(config: Config, *, farthest_m: float, fastest_kind: str | None) -> int:
    """Contact sub-samples per step, refused above the bounds; returns the count.

    ``farthest_m`` is the longest distance a member can move in one step. The setting named
    is the one furthest from its default (step_s, radius_m or the fastest kind's speed).
    """
    from mobidfl.model.contacts import sub_samples

    if config.contact != "during" or not math.isfinite(farthest_m):
        count = 1 if config.contact != "during" else MAX_SUB_SAMPLES + 1
    else:
        count = sub_samples(max_step_distance=farthest_m, radius_m=config.radius_m)
    limit = min(MAX_SUB_SAMPLES, MAX_TRAJECTORY_BYTES // (16 * max(1, config.n_agents)) - 1)
    limit = max(1, limit)
    if count <= limit:
        return count
    defaults = Config.__dataclass_fields__
    ratios: dict[str, float] = {
        "step_s": config.step_s / defaults["step_s"].default,
        "radius_m": defaults["radius_m"].default / config.radius_m,
    }
    speed = farthest_m / config.step_s
    if fastest_kind is not None:
        default_speed = getattr(Config(), fastest_kind).speed or 1.0
        ratios[f"{fastest_kind}.speed"] = speed / default_speed
    name = max(ratios, key=ratios.__getitem__)
    if name == "step_s":
        value, allowed = config.step_s, f"at most {limit * config.radius_m / (2 * speed):.4g} s"
    elif name == "radius_m":
        value, allowed = config.radius_m, f"at least {2 * farthest_m / limit:.4g} m"
    else:
        value = getattr(config, fastest_kind).speed  # type: ignore[arg-type]
        allowed = f"at most {limit * config.radius_m / (2 * config.step_s):.4g} m/s"
    raise ConfigError(
        name,
        value,
        f"{allowed} (contact = during samples each step every radius_m/2 metres of travel: "
        f"{count:.3g} sub-samples, at most {limit}; or set contact = end)",
    )


def _gib(n: float) -> str:
    return f"{n / 1024**3:.3g} GiB"


def fastest(groups: list[tuple[str, Any, Any]], step_s: float) -> tuple[float, str | None]:
    """``(farthest distance in one step, its kind)`` over the model's mobility groups."""
    best, kind = 0.0, None
    for group_kind, _, mobility in groups:
        distance = float(mobility.max_step_distance(step_s))
        if distance > best or kind is None:
            best, kind = distance, group_kind
    return best, kind
