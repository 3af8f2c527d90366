#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter (Mesa 3.5 needs it), or fail clearly.
# Order: $PYTHON, python3.12, python3.13, pyenv's 3.12/3.13 installs, python3.
set -u
ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
candidates+=(python3.12 python3.13)
for d in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12* "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*; do
    [ -x "$d/bin/python3" ] && candidates+=("$d/bin/python3")
done
candidates+=(python3)
for c in "${candidates[@]}"; do
    path=$(command -v "$c" 2>/dev/null) || continue
    if ok "$path"; then echo "$path"; exit 0; fi
done
echo "find_python: no Python >= 3.12 found (Mesa 3.5 needs it). Install one (e.g. 'pyenv install 3.12') or run 'make PYTHON=/path/to/python3.12'." >&2
exit 1
