# Sourced by the scripts/gpu_*.sh scripts: the repository root as the working folder, $OUT for
# results, and optuna's carried wheels (make gpu-wheels) installed beside the machine's torch.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/tuner-gpu-out}; mkdir -p "$OUT"
# Once per machine: a second script sourcing this while the first runs must not rewrite the
# packages under the first one's imports.
if [ ! -f /tmp/site/.tuner-wheels ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl >/dev/null || { echo "wheel install failed"; exit 1; }
  touch /tmp/site/.tuner-wheels
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch, optuna; print("torch", torch.__version__, "optuna", optuna.__version__)'
