#!/usr/bin/env bash
# Set up (see setup.sh --test) and run everything CI runs: lint, format check, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
export PYTHONDONTWRITEBYTECODE=1
echo "== ruff check";  .venv/bin/ruff check hybridprof tests scripts benchmarks reports
echo "== ruff format"; .venv/bin/ruff format --check hybridprof tests scripts benchmarks reports
echo "== mypy";        .venv/bin/mypy
echo "== pytest";      .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
