#!/usr/bin/env bash
# The checks that need a GPU (none runs in CI), in one script for a lent GPU machine:
#   1. tests/gpu (memory per layer against torch.cuda's statistics included) and torchprof's own
#      suite (its CUDA test and README quickstart);
#   2. CUDA runs of transformers (torch's nn.MultiheadAttention; Hugging Face GPT-2 from a config
#      when transformers is importable), forward, training step, --flops;
#   3. torchrun with nccl, one rank per GPU, --backward --ddp --profile-memory (per-rank peaks);
#   4. scripts/check_coverage.py on that machine's CPU (quieter than a shared 2-core one);
#   5. compiled models on CUDA (inductor's Triton kernels per layer): tests/gpu/test_compiled_cuda.py
#      runs in step 1; here a --compile --compare-eager run of the transformer.
# Sessions and logs go to $OUT (default ./gpu-out); render them anywhere with `hybridprof report`.
#   bash scripts/gpu_check.sh
# Wheels in .whl/ (e.g. libcst for another Python) are installed first when present; hybridprof is
# installed into /tmp/site (templates included) for the command-line runs.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
SITE=/tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl || exit 1
fi
"$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade \
  --target "$SITE" . >/dev/null || exit 1
export PYTHONPATH=$SITE
LOG=$OUT/runs.log
: >"$LOG"
"$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no CUDA')" | tee -a "$LOG"
status=0
echo "== tests/gpu, tests/torchprof_suite"
"$PY" -m pytest -q -p no:cacheprovider -o addopts="" tests/gpu tests/torchprof_suite 2>&1 \
  | tee "$OUT/gpu-tests.log" | tail -25 || status=1
cat > /tmp/gpt2_model.py <<'PYEOF'
import torch
from transformers import GPT2Config, GPT2Model

def build_model():
    torch.manual_seed(0)
    return GPT2Model(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1000, n_positions=256))

def example_inputs():
    return (torch.randint(0, 1000, (4, 128)),)
PYEOF
run() {  # name, model file, extra args... (the command runs outside the checkout: installed copy)
  local name=$1 file=$2; shift 2
  echo "== run $name $*" | tee -a "$LOG"
  (cd /tmp && "$PY" -m hybridprof run "$file" --device cuda --iters 10 --warmup 3 \
    -o "$OUT/$name.json" --force "$@") >>"$LOG" 2>&1 || { status=1; echo "FAILED: $name" | tee -a "$LOG"; }
}
run mha "$REPO/tests/fixtures/tiny_transformer.py"
run mha-bwd-flops "$REPO/tests/fixtures/tiny_transformer.py" --backward --flops
run mha-bwd-memory "$REPO/tests/fixtures/tiny_transformer.py" --backward --profile-memory --flops
if "$PY" -c "import transformers" 2>/dev/null; then
  run gpt2 /tmp/gpt2_model.py
  run gpt2-bwd /tmp/gpt2_model.py --backward --profile-memory --flops
else
  echo "transformers not importable: GPT-2 skipped" | tee -a "$LOG"
fi
run mha-compiled "$REPO/tests/fixtures/compiled_models.py" --compile --compare-eager
rm -f "$OUT/mha-bwd-flops.json" "$OUT/gpt2.json" "$OUT/compare.json"   # at most 8 files come back
echo "== torchrun nccl, $("$PY" -c 'import torch; print(torch.cuda.device_count())') GPU(s)" | tee -a "$LOG"
(cd /tmp && timeout 300 "$PY" -m torch.distributed.run --standalone \
  --nproc-per-node "$("$PY" -c 'import torch; print(torch.cuda.device_count())')" \
  -m hybridprof run "$REPO/tests/fixtures/ranked_net.py" --backward --ddp --profile-memory \
  --warmup 2 --iters 5 \
  --out-dir /tmp/nccl --force) >>"$LOG" 2>&1 || { status=1; echo "FAILED: torchrun nccl" | tee -a "$LOG"; }
cp /tmp/nccl/session-merged.json "$OUT/nccl-merged.json" 2>/dev/null
echo "== check_coverage (CPU)" | tee -a "$LOG"
CUDA_VISIBLE_DEVICES="" "$PY" scripts/check_coverage.py scripts/coverage_models/*.py --iters 20 --chain 1000 \
  >>"$LOG" 2>&1 || { status=1; echo "FAILED: check_coverage" | tee -a "$LOG"; }
tail -60 "$LOG"
exit $status
