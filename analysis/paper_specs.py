"""The paper reproduction specs (``mobidfl reproduce PAPER``), read from TOML files.

Each spec is ``analysis/scenarios/papers/<name>.toml``, beside the bench's scenarios and in
the same style: every value written out with where it comes from (a comment or a quote).
``_papers.toml`` lists the specs in order and the short names ``mobidfl reproduce`` takes.
A file is checked whole when it is read (:func:`load_paper`): an unknown table or key, a value
of the wrong type, a missing key, an unknown setting name or a variant that is not the spec's
is refused in one line naming the file and the key (:class:`ConfigError`, exit 2). The
settings' values are checked by :class:`mobidfl.model.config.Config` when a variant is
resolved (``mobidfl reproduce`` resolves every variant before any run), as the bench checks
its scenarios' worlds.

What cannot be written as data, the report's world sentence, is a function registered in
:data:`WORLDS` that a file names (``[about] world = "cached"``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from mobidfl.errors import ConfigError
from mobidfl.model.config import (
    Config,
    UnknownSetting,
    canonical_name,
    check_one_name_each,
    flatten,
    preset_names,
    warn_old_names,
)

__all__ = [
    "ALIASES",
    "CI",
    "MOFEL_SPEED_SCALE",
    "PAPERS",
    "SCALES",
    "WORLDS",
    "Claim",
    "PaperSpec",
    "Reading",
    "load_paper",
    "load_papers",
    "mofel_speed",
    "paper_spec",
]

PACKAGE = "mobidfl.analysis.scenarios.papers"
INDEX = "_papers.toml"
SCALES = ("ci", "small", "medium", "paper")
"""The scales a spec may define (``mobidfl reproduce --scale``)."""

CI = ("test scale of tests/reproduction/test_exp_*.py: a claim's direction in seconds, not a "
      "verdict; ")
"""How every ``ci`` scale note starts: its numbers are for the tests, not for a reader."""


@dataclass(frozen=True)
class Claim:
    """One headline claim: ``metric(a) - metric(b)`` (paired per seed) has the paper's sign.

    ``b = None`` makes it a level claim: ``metric(a)`` itself. ``paper_value`` is the
    paper's number for that effect (``None``: the paper states only a direction; its sign
    is ``sign``), in the unit of ``metric`` (accuracies in percentage points). ``sign = 0``
    with ``paper_value = 0``: the paper states the value is exactly zero (MoFeL's NFC); it
    holds only if it is zero on every seed.
    """

    source: str
    text: str
    metric: str
    a: str
    b: str | None
    paper_value: float | None
    paper_quote: str
    sign: int = 1
    authors_code: str = ""
    """What the authors' own code gives for this effect, measured by the validation suite
    (``validation/``, docs/validation), where it differs from the paper's printed number."""


@dataclass(frozen=True)
class Reading:
    """Another reading of a passage the paper leaves ambiguous, as settings on top of a variant.

    The preset holds the reading of record (:attr:`PaperSpec.reading_of_record`, chosen
    before any result); ``mobidfl reproduce --readings`` also runs each :class:`Reading` as
    extra variants (``"<variant> [<name>]"``) and the report shows every claim's verdict under
    each reading (``reading_rows`` in :mod:`mobidfl.analysis.reproduce`). ``variants`` limits
    it to the variants the passage concerns (empty: all).
    """

    name: str
    overrides: dict[str, Any]
    passage: str
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class PaperSpec:
    """How to reproduce one paper's headline with its preset."""

    paper: str
    title: str
    preset: str
    variants: dict[str, dict[str, Any]]
    scales: dict[str, dict[str, Any]]
    scale_notes: dict[str, str]
    claims: tuple[Claim, ...]
    variant_scales: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    skip: dict[str, tuple[str, ...]] = field(default_factory=dict)  # scale -> variants not run
    map_fallback: tuple[str, str] | None = None  # (preferred map, fallback if not available)
    key: str = ""  # the name `mobidfl reproduce` takes, where it is not the preset's
    reading_of_record: str = ""  # what the preset reads an ambiguous passage as, and why
    readings: tuple[Reading, ...] = ()  # the other readings (run with --readings)
    world: Callable[[Config], str] | None = None  # the world sentence, from the settings run

    @property
    def name(self) -> str:
        """What ``mobidfl reproduce NAME`` calls this spec (the preset's name by default)."""
        return self.key or self.preset


# --- the world sentences a spec may name ----------------------------------------------------
def _cached_world(config: Config) -> str:
    """Cached-DFL's world as run: the settings, never a map name the run did not use."""
    return (
        f"{config.n_agents} cars, {config.step_s:g} s epochs, range {config.radius_m:g} m and "
        f"speed {config.vehicle.speed:g} m/s on the ground (the authors' code drove 138 m and "
        f"19.23 m/s; the paper states 100 m, 13.89 m/s), on the map `{config.map}`."
    )


MOFEL_SPEED_MAP = "nyc_uws"
"""The map on which MoFeL's speed factor 20/3 was measured (territory visits ~500 m of road)."""


def _mofel_world(config: Config) -> str:
    """MoFeL's world as run.

    The 20/3 speed factor is justified only on the map it was measured on
    (``model/presets/mofel_002.toml``).
    """
    why = (
        f"`{MOFEL_SPEED_MAP}` territories are ~500 m of road per visit, the paper's d_s 75 m"
        if config.map == MOFEL_SPEED_MAP else
        f"a factor measured on `{MOFEL_SPEED_MAP}` (~500 m of road per territory visit, the "
        f"paper's d_s 75 m) and not re-measured on this run's map `{config.map}`, so v tau / "
        "d_s may differ from the paper's here"
    )
    return (
        f"{config.n_agents} clients, {config.areas} territories on the map `{config.map}`, "
        f"{config.step_s:g} s steps; speeds are the paper's times 20/3 ({why})."
    )


WORLDS: dict[str, Callable[[Config], str]] = {"cached": _cached_world, "mofel": _mofel_world}
"""The world sentences a spec names in ``[about] world`` (none: agents, map, step, range)."""

MOFEL_SPEED_SCALE = 20.0 / 3.0
"""MobiDFL length / MoFeL's (model/presets/mofel_002.toml): nyc_uws territories are ~500 m of
road per visit, the paper's d_s 75 m; times are kept literal, so speeds scale by 20/3."""


def mofel_speed(v_max_m_per_min: float) -> float:
    """The MobiDFL v_max (m/s) that stands for MoFeL's v_max in m/min (times 20/3).

    ``mofel_002.toml`` writes these values out;
    ``tests/reproduction/test_paper_specs.py`` checks them.
    """
    return round(v_max_m_per_min * MOFEL_SPEED_SCALE / 60.0, 4)


# --- reading and checking a file ---------------------------------------------------------------
TABLES = ("about", "variants", "scales", "variant_scales", "skip", "readings", "claims")
"""The tables of a spec file; any other is refused (a typo would be silently dropped)."""
ABOUT = {"paper": True, "title": True, "preset": True, "key": False, "world": False,
         "map_fallback": False, "reading_of_record": False}
"""The keys of ``[about]``: name -> required."""
READING = {"name": True, "passage": True, "overrides": True, "variants": False}
CLAIM = {"source": True, "text": True, "metric": True, "a": True, "b": False,
         "paper_value": False, "paper_levels": False, "paper_quote": True, "sign": False,
         "authors_code": False}
"""The keys of a ``[[claims]]`` entry: name -> required. ``paper_levels = [A, B]`` writes the
paper's values of the metric for ``a`` and ``b``; the claim's paper value is ``A - B``."""


class _File:
    """One spec file being checked: every refusal names it and the key."""

    def __init__(self, where: str) -> None:
        self.where = where

    def refuse(self, key: str, allowed: str) -> ConfigError:
        return ConfigError(self.where, key, allowed)

    def table(self, data: Mapping[str, Any], key: str, shown: str) -> dict[str, Any]:
        """``data[key]`` (``{}`` when absent), refused unless it is a TOML table."""
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.refuse(f"{shown} = {value!r}", "a table")
        return value

    def keys(self, data: Mapping[str, Any], schema: Mapping[str, bool], shown: str) -> None:
        """Every required key present, no other key."""
        for key in data:
            if key not in schema:
                raise self.refuse(f"{shown}.{key}", "only " + ", ".join(schema) + f" in {shown}")
        for key, required in schema.items():
            if required and key not in data:
                raise self.refuse(f"{shown}.{key}", f"a value (required in {shown})")

    def text(self, data: Mapping[str, Any], key: str, shown: str) -> str:
        value = data.get(key, "")
        if not isinstance(value, str):
            raise self.refuse(f"{shown}.{key} = {value!r}", "a string")
        return value

    def names(self, data: Mapping[str, Any], key: str, shown: str,
              among: Mapping[str, Any], what: str) -> tuple[str, ...]:
        """A list of names, each one of ``among``."""
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.refuse(f"{shown}.{key} = {value!r}", "a list of strings")
        for name in value:
            if name not in among:
                raise self.refuse(f"{shown}.{key}: {name!r}", f"one of the {what}: "
                                  + ", ".join(among))
        return tuple(value)

    def settings(self, value: Any, shown: str) -> dict[str, Any]:
        """Name -> value as written, each name a known setting given once (old names warned).

        The names are kept as written (not made public) so a spec's settings are what its
        file says; the values are checked when a variant is resolved.
        """
        if not isinstance(value, dict):
            raise self.refuse(f"{shown} = {value!r}", "a table of settings")
        given, where = list(flatten(value)), self.where
        try:
            check_one_name_each(given)
            for name, _ in given:
                canonical_name(name)
        except UnknownSetting as exc:
            raise ConfigError(f"{where} {shown}", exc.setting, exc.allowed) from None
        except ConfigError as exc:
            raise ConfigError(f"{where} {shown}: {exc.setting}", exc.value, exc.allowed) from None
        warn_old_names(n for n, _ in given)
        return dict(given)


def _number(file: _File, value: Any, shown: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise file.refuse(f"{shown} = {value!r}", "a number")
    return float(value)


def _claim(file: _File, data: Any, shown: str, variants: Mapping[str, Any]) -> Claim:
    if not isinstance(data, dict):
        raise file.refuse(f"{shown} = {data!r}", "a table")
    file.keys(data, CLAIM, shown)
    for key in ("a", "b"):
        if key in data:
            name = file.text(data, key, shown)
            if name not in variants:
                raise file.refuse(f"{shown}.{key} = {name!r}", "one of the variants: "
                                  + ", ".join(variants))
    if "paper_value" in data and "paper_levels" in data:
        raise file.refuse(f"{shown}.paper_levels", "paper_value or paper_levels, not both")
    paper_value = None
    if "paper_value" in data:
        paper_value = _number(file, data["paper_value"], f"{shown}.paper_value")
    if "paper_levels" in data:
        levels = data["paper_levels"]
        if not isinstance(levels, list) or len(levels) != 2 or "b" not in data:
            raise file.refuse(f"{shown}.paper_levels = {levels!r}", "two numbers, the paper's "
                              "values for a and for b (a claim with a b)")
        first, second = (_number(file, v, f"{shown}.paper_levels") for v in levels)
        paper_value = first - second
    sign = data.get("sign", 1)
    if isinstance(sign, bool) or sign not in (-1, 0, 1):
        raise file.refuse(f"{shown}.sign = {sign!r}", "-1, 0 or 1")
    return Claim(
        source=file.text(data, "source", shown), text=file.text(data, "text", shown),
        metric=file.text(data, "metric", shown), a=file.text(data, "a", shown),
        b=file.text(data, "b", shown) if "b" in data else None, paper_value=paper_value,
        paper_quote=file.text(data, "paper_quote", shown), sign=sign,
        authors_code=file.text(data, "authors_code", shown),
    )


def _reading(file: _File, data: Any, shown: str, variants: Mapping[str, Any]) -> Reading:
    if not isinstance(data, dict):
        raise file.refuse(f"{shown} = {data!r}", "a table")
    file.keys(data, READING, shown)
    return Reading(
        name=file.text(data, "name", shown),
        overrides=file.settings(data["overrides"], f"{shown}.overrides"),
        passage=file.text(data, "passage", shown),
        variants=file.names(data, "variants", shown, variants, "variants"),
    )


def _list_of_tables(file: _File, data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise file.refuse(f"{key} = {value!r}", f"an array of tables ([[{key}]])")
    return value


def parse_paper(data: Mapping[str, Any], *, where: str) -> PaperSpec:
    """A spec from a parsed TOML file, checked whole; ``where`` names the file in refusals."""
    file = _File(where)
    unknown = [k for k in data if k not in TABLES]
    if unknown:
        raise file.refuse(f"[{unknown[0]}]", "only the tables " + ", ".join(
            f"[{t}]" for t in TABLES))
    about = file.table(data, "about", "[about]")
    file.keys(about, ABOUT, "[about]")
    preset = file.text(about, "preset", "[about]")
    if preset not in preset_names():
        raise file.refuse(f"[about].preset = {preset!r}", "one of the presets: "
                          + ", ".join(preset_names()))
    world = file.text(about, "world", "[about]")
    if world and world not in WORLDS:
        raise file.refuse(f"[about].world = {world!r}", "one of " + ", ".join(WORLDS)
                          + " (the registered world sentences), or none")
    fallback = about.get("map_fallback")
    if fallback is not None and (not isinstance(fallback, list) or len(fallback) != 2
                                 or not all(isinstance(m, str) for m in fallback)):
        raise file.refuse(f"[about].map_fallback = {fallback!r}",
                          "two maps: [preferred, fallback if not available]")
    variants = {
        str(name): file.settings(value, f"[variants.{name}]")
        for name, value in file.table(data, "variants", "[variants]").items()
    }
    if not variants:
        raise file.refuse("[variants]", "at least one variant")
    scales: dict[str, dict[str, Any]] = {}
    notes: dict[str, str] = {}
    for scale in file.table(data, "scales", "[scales]"):
        shown = f"[scales.{scale}]"
        if scale not in SCALES:
            raise file.refuse(shown, "scales " + ", ".join(SCALES))
        table = dict(file.table(data["scales"], scale, shown))
        if "note" not in table:
            raise file.refuse(f"{shown}.note", "a note saying what the scale departs from")
        notes[scale] = file.text(table, "note", shown)
        del table["note"]
        scales[scale] = file.settings(table, shown)
    if not notes.get("ci", "").startswith(CI):
        raise file.refuse("[scales.ci].note", f"a ci scale whose note starts {CI!r} (the "
                          "tests' scale, never a verdict)")
    variant_scales: dict[str, dict[str, dict[str, Any]]] = {}
    for scale in file.table(data, "variant_scales", "[variant_scales]"):
        shown = f"[variant_scales.{scale}]"
        if scale not in scales:
            raise file.refuse(shown, "one of the spec's scales: " + ", ".join(scales))
        variant_scales[scale] = {}
        for name, value in file.table(data["variant_scales"], scale, shown).items():
            if name not in variants:
                raise file.refuse(f"{shown}.{name}", "one of the variants: " + ", ".join(variants))
            variant_scales[scale][name] = file.settings(value, f"{shown}.{name}")
    skip: dict[str, tuple[str, ...]] = {}
    for scale in file.table(data, "skip", "[skip]"):
        if scale not in scales:
            raise file.refuse(f"[skip].{scale}", "one of the spec's scales: " + ", ".join(scales))
        skip[scale] = file.names(data["skip"], scale, "[skip]", variants, "variants")
    readings = tuple(_reading(file, r, f"[[readings]] {i + 1}", variants)
                     for i, r in enumerate(_list_of_tables(file, data, "readings")))
    claims = tuple(_claim(file, c, f"[[claims]] {i + 1}", variants)
                   for i, c in enumerate(_list_of_tables(file, data, "claims")))
    if not claims:
        raise file.refuse("[[claims]]", "at least one claim")
    return PaperSpec(
        paper=file.text(about, "paper", "[about]"), title=file.text(about, "title", "[about]"),
        preset=preset, variants=variants, scales=scales, scale_notes=notes, claims=claims,
        variant_scales=variant_scales, skip=skip,
        map_fallback=(fallback[0], fallback[1]) if fallback is not None else None,
        key=file.text(about, "key", "[about]"),
        reading_of_record=file.text(about, "reading_of_record", "[about]"),
        readings=readings, world=WORLDS[world] if world else None,
    )


def _read(path: Path | Traversable) -> tuple[dict[str, Any], str]:
    """``(parsed TOML, where)`` of one file; unreadable or not TOML is one line naming it."""
    where = f"paper spec file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(where, str(path), f"a readable TOML file ({why})") from None
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(where, str(exc).splitlines()[0], "a TOML file") from None


def load_paper(path: str | Path | Traversable) -> PaperSpec:
    """Read and check one spec file (its name, without ``.toml``, must be the spec's name)."""
    path = Path(path) if isinstance(path, str) else path
    data, where = _read(path)
    spec = parse_paper(data, where=where)
    stem = path.name.removesuffix(".toml")
    if spec.name != stem:
        raise ConfigError(where, f"[about].key = {spec.key!r}", f"the file's name ({stem!r}), "
                          "or none where the preset's name is the file's")
    return spec


def load_papers(folder: Path | Traversable | None = None
                ) -> tuple[dict[str, PaperSpec], dict[str, str]]:
    """``(specs by name in the index's order, alias -> name)`` of ``folder``'s spec files.

    ``folder``: the bundled specs by default. Every ``.toml`` file there must be listed in
    ``_papers.toml`` and every listed one present (an unlisted file would be silently unused).
    """
    root = folder if folder is not None else resources.files(PACKAGE)
    index, where = _read(root.joinpath(INDEX))
    file = _File(where)
    file.keys(index, {"papers": True, "aliases": False}, "index")
    names = index["papers"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise file.refuse(f"papers = {names!r}", "a list of spec names")
    present = sorted(f.name.removesuffix(".toml") for f in root.iterdir()
                     if f.name.endswith(".toml") and f.name != INDEX)
    unlisted = [n for n in present if n not in names]
    if unlisted:
        raise file.refuse(f"papers: {unlisted[0]!r}", f"every spec file listed ({unlisted[0]}"
                          ".toml is not)")
    papers = {name: load_paper(root.joinpath(f"{name}.toml")) for name in names}
    aliases = file.table(index, "aliases", "[aliases]")
    for alias, target in aliases.items():
        if target not in papers:
            raise file.refuse(f"[aliases].{alias} = {target!r}", "one of the specs: "
                              + ", ".join(papers))
    return papers, {str(a): str(t) for a, t in aliases.items()}


PAPERS, ALIASES = load_papers()
"""The bundled specs by name (``_papers.toml``'s order) and the short names of them."""


def paper_spec(name: str) -> PaperSpec:
    """The spec ``mobidfl reproduce NAME`` runs: by its name or a short one (``003``)."""
    key = ALIASES.get(name, name)
    if key not in PAPERS:
        raise ConfigError("PAPER", name, "one of " + ", ".join(PAPERS))
    return PAPERS[key]
