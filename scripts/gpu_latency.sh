#!/usr/bin/env bash
# The GPU figures of per-request and back-to-back latency, in one command on a machine with two
# GPUs (or one: set GPUS=0): the fidelity benchmark, half of its cases on each GPU, then the
# gpu-marked tests. Carry .whl (make gpu-wheels). Writes everything under $OUT.
source "$(dirname "$0")/gpu_env.sh"
if [ "${GPUS:-0,1}" = "0,1" ]; then
  # Each half on its own GPU and its own half of the host's cores: a compile in one half must
  # not take the CPU that the other half's launch-bound configs are timed on.
  half=$(( $(nproc) / 2 ))
  # CASES_A / CASES_B: MODEL:DTYPE:BATCH,... for each GPU; FIDELITY_LIMIT bounds each half (s).
  CUDA_VISIBLE_DEVICES=0 taskset -c 0-$(( half - 1 )) timeout -s INT "${FIDELITY_LIMIT:-1200}" python3 benchmarks/fidelity.py --cases "${CASES_A:-resnet18:float32:1,resnet18:float32:32}" \
      --json-out "$OUT/fidelity-gpu0.json" > "$OUT/fidelity-gpu0.md" 2> "$OUT/fidelity-gpu0.log" &
  CUDA_VISIBLE_DEVICES=1 taskset -c $half-$(( 2 * half - 1 )) timeout -s INT "${FIDELITY_LIMIT:-1200}" python3 benchmarks/fidelity.py --cases "${CASES_B:-resnet50:bfloat16:16,resnet50:bfloat16:64}" \
      --json-out "$OUT/fidelity-gpu1.json" > "$OUT/fidelity-gpu1.md" 2> "$OUT/fidelity-gpu1.log" &
  wait
  python3 benchmarks/fidelity.py --combine "$OUT/fidelity-gpu0.json" "$OUT/fidelity-gpu1.json" \
      --out "$OUT/fidelity.md"
else
  python3 benchmarks/fidelity.py --json-out "$OUT/fidelity.json" --out "$OUT/fidelity.md" \
      2> "$OUT/fidelity.log"
fi
tail -3 "$OUT"/fidelity-*.log
if [ "${GPU_SKIP_TESTS:-0}" != 1 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout -s INT "${TESTS_LIMIT:-900}" python3 -m pytest -q -m gpu tests -p no:cacheprovider --continue-on-collection-errors 2>&1 \
      | tee "$OUT/gpu-tests.log" | tail -8
fi
