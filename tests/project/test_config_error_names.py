"""ConfigError names only what a user gives: a setting, a command-line option or a file.

Issue 52 ("errors that mean what they say"): ``ConfigError`` prints *setting 'X' = ... is not
allowed*, so an ``X`` that is a function's own argument (``W``, ``mask``, ``state``) sends a user
looking for a setting that does not exist. Such arguments raise ``ValueError`` (see
:func:`mobidfl.errors.bad_argument`). This test reads the library's source with :mod:`ast` and
checks the first argument of every ``raise ConfigError(...)``.
"""

from __future__ import annotations

import ast

from mobidfl.errors import ConfigError
from mobidfl.model.config import canonical_name, public_names
from tests.conftest import FOLDERS, ROOT

INPUT_ROLES: dict[str, str] = {
    # files and folders a user names on the command line, or that such a file points at
    "checkpoint file": "the state.pt of `mobidfl run --resume`",
    "checkpoint config": "the config.toml beside a resumed checkpoint",
    "checkpoint options": "the options a resumed run was started with (beside its checkpoint)",
    "published file": "a file of the published/ tree an answer page reads",
    "bench file": "a file of a bench's --out folder",
    "report folder": "the run folder `mobidfl report` is given",
    "report file": "a file of that run folder",
    "reproduction index": "the docs page whose markers the reproduction index fills",
    "verdicts": "a reproduction's verdicts table in the published/ tree",
    "reproduction report": "a report under docs/reproduction that --rescore rewrites",
    # positional command-line arguments, by their metavar
    "BENCH": "`mobidfl publish BENCH DEST`: the bench folder",
    "DEST": "`mobidfl publish BENCH DEST` (and the bench's files command): the destination",
    "PAPER": "`mobidfl reproduce PAPER`: a paper's name",
    "SWEEP": "`mobidfl sweep SWEEP`: the sweep TOML file",
    # keys of a sweep TOML file (its [base] and [grid] tables, replicates, seeds)
    "base.seed": "a sweep file's [base] seed",
    "grid.seed": "a sweep file's [grid] seed list",
    "grid x replicates": "a sweep file's grid size times its replicates",
    "replicates": "a sweep file's replicates",
    "seeds": "a sweep file's seeds",
}
"""First arguments that are not settings, each a thing a user gives, and what it is."""

EXPRESSIONS: dict[str, str] = {
    # a setting's name as the user wrote it, or built from one
    "_display_name(config, name)": "config/resolution.py: the setting as written",
    "_display_name(config, 'workers')": "config/checks.py: the setting as written",
    "_display_name(config, 'contact')": "config/checks.py: the setting as written",
    "_display_name(config, 'cached.passes')": "config/checks.py: the setting as written",
    "_display_name(config, 'link.resume')": "config/checks.py: the setting as written",
    "shown": "config/checks.py: _display_name of link.model",
    "shown('momentum')": "config/checks.py: _display_name, partial over the config",
    "shown('workers')": "config/checks.py: _display_name, partial over the config",
    "shown('worker_backend')": "config/checks.py: _display_name, partial over the config",
    "joined": "config/checks.py: a plug-in's joint setting names, joined with +",
    "'+'.join(COUNT_SETTING.values())": "config/checks.py: the count settings (vehicles+...)",
    "AGENT_COUNTS": "partition.py: the count settings (vehicles+...), as the config joins them",
    "f'{first[0]}+{name}'": "config/names.py: two names given for one setting",
    "f'{namespace}.{f.name}'": "config/names.py: a plug-in setting's public name",
    "f'{kind}.mobility'": "a kind's mobility setting",
    "f'{self.kind}.mobility'": "a kind's mobility setting",
    "f'{group.kind}.mobility'": "a kind's mobility setting",
    "f'{moving}.mobility'": "a kind's mobility setting",
    "f'{kind}s'": "a kind's count setting (vehicles, uavs, ...)",
    "f'grid.{raw_name}'": "sweep.py: a setting in a sweep file's [grid]",
    "name": "a setting's name passed in (settings.py, config/, bounds.py, reproduce.py)",
    "setting": "a setting's name passed in (maps/sources.py)",
    "setting or self.kind": "registry.py: the setting that names a plug-in, or its kind",
    "SETTING": "contact_trace.py: the contact_trace.file setting",
    "key": "sweep.py: a setting or key of a sweep file",
    "source": "config/toml_files.py: the file (or option) a TOML was read from",
    "str(folder)": "reproduction_index.py: a folder the user gave",
    "str(report)": "reproduction_index.py: a report file the user gave",
    # a command-line option or a scenario/study/tuning file's entry, passed in
    "flag": "bench_run.py, bench_cli.py, tuning.py: a command-line option",
    "option": "folders.py: a command-line option",
    "where": "a scenario, study or tuning file (and the entry in it) the user gave",
    "f'{where} {shown}'": "bench_scenarios.py: a setting in a scenario file",
    "f'{where} {shown}: {exc.setting}'": "bench_scenarios.py: a setting in a scenario file",
    "f'{where}: {exc.setting}'": "bench_scenarios.py: a setting in a scenario file",
    "f'scenario {column.scenario}'": "bench_scenarios.py: a scenario of the scenario file",
    "f'area of agent {origin}'": "cached.py: an agent's home area against the setting areas",
    # a plug-in a user registered: its declaration is what they gave
    "f'{registry.kind} {name}.settings_class'": "config/fields.py: a plug-in's settings class",
    "f'{registry.kind} {name}.settings_class.namespace'": "config/fields.py: its namespace",
    "f'{namespace} settings namespace'": "config/fields.py: a plug-in settings namespace",
    "f'policy {policy}.defaults'": "config/resolution.py: a plug-in policy's declared defaults",
    "f'{type(policy).__name__}.metric_names'": "base.py: a plug-in policy's declared metrics",
}
"""First arguments that are expressions (``ast.unparse``), each built from a setting, option,
file or plug-in a user gives. A new expression must be added here, with what it names."""


def _raised_config_errors() -> list[tuple[str, int, ast.expr]]:
    """(file, line, first argument) of every ``raise ConfigError(...)`` in the library."""
    found = []
    for folder in FOLDERS.values():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                call = node.exc if isinstance(node, ast.Raise) else None
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name != ConfigError.__name__:
                    continue
                first = call.args[0] if call.args else next(
                    k.value for k in call.keywords if k.arg == "setting"
                )
                found.append((str(path.relative_to(ROOT)), node.lineno, first))
    return found


def _is_setting(name: str) -> bool:
    """A public setting name, an old name of one, or settings joined with ``+``."""
    names = set(public_names())
    for part in name.split("+"):
        try:
            if canonical_name(part) not in names:
                return False
        except ConfigError:
            return False
    return True


def _problem(literal: str) -> str | None:
    if literal.startswith("--") or literal in INPUT_ROLES or _is_setting(literal):
        return None
    return f"{literal!r} is not a setting, an option (--...) or a declared input role"


def test_every_config_error_names_a_setting_an_option_or_a_file_a_user_gives():
    # Prepare
    raised = _raised_config_errors()
    # Execute
    problems = []
    for where, line, first in raised:
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            problem = _problem(first.value)
        else:
            text = ast.unparse(first)
            problem = None if text in EXPRESSIONS else f"{text} is not a listed expression"
        if problem:
            problems.append(f"{where}:{line}: {problem}")
    # Assert: the whole library was read, and each one names what a user gives
    assert len(raised) > 300
    assert problems == []


def test_the_allow_lists_hold_only_what_the_source_uses():
    # Prepare
    raised = _raised_config_errors()
    literals = {f.value for _, _, f in raised if isinstance(f, ast.Constant)}
    expressions = {ast.unparse(f) for _, _, f in raised if not isinstance(f, ast.Constant)}
    # Assert: a role no longer raised is dropped from the lists, so they stay the real ones
    assert set(INPUT_ROLES) <= literals
    assert set(EXPRESSIONS) <= expressions
    assert not any(_is_setting(role) for role in INPUT_ROLES)
