#!/usr/bin/env bash
# Set up hybridprof: a venv in .venv with torch (pinned, CPU) and the package itself (editable), and
# the optional Debian packages when it may install them (as root, or with sudo that needs no
# password). Without that it still sets up everything else and names the packages in one warning.
# Safe to run again: it skips what is already there.
#   bash scripts/setup.sh            # what `hybridprof run` needs (PDF reports included)
#   bash scripts/setup.sh --test     # plus what the test suite needs (chromium, poppler, test tools)
# Environment: PYTHON (default python3); TORCH_PIN (default torch==2.13.0); TORCH_INDEX_URL (e.g.
# https://download.pytorch.org/whl/cpu: where torch comes from; default: pip's configuration).
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1
PY=${PYTHON:-python3}
TORCH_PIN=${TORCH_PIN:-torch==2.13.0}   # the version the suite runs on; README: the CPU wheel

# Optional Debian packages, and what goes without each.
declare -A without=([libharfbuzz-subset0]="PDF reports render 3-5x slower")
if [[ $WITH_TEST == 1 ]]; then
  without+=([poppler-utils]="no pdftoppm to view PDF pages" [chromium]="browser tests skip"
            [chromium-driver]="browser tests skip")
fi
# HYBRIDPROF_SETUP_EXTRA_APT: more optional package names (the script's tests use one that does
# not exist, to see the warning where every real package is installed).
for pkg in ${HYBRIDPROF_SETUP_EXTRA_APT:-}; do without[$pkg]="nothing hybridprof uses"; done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# How to run apt-get: as root, or with sudo that asks no password; else not at all.
apt_prefix() {
  command -v apt-get >/dev/null || return 1
  if [[ $(id -u) == 0 ]]; then echo ""; return 0; fi
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then echo "sudo"; return 0; fi
  return 1
}

# apt's status lines (dlstatus|pmstatus:package:percent:what) as a line each 10% of each phase.
apt_progress() {
  local kind pkg pct what last=-10 phase=""
  while IFS=: read -r kind pkg pct what; do
    pct=${pct%%.*}
    [[ $pct =~ ^[0-9]+$ ]] || continue
    [[ $kind == "$phase" ]] || { phase=$kind; last=-10; }
    (( pct >= last + 10 || pct == 100 )) || continue
    last=$pct
    local doing=installing; [[ $kind == dlstatus ]] && doing=downloading
    echo "setup: apt-get: $doing $pct% ($what)"
  done
}

# Installs what it can; prints the packages still missing (one per line).
install_debian_packages() {
  local missing=() pkg prefix log
  for pkg in "$@"; do installed "$pkg" || missing+=("$pkg"); done
  (( ${#missing[@]} )) || return 0
  if prefix=$(apt_prefix); then
    echo "setup: installing Debian packages: ${missing[*]} (with apt-get; chromium takes minutes)" >&2
    log=$(mktemp)
    # apt's own chatter (debconf notes) goes to the log, shown only when apt fails; its progress
    # (the status lines of APT::Status-Fd) becomes a line each 10%.
    echo "setup: apt-get update: reading the package lists" >&2
    exec 4>&2  # where the progress goes: the terminal, not the log
    if ! { $prefix apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $prefix apt-get install -y -qq -o APT::Status-Fd=3 "${missing[@]}" 3> >(apt_progress >&4)
        } >"$log" 2>&1; then
      echo "setup: apt-get failed: $(grep -v '^debconf' "$log" | tail -n 1)" >&2
    fi
    wait  # the progress lines are all out
    exec 4>&-
    rm -f "$log"
  fi
  for pkg in "${missing[@]}"; do installed "$pkg" || echo "$pkg"; done
}

# Debian's own python3 ships venv support separately; without it nothing can be set up.
if ! "$PY" -c "import ensurepip, venv" 2>/dev/null; then
  if [[ -n $(install_debian_packages python3-venv) ]]; then
    echo "setup: error: $PY cannot create a venv; install python3-venv (as root: apt-get install" \
         "-y python3-venv) or set PYTHON to a Python 3.10+ that has venv" >&2
    exit 1
  fi
fi

mapfile -t still_missing < <(install_debian_packages $(printf '%s\n' "${!without[@]}" | sort))

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
# This machine kind's pip config names local indexes that may be absent; hide only that noise.
pip_install() { "${PIP[@]}" "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }; }
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing $TORCH_PIN"
  pip_install "$TORCH_PIN" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
extra=""; [[ $WITH_TEST == 1 ]] && extra="[test]"
echo "setup: installing hybridprof$extra"
pip_install -e ".$extra" "$TORCH_PIN"
echo "setup: done (.venv/bin/hybridprof --version: $(.venv/bin/hybridprof --version))"

if (( ${#still_missing[@]} )); then
  effects=$(for pkg in "${still_missing[@]}"; do echo "${without[$pkg]}"; done | sort -u |
            paste -sd ';' | sed 's/;/; /g')
  sudo=""; [[ $(id -u) != 0 ]] && sudo="sudo "
  echo "setup: warning: optional Debian packages not installed: ${still_missing[*]} (without" \
       "them: $effects); everything else is set up; add them with:" \
       "${sudo}apt-get install -y ${still_missing[*]}" >&2
fi
