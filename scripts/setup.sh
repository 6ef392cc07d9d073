#!/usr/bin/env bash
# Set up a fresh machine for hybridprof: Debian packages, a venv in .venv, torch (CPU, pinned) and
# the package itself (editable). Safe to run again: it skips what is already there.
#   bash scripts/setup.sh            # what `hybridprof run` needs (PDF reports included)
#   bash scripts/setup.sh --test     # plus what the test suite needs (chromium, poppler, test tools)
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1
PY=${PYTHON:-python3}
TORCH_PIN=${TORCH_PIN:-torch==2.13.0}   # pinned: an unpinned torch pulls a multi-GB CUDA build

apt_packages=(libharfbuzz-subset0)       # weasyprint: without it PDFs render 3-5x slower and warn
if [[ $WITH_TEST == 1 ]]; then
  apt_packages+=(poppler-utils chromium chromium-driver)
fi

# Debian's own python3 ships venv support separately (python3-venv); pyenv/python.org builds have it.
if ! "$PY" -c "import ensurepip, venv" 2>/dev/null; then
  apt_packages+=(python3-venv)
fi

missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if (( ${#missing[@]} )); then
  if command -v apt-get >/dev/null; then
    SUDO=""; [[ $(id -u) != 0 ]] && SUDO="sudo"
    echo "setup: installing Debian packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: warning: no apt-get; install these yourself: ${missing[*]}" >&2
  fi
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# This machine kind's pip config names local indexes that may be absent; hide only that noise.
pip_install() { "${PIP[@]}" "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing $TORCH_PIN (CPU)"
  pip_install "$TORCH_PIN"
fi
extra=""; [[ $WITH_TEST == 1 ]] && extra="[test]"
echo "setup: installing hybridprof$extra"
pip_install -e ".$extra" "$TORCH_PIN"
echo "setup: done (.venv/bin/hybridprof --version: $(.venv/bin/hybridprof --version))"
