#!/usr/bin/env bash
# CUDA checks for a machine with a GPU (none runs in CI): the tests under tests/gpu, then CUDA runs
# of a transformer (torch's nn.MultiheadAttention and, when transformers is importable, GPT-2 from a
# config), forward and training step. Sessions and the log go to $OUT (default ./gpu-out) so the
# reports can be rendered elsewhere with `hybridprof report`.
#   bash scripts/gpu_check.sh            # hybridprof importable from this checkout (deps installed)
# Wheels in .whl/ (e.g. libcst for another Python) are installed into /tmp/site first when present.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$REPO
else
  export PYTHONPATH=$REPO
fi
"$PY" - <<'PYEOF'
import torch, sys
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
PYEOF
status=0
echo "== tests/gpu, tests/torchprof_suite"
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/gpu tests/torchprof_suite 2>&1 | tee "$OUT/gpu-tests.log" | tail -25 || status=1
cat > /tmp/gpt2_model.py <<'PYEOF'
import torch
from transformers import GPT2Config, GPT2Model

def build_model():
    torch.manual_seed(0)
    return GPT2Model(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1000, n_positions=256))

def example_inputs():
    return (torch.randint(0, 1000, (4, 128)),)
PYEOF
run() {  # name, model file, extra args...
  local name=$1 file=$2; shift 2
  echo "== run $name $*"
  "$PY" -m hybridprof run "$file" --device cuda --iters 10 --warmup 3 -o "$OUT/$name.json" --force "$@" \
    > "$OUT/$name.txt" 2>&1 || { status=1; }
  tail -40 "$OUT/$name.txt"
}
run mha tests/fixtures/tiny_transformer.py
run mha-bwd tests/fixtures/tiny_transformer.py --backward
if "$PY" -c "import transformers" 2>/dev/null; then
  run gpt2 /tmp/gpt2_model.py
  run gpt2-bwd /tmp/gpt2_model.py --backward --profile-memory
else
  echo "transformers not importable: GPT-2 skipped"
fi
exit $status
