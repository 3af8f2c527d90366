#!/usr/bin/env bash
# Install what the real-browser tests (tests/browser.py) and the map tools need.
#
# WHY: the Solara app is tested in a real headless browser. Playwright's own browser download
# needs internet access to its CDN, so we drive Debian's `chromium` package instead
# (executable_path='/usr/bin/chromium'); only the Python `playwright` driver comes from PyPI.
# `gdal-bin` (ogr2ogr, gdalinfo) is needed by the map tooling elsewhere in the project.
#
# Usage: .ci/browser_deps.sh [VENV]      (default VENV: .venv)
# Idempotent: installs only what is missing; runs `apt-get update` only when apt-get cannot find
# a package otherwise; uses sudo only when not root. Never runs `playwright install`.
set -euo pipefail

die() { echo "browser_deps: ERROR: $*" >&2; exit 1; }
say() { echo "browser_deps: $*"; }

venv="${1:-.venv}"
python="$venv/bin/python"
[ -x "$python" ] || die "no Python at '$python': pass the virtual environment path as first argument"

# --- Debian packages ---------------------------------------------------------------------------
declare -A probe=([chromium]=/usr/bin/chromium [gdal-bin]=/usr/bin/ogr2ogr)
missing=()
for pkg in chromium gdal-bin; do
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        && [ -x "${probe[$pkg]}" ]; then
        say "present  $pkg ($(dpkg-query -W -f='${Version}' "$pkg"))"
    else
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install ${missing[*]} by hand"
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Update the package lists only if apt does not know a candidate for every missing package.
    need_update=0
    for pkg in "${missing[@]}"; do
        cand="$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')"
        if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then need_update=1; fi
    done
    if [ "$need_update" -eq 1 ]; then
        say "apt-get update (no install candidate known for some of: ${missing[*]})"
        "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
    fi
    say "apt-get install ${missing[*]}"
    if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
        # stale lists give 404s for superseded .deb files: refresh once and retry
        say "install failed; apt-get update and retry"
        "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
            || die "apt-get install ${missing[*]} failed"
    fi
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium still missing after install"
say "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo '?')"

# --- Python playwright driver (no browser download) ---------------------------------------------
if "$python" -c "import playwright.sync_api" 2>/dev/null; then
    say "present  playwright $("$python" -c 'import importlib.metadata as m; print(m.version("playwright"))')"
else
    say "pip install playwright into $venv"
    "$python" -m pip install --quiet playwright || die "pip install playwright failed"
fi
say "done (browser: /usr/bin/chromium; do NOT run 'playwright install')"
