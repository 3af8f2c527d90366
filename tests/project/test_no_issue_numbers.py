"""Library code explains itself, not its history: no module names an issue of the tracker.

A docstring or comment says what the code does and why (with the paper and equation it
follows); which issue asked for it is in the git log, and timing logs are on
docs/performance/measurements.md. A pure scan of the library's files (``*.py`` and the text
files shipped beside them), so it runs in a fraction of a second.

Links to another project's tracker are fine as full addresses
(``https://github.com/projectmesa/mesa-geo/issues/23``): the pattern needs the number to
follow the word or a ``#`` directly, which a URL's ``issues/23`` does not.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("model", "agents", "maps", "analysis", "mobidfl", "validation", "app.py")
"""The library (tests/ and benchmarks/ are not: their names may record why a test exists)."""
SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".yml", ".yaml"}

ISSUE = re.compile(
    r"\b(?:issues?|tickets?|bugs?)\s*#?\s*\d+"  # issue 26, issues #23, bug 4
    r"|(?<![\w\"':#&/])#\d{1,5}\b(?![0-9a-fA-F])",  # (#26), "see #104"; not colours "#555555"
    re.IGNORECASE,
)

PENDING: set[str] = set()
"""Files that still named an issue when this test was written and that another change owns
at the time; the lead empties this set after merging that change. A listed file that no
longer names one fails the test, so the set only shrinks."""


def library_files() -> list[Path]:
    files: list[Path] = []
    for name in LIBRARY:
        path = ROOT / name
        found = [path] if path.is_file() else sorted(path.rglob("*"))
        files += [
            f for f in found
            if f.is_file() and f.suffix in SUFFIXES and "__pycache__" not in f.parts
        ]  # fmt: skip
    return files


def issue_mentions(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE.finditer(text)]


def test_pattern_finds_issue_numbers_and_spares_colours_and_urls() -> None:
    assert issue_mentions("(issue 26, item 5)") == ["issue 26"]
    assert issue_mentions("mesa-geo issues #23, #104") == ["issues #23", "#104"]
    assert issue_mentions("see #7 and Issue#12") == ["#7", "Issue#12"]
    assert issue_mentions('color="#555555" style="color:#777" AGENT = "#303030"') == []
    assert issue_mentions("https://github.com/projectmesa/mesa-geo/issues/23") == []
    assert issue_mentions("Fig. 2, eq. (3), Alg. 2 lines 17-18, 7 x 8 grid") == []


def test_no_library_file_names_an_issue() -> None:
    found: dict[str, list[str]] = {}
    for f in library_files():
        mentions = issue_mentions(f.read_text(encoding="utf-8", errors="replace"))
        if mentions:
            found[f.relative_to(ROOT).as_posix()] = mentions
    unexpected = {k: v for k, v in found.items() if k not in PENDING}
    assert not unexpected, f"library files name tracker issues (say what and why): {unexpected}"
    cleaned = sorted(PENDING - set(found))
    assert not cleaned, f"{cleaned} no longer name an issue: remove them from PENDING"
