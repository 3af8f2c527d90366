"""The documentation site builds, links and runs.

* ``mkdocs build --strict`` (what ``make docs`` runs) into a temporary folder: any warning,
  a page in ``nav`` that does not exist, or a broken relative link or anchor between pages
  fails the build (``validation`` in ``mkdocs.yml``).
* The built HTML is checked for internal links too: every relative ``href``/``src`` must
  land on a file the build wrote (this catches links to images and data files, which
  MkDocs does not validate).
* Every tutorial's commands run, at the small sizes written in the page: ```` ```bash ````
  blocks in a shell (a line starting with ``!`` must fail), ```` ```python ```` blocks with
  this interpreter, and blocks with ``title="path"`` are written to that path first. Each
  tutorial runs in its own temporary folder.
* The README stays short and its links land on files of the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from tests.warm_cli import WarmCli

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIALS = ("mobility", "reproduce", "own-city", "plugin-policy", "own-world")
BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)


def nav_pages(nav: list) -> list[str]:
    """Every page path named in a MkDocs ``nav`` (nested sections, titled or not)."""
    pages: list[str] = []
    for entry in nav:
        if isinstance(entry, str):
            pages.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                pages += nav_pages(value) if isinstance(value, list) else [value]
    return [p for p in pages if not re.match(r"^[a-z]+://", p)]


def load_config() -> dict:
    # mkdocs.yml uses no custom tags; a plain safe load reads it
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)


def broken_links(site: Path) -> list[str]:
    """Relative links in the built HTML whose target file the build did not write."""
    broken = []
    for page in site.rglob("*.html"):
        parser = _Links()
        parser.feed(page.read_text(errors="replace"))
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or not parts.path or link.startswith("#"):
                continue
            path = unquote(parts.path)
            # the 404 page links from the site's root ("/assets/..."): any URL can show it
            base = site if path.startswith("/") else page.parent
            target = (base / path.lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {link}")
    return broken


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # Material's end-of-life banner
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{log[-4000:]}"
    return out, log


def test_every_nav_page_exists():
    missing = [p for p in nav_pages(load_config()["nav"]) if not (DOCS / p).is_file()]
    assert not missing, f"pages in mkdocs.yml's nav that do not exist: {missing}"


def test_nav_pages_are_found_by_the_check():
    # the check above is real: it finds every page of a nested nav, and only pages
    nav = [{"A": "a.md"}, {"B": ["b/index.md", {"C": "b/c.md"}]}, {"X": "https://x.org"}]
    assert nav_pages(nav) == ["a.md", "b/index.md", "b/c.md"]


def test_site_builds_strict_without_warnings(site):
    _, log = site
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert not warnings, "\n".join(warnings)


def test_built_site_has_no_broken_internal_links(site):
    out, _ = site
    assert (out / "index.html").is_file()
    assert (out / "reference" / "api.html").is_file()
    broken = broken_links(out)
    assert not broken, "broken internal links:\n" + "\n".join(broken[:40])


def test_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "index.html").write_text(
        '<a href="ok/">ok</a><img src="gone.png"><a href="https://x.org/">x</a><a href="#top">t</a>'
        '<a href="/ok/#a">root</a><a href="/nope/">gone</a>'
    )
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "index.html").write_text("<p>ok</p>")
    assert broken_links(tmp_path) == ["index.html -> gone.png", "index.html -> /nope/"]


def test_api_reference_renders_docstrings(site):
    out, _ = site
    html = (out / "reference" / "api.html").read_text()
    assert "MobiDFLModel" in html and "ExchangePolicy" in html and "Config" in html


def test_cli_reference_is_generated_from_the_parser():
    from mobidfl.analysis.readme import CLI_PAGE, with_cli_reference

    page = CLI_PAGE.read_text()
    assert with_cli_reference(page) == page, "docs/reference/cli.md is stale: make docs-reference"
    for command in ("run", "settings", "sweep", "presets", "reproduce", "report"):
        assert f"## `mobidfl {command}`" in page


def test_readme_is_short_and_its_links_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert not re.search(r"\bissue \d+", readme, re.I), "no issue numbers in the README"
    assert "load average" not in readme.lower()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if not re.match(r"^[a-z]+://", t)]
    assert local, "the README links to the docs"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README links to missing files: {missing}"


def tutorial_steps(text: str) -> list[tuple[str, str, str]]:
    """(language, title, body) of each fenced block of a page, in order."""
    steps = []
    for lang, rest, body in BLOCK.findall(text):
        title = re.search(r'title="([^"]+)"', rest)
        steps.append((lang, title.group(1) if title else "", body))
    return steps


def tutorial_env() -> dict[str, str]:
    """The environment a tutorial's commands run in: this interpreter's ``bin`` first on
    ``PATH``, the repository importable, figures without a display."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["MPLBACKEND"] = "Agg"
    return env


def run_tutorial(name: str, workdir: Path, page: str | None = None, *,
                 cli: WarmCli | None = None) -> str | None:
    """Run one tutorial's blocks (``page``, else its file) in ``workdir``; returns None, or
    what failed. With ``cli``, ``mobidfl`` is served by that warm interpreter."""
    workdir.mkdir(parents=True)
    env = tutorial_env()
    if cli is not None:
        env["PATH"] = cli.path_with(env["PATH"])
    script = ["set -euo pipefail"]
    if page is None:
        page = (DOCS / "tutorials" / f"{name}.md").read_text()
    for i, (lang, title, body) in enumerate(tutorial_steps(page)):
        if title:
            path = workdir / title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        elif lang == "bash":
            # a command that must fail: `! cmd` alone would not stop `set -e`
            script.append(re.sub(
                r"^! (.+)$", r'if \1; then echo "should have failed: \1" >&2; exit 1; fi',
                body, flags=re.M,
            ))
        elif lang == "python":
            (workdir / f"_step{i}.py").write_text(body)
            script.append(f'python "_step{i}.py"')
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)], check=False, cwd=workdir, env=env,
        capture_output=True, text=True, timeout=240,
    )
    if done.returncode != 0:
        return f"tutorial {name} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
    return None


def test_tutorial_blocks_are_found():
    page = 'a\n```bash\necho 1\n```\n```python title="x/y.py"\nz = 1\n```\n```text\nout\n```\n'
    assert tutorial_steps(page) == [
        ("bash", "", "echo 1\n"), ("python", "x/y.py", "z = 1\n"), ("text", "", "out\n")
    ]


@pytest.mark.parametrize(
    "page, fails",
    [
        ("```bash\ntrue\n! false\n```\n", False),
        ("```bash\nfalse\necho never\n```\n", True),
        ("```bash\n! true\n```\n", True),
        ('```text title="a.txt"\nhi\n```\n```bash\ngrep -q hi a.txt\n```\n', False),
        ("```python\nraise SystemExit(3)\n```\n", True),
    ],
)
def test_a_failing_tutorial_command_is_reported(tmp_path, page, fails):
    # the runner is real: a failing command, a `!` command that succeeds and a failing
    # python block all fail the tutorial; files with a title are written before the commands
    result = run_tutorial("fake", tmp_path / "fake", page=page)
    assert (result is not None) == fails, result


@pytest.fixture(scope="module")
def warm_cli():
    with WarmCli(tutorial_env()) as cli:
        yield cli


def test_the_warm_mobidfl_answers_as_the_real_one(warm_cli, tmp_path):
    # a refused setting: exit 2 and one line on stderr, in the caller's folder and streams
    env = tutorial_env()
    env["PATH"] = warm_cli.path_with(env["PATH"])
    done = subprocess.run(["mobidfl", "run", "--out", "x", "--set", "no_such_setting=1"],
                          check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "no_such_setting" in done.stderr, done.stderr
    assert done.stdout == "" and not (tmp_path / "x").exists()


def test_every_tutorial_runs(tmp_path, warm_cli):
    # the four tutorials at their small sizes, two at a time; their eleven `mobidfl`
    # commands fork from one interpreter that has imported torch, Mesa and the rest
    # (tests/warm_cli.py: each command was mostly those imports)
    for name in TUTORIALS:
        assert any(lang == "bash" for lang, _, _ in tutorial_steps(
            (DOCS / "tutorials" / f"{name}.md").read_text()
        )), f"tutorial {name} has no commands"
    with ThreadPoolExecutor(max_workers=2) as pool:
        failures = list(pool.map(lambda n: run_tutorial(n, tmp_path / n, cli=warm_cli),
                                 TUTORIALS))
    failed = [f for f in failures if f]
    assert not failed, "\n\n".join(failed)
