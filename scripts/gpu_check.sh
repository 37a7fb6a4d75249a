#!/usr/bin/env bash
# Every GPU check of a change, in one command on the GPU machine (see README).
# Carry .whl (make gpu-wheels). Writes logs and Parquet files under $OUT when set.
#   GPU_SEARCH_BUDGET  seconds the example search may start trials for (default 250)
#   GPU_SKIP_TESTS=1   skip the pytest gpu tests
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tuner-gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >/dev/null || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch, optuna; print("torch", torch.__version__, "optuna", optuna.__version__, torch.cuda.get_device_name())'

if [ "${GPU_SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
fi

# The example study: resumable, so a second call finishes what the first budget left.
timeout -s TERM $(( ${GPU_SEARCH_BUDGET:-250} + ${GPU_SEARCH_GRACE:-200} )) python3 -m tuner.cli search \
    --model resnet18 --batch-sizes 1,32 --dtype float32 \
    --backend eager,inductor --mode default,reduce-overhead,max-autotune-no-cudagraphs \
    --dynamic false --name h200-resnet18 --budget "${GPU_SEARCH_BUDGET:-250}" --timeout ${GPU_TRIAL_TIMEOUT:-420} \
    > "$OUT/search.txt" 2> "$OUT/search.log"
echo "search exit: $?"
tail -5 "$OUT/search.log"
cp studies/h200-resnet18/*.parquet studies/h200-resnet18/study.db "$OUT/" 2>/dev/null
cat "$OUT/search.txt"
