"""The docs tree holds what its pages show, and every figure and link of a page exists.

A pure scan of the Markdown sources (no site build, so it runs in well under a second):

* every image a page embeds (``![..](path)``, ``<img src="..">``) and every relative link
  (``[..](path)``, ``[..]: path``, ``href=".."``) of ``docs/**/*.md`` and ``README.md``
  lands on a file or folder of the repository;
* every file under ``docs/`` that is not a page is embedded or linked by some page: run
  outputs that no page shows (per-run tables, per-step Parquet, logs, manifests) live under
  ``published/`` at the same relative path instead (``docs/reference/layout.md``).

``tests/docs/test_docs.py`` builds the site and checks the rendered links; this file catches a
missing figure or a stray run output without the build.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PUBLISHED = ROOT / "published"
"""Run outputs behind the pages (same relative paths as under ``docs/``)."""

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]"  # [text] or ![alt], one level of nested brackets
    r"\(\s*(?:<([^>]+)>|([^)\s]+))(?:\s+\"[^\"]*\")?\s*\)"  # (<target>) or (target "title")
)
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HTML = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [ROOT / "README.md"]


def link_targets(text: str) -> list[str]:
    """Relative targets of a page's images and links, outside code blocks and code spans."""
    text = CODE_SPAN.sub("", FENCE.sub("", text))
    found = [m.group(1) or m.group(2) for m in INLINE.finditer(text)]
    found += [m.group(1) for pattern in (REFERENCE, HTML) for m in pattern.finditer(text)]
    targets = []
    for target in found:
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue  # another site, mail, an anchor on the same page, or an absolute path
        path = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if path:
            targets.append(path)
    return targets


def test_link_targets_reads_images_links_and_skips_code() -> None:
    text = (
        "![a](img/a.png) and [b](b.md#x) and [c](https://x.org/c) and [d](#d)\n"
        '<img src="e.png"> `[f](f.md)`\n\n[g]: g.csv\n\n```text\n[h](h.md)\n```\n'
        "[i](<sp ace.md>) and [j](j%20k.md)\n"
    )
    assert link_targets(text) == ["img/a.png", "b.md", "sp ace.md", "j k.md", "g.csv", "e.png"]


def test_every_figure_and_relative_link_of_a_page_exists() -> None:
    missing = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in pages()
        for target in link_targets(page.read_text(encoding="utf-8"))
        if not (page.parent / target).exists()
    ]
    assert not missing, "pages link files that do not exist:\n" + "\n".join(missing)


def test_docs_hold_only_pages_and_what_they_show() -> None:
    shown = {
        (page.parent / target).resolve()
        for page in pages()
        for target in link_targets(page.read_text(encoding="utf-8"))
    }
    stray = [
        str(f.relative_to(ROOT))
        for f in sorted(DOCS.rglob("*"))
        if f.is_file() and f.suffix != ".md" and f.resolve() not in shown
    ]
    assert not stray, (
        "files under docs/ that no page embeds or links (run outputs go under published/, "
        "same relative path):\n" + "\n".join(stray)
    )
