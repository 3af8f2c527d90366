#!/usr/bin/env bash
# Make Solara's browser front end available offline.
#
# WHY: `solara run` fetches its front end (Vue app bundle, require.js, Font Awesome, grid layout,
# Vega for Altair plots, ...) through its /_solara/cdn proxy from cdn.jsdelivr.net and caches the
# files in <venv>/share/solara/cdn/. With no internet the page stays on "Loading app". The
# `solara-assets` wheel on PyPI stops at 1.58.2, so we fill the proxy cache ourselves with
# `npm pack` (the npm registry is reachable) and unpack each package into
# <cache>/<name>@<version>/, the exact path layout the proxy looks up (solara/server/cdn_helper.py).
#
# The versions are READ from the installed solara package (its page template, its .vue files and
# its settings), so a solara upgrade picks up new versions by itself. If nothing is found (solara
# changed its layout), the versions measured for solara 1.64.1 in shared/notes/stack.md are used.
#
# Usage: .ci/solara_assets.sh [VENV] [--core]
#   VENV    virtual environment that holds solara (default: .venv)
#   --core  only what a plain SolaraViz page needs (Vue app, require.js, Font Awesome, grid
#           layout); default is every fixed-version package solara references (adds Vega for
#           Altair plots, KaTeX and Mermaid for Markdown).
# Environment:
#   SOLARA_ASSETS_PROXY_CACHE_DIR  target folder (solara reads the same variable); default
#                                  <VENV>/share/solara/cdn
#   SOLARA_NPM_CACHE               where the npm tarballs are kept between runs; default
#                                  ${XDG_CACHE_HOME:-$HOME/.cache}/mobidfl/solara-npm
# Idempotent: a package already unpacked (marker file .npm-pack-ok) is left alone, a tarball
# already in the npm cache is not downloaded again.
set -euo pipefail

die() { echo "solara_assets: ERROR: $*" >&2; exit 1; }
say() { echo "solara_assets: $*"; }

venv=".venv"
mode="all"
for arg in "$@"; do
    case "$arg" in
        --core) mode="core" ;;
        --all) mode="all" ;;
        -h|--help) sed -n 2,27p "$0"; exit 0 ;;
        -*) die "unknown option '$arg' (allowed: --core, --all, --help)" ;;
        *) venv="$arg" ;;
    esac
done

python="$venv/bin/python"
[ -x "$python" ] || die "no Python at '$python': pass the virtual environment path as first argument"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH (needed for 'npm pack'); install nodejs/npm"
venv_abs="$(cd "$venv" && pwd)"
target="${SOLARA_ASSETS_PROXY_CACHE_DIR:-$venv_abs/share/solara/cdn}"
npm_cache="${SOLARA_NPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mobidfl/solara-npm}"
mkdir -p "$target" "$npm_cache" || die "cannot create '$target' or '$npm_cache'"

# --- 1. Find the versions the installed solara expects -------------------------------------------
# Output lines: "<spec> <kind> <file1,file2,...>" where spec is name@version (as in the CDN url),
# kind is core/extra, files are the paths solara requests under that package.
plan="$("$python" - "$mode" <<'PY'
import importlib.metadata as md
import pathlib
import re
import sys

mode = sys.argv[1]
try:
    import importlib.util
    spec = importlib.util.find_spec("solara")
    root = pathlib.Path(spec.origin).parent
except Exception as exc:  # noqa: BLE001
    sys.exit(f"solara is not importable in this venv: {exc}")

solara_version = md.version("solara")
vue_major = int(md.version("ipyvue").split(".")[0])
widgets_major = md.version("ipywidgets").split(".")[0]
print(f"# solara {solara_version}, ipyvue major {vue_major}, ipywidgets major {widgets_major}",
      file=sys.stderr)

# A CDN reference: "{{cdn}}/NAME@VERSION/PATH" in the Jinja template or
# "${this.getCdn()}/NAME@VERSION/PATH" in .vue / .py (Vue templates). VERSION must be literal
# (echarts/codemirror/milkdown use a runtime ${version}: those are skipped, see report).
ref = re.compile(
    r"(?:\{\{\s*cdn\s*\}\}|\$\{this\.getCdn\(\)\})/"
    r"((?:@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*)@([0-9][\w.+-]*)/([^\"'`\s]*)"
)
fa = re.compile(r"fontawesome_path\s*:\s*str\s*=\s*\"/([\w.-]+)@([\w.+-]+)/([^\"]+)\"")

found: dict[str, tuple[str, set[str]]] = {}  # spec -> (source file, paths)
files = [root / "server" / "templates" / "solara.html.j2", root / "server" / "settings.py"]
files += sorted(root.glob("components/*.vue")) + sorted(root.glob("components/*.py"))
files += sorted(root.glob("widgets/vue/*.vue"))
for path in files:
    if not path.is_file():
        continue
    text = path.read_text(encoding="utf-8", errors="replace")
    for name, version, rest in ref.findall(text) + fa.findall(text):
        rest = rest.replace("{{ipywidget_major_version}}", widgets_major)
        if "{{" in rest or "${" in rest:
            continue
        key = f"{name}@{version}"
        found.setdefault(key, (str(path.relative_to(root)), set()))[1].add(rest)

# Which Vue app bundle the page template loads depends on ipyvue's major version
# (solara/server/server.py: vue3 = ipyvue.__version__.startswith("3")).
wanted_app = "solara-vuetify3-app" if vue_major >= 3 else "solara-vuetify-app"
other_app = "solara-vuetify-app" if vue_major >= 3 else "solara-vuetify3-app"
core_names = {f"@widgetti/{wanted_app}", "requirejs", "font-awesome", "@widgetti/vue-grid-layout"}

fallback = {  # measured for solara 1.64.1 (shared/notes/stack.md, "Solara offline")
    "@widgetti/solara-vuetify-app@10.1.1": {f"dist/solara-vuetify-app{widgets_major}.min.js"},
    "requirejs@2.3.6": {"require.js"},
    "font-awesome@4.5.0": {"css/font-awesome.min.css"},
    "@widgetti/vue-grid-layout@2.3.13-alpha.2": {"dist/vue-grid-layout.umd.js"},
}
names_found = {k.rsplit("@", 1)[0] for k in found}
if not core_names <= names_found:
    missing = sorted(core_names - names_found)
    print(f"# WARNING: could not read {missing} from solara {solara_version}; "
          "falling back to the stack.md versions for them", file=sys.stderr)
    for key, paths in fallback.items():
        if key.rsplit("@", 1)[0] in missing:
            found[key] = ("stack.md fallback", paths)

for key in sorted(found):
    source, paths = found[key]
    name = key.rsplit("@", 1)[0]
    if name.endswith("/" + other_app):
        continue
    kind = "core" if name in core_names else "extra"
    if mode == "core" and kind != "core":
        continue
    print(f"{key} {kind} {','.join(sorted(paths))}")
    print(f"#   {key:45s} {kind:5s} from solara/{source}", file=sys.stderr)
PY
)" || die "could not read the front-end versions from solara in '$venv'"

[ -n "$plan" ] || die "no front-end packages found in the installed solara"
say "target folder: $target"
say "npm tarball cache: $npm_cache"

# --- 2. Fetch (npm pack) and unpack each package ------------------------------------------------
n_new=0; n_kept=0
while read -r spec kind paths; do
    dest="$target/$spec"
    if [ -f "$dest/.npm-pack-ok" ]; then
        say "kept     $spec ($(cat "$dest/.npm-pack-ok"))"
        n_kept=$((n_kept + 1))
    else
        pkg_cache="$npm_cache/$(echo "$spec" | tr '/@' '__')"
        mkdir -p "$pkg_cache"
        tgz="$(find "$pkg_cache" -maxdepth 1 -name '*.tgz' | head -n 1)"
        if [ -z "$tgz" ]; then
            npm pack --silent --pack-destination "$pkg_cache" "$spec" >"$pkg_cache/npm.log" 2>&1 \
                || { cat "$pkg_cache/npm.log" >&2; die "npm pack $spec failed (registry reachable?)"; }
            tgz="$(find "$pkg_cache" -maxdepth 1 -name '*.tgz' | head -n 1)"
            [ -n "$tgz" ] || die "npm pack $spec produced no tarball in $pkg_cache"
            how="fetched"
        else
            how="cached "
        fi
        tmp="$(mktemp -d "$target/.unpack.XXXXXX")"
        tar -xzf "$tgz" -C "$tmp" || { rm -rf "$tmp"; die "cannot unpack $tgz"; }
        [ -d "$tmp/package" ] || { rm -rf "$tmp"; die "$tgz has no package/ folder"; }
        basename "$tgz" >"$tmp/package/.npm-pack-ok"
        mkdir -p "$(dirname "$dest")"
        rm -rf "$dest"
        mv "$tmp/package" "$dest"
        rm -rf "$tmp"
        say "$how  $spec <- $(basename "$tgz") ($(du -sh "$dest" | cut -f1))"
        n_new=$((n_new + 1))
    fi
    # --- 3. Check every file solara requests under this package exists ---------------------------
    IFS=',' read -r -a wanted <<<"$paths"
    for rel in "${wanted[@]}"; do
        [ -n "$rel" ] || continue
        f="$dest/$rel"
        if [ ! -f "$f" ]; then
            # jsDelivr minifies on the fly (requirejs@2.3.6/require.min.js); the npm tarball has
            # only the plain file, which is equivalent.
            plain="${f%.min.js}.js"
            if [[ "$f" == *.min.js && -f "$plain" ]]; then
                cp "$plain" "$f"
                say "         $spec/$rel: copied from $(basename "$plain") (jsDelivr auto-minified)"
            elif [ "$kind" = core ]; then
                die "$spec has no '$rel', which solara requests"
            else
                say "WARNING  $spec has no '$rel' (used only by optional components)"
            fi
        fi
    done
done <<<"$plan"

say "done: $n_new unpacked, $n_kept already present, in $target"
