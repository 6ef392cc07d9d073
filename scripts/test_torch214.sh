#!/usr/bin/env bash
# Run the test suite against torch 2.14.1 (the CUDA build; it runs on CPU) in a second venv,
# .venv-torch214, next to the main one. torch 2.14 removed `use_cuda` from the autograd profiler,
# so this checks the compat probe's choices on the newer API. Extra arguments go to pytest
# (default: the unit and integration suites; browser tests need nothing torch-specific).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-torch214
if [ ! -x "$VENV/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q "torch==2.14.1"
"$VENV/bin/python" -m pip install -q -e ".[test]"
"$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda available:", torch.cuda.is_available())'
export PYTHONDONTWRITEBYTECODE=1
if [ "$#" -eq 0 ]; then
    set -- tests/unit tests/integration
fi
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
