#!/usr/bin/env bash
# Issue 12's per-trial figures on the two-H200 machine, in one call (carry .whl): the tuner's
# overhead per trial (benchmarks/trial_overhead.py --measure), resnet50 bf16, both GPUs at once,
# each on its own half of the host's cores:
#   GPU 0: fresh processes against pre-started ones: trial_overhead-h200.md;
#   GPU 1: pre-started processes (the default: the device readied ahead) against ones that do
#          not ready it (TUNER_PREWARM=0), each config's latency side by side:
#          trial_overhead-h200-prewarm.md;
#          then, with FACTORY=1, the factory tuner.examples:text_encoder fresh against
#          pre-started: trial_overhead-h200-factory.md (bounded by FACTORY_LIMIT seconds).
# PREWARM_FIDELITY=1 instead runs benchmarks/prewarm_fidelity.py on both GPUs at once, opposite
# orders, REPEATS pairs each (default 4): prewarm_fidelity-TAG-gpu{0,1}.md (TAG: $FIDELITY_TAG,
# default the month, day, hour and minute), then pools them with the files in $POOL_WITH (earlier
# calls' files: those behind benchmarks/results/prewarm_fidelity.md are in git at commit c9e225e,
# `git show c9e225e:benchmarks/prewarm-fidelity-h200-1201-1059-gpu0.md` and the others that page
# names): prewarm_fidelity.md.
# IMPORT=1 then measures the import beside the compile on GPU 0. FIRST_CALL=1 first runs
# benchmarks/first_call.py on GPU 0 (what a trial process's first eager call of resnet50
# costs). AB=1 instead runs pre-started resnet50 trials forked from the template against fresh
# spares, on both GPUs. GPU_TIME=1 instead runs the GPU tests (pytest -m gpu, 237 s on 2026-12-01;
# TESTS_LIMIT, default 360 s, bounds them), then pre-started
# resnet50 trials with and without TUNER_GPU_TIME=1 on GPU 0, every core:
# trial_overhead-h200-gpu-time.md. LIMIT bounds each measurement (seconds, default 540). Writes under $OUT.
# On a machine with one GPU (nvidia-h200) the default and PREWARM_FIDELITY=1 run on GPU 0 alone,
# every core: fresh, pre-started and no-prewarm in one trial_overhead-h200.md; the fidelity pairs
# in prewarm_fidelity-TAG-gpu0.md. Each file is, or is a section of, benchmarks/results/<script>.md
# or benchmarks/results/<script>-h200.md.
source "$(dirname "$0")/gpu_env.sh"
gpus=$(nvidia-smi -L | wc -l)
if [ "${FIRST_CALL:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 benchmarks/first_call.py --repeats 1 \
      --out "$OUT/first_call.md" 2> "$OUT/first-call.log" | tail -6
fi
half=$(( $(nproc) / 2 ))
overhead() {  # GPU CORES MODEL WAYS OUT [LIMIT]
  CUDA_VISIBLE_DEVICES=$1 taskset -c "$2" timeout -s INT "${6:-${LIMIT:-540}}" \
    python3 benchmarks/trial_overhead.py --measure --machine h200 --device cuda --model "$3" \
      --dtype bfloat16 --batch-sizes 1,32 --dynamic "${DYNAMIC:-false}" --ways "$4" \
      --out "$OUT/$5" 2> "$OUT/$5.log" | tail -2
}
if [ "${PREWARM_FIDELITY:-0}" = 1 ]; then
  tag=${FIDELITY_TAG:-$(date +%m%d-%H%M)}
  for g in $(seq 0 $(( gpus > 1 ? 1 : 0 ))); do
    first=$([ "$g" = 0 ] && echo on || echo off)
    cores=$([ "$gpus" = 1 ] && echo "0-$(( 2 * half - 1 ))" || echo "$(( g * half ))-$(( g * half + half - 1 ))")
    CUDA_VISIBLE_DEVICES=$g taskset -c "$cores" \
      timeout -s INT "${LIMIT:-540}" python3 benchmarks/prewarm_fidelity.py \
        --repeats "${REPEATS:-4}" --first "$first" --out "$OUT/prewarm_fidelity-$tag-gpu$g.md" \
        > "$OUT/prewarm-fidelity-gpu$g.log" 2>&1 &
  done
  wait
  tail -n 2 "$OUT"/prewarm_fidelity-"$tag"-gpu*.md
  python3 benchmarks/prewarm_fidelity.py --pool \
      ${POOL_WITH:-} "$OUT"/prewarm_fidelity-"$tag"-gpu*.md --out "$OUT/prewarm_fidelity.md" | tail -2
  exit
fi
if [ "${GPU_TIME:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout -s INT "${TESTS_LIMIT:-360}" python3 -m pytest -q -m gpu tests \
      -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" | tail -4
  overhead 0 "0-$(( 2 * half - 1 ))" resnet50 pre-started,gpu-time trial_overhead-h200-gpu-time.md
  exit
fi
if [ "${AB:-0}" = 1 ]; then
  # Pre-started trials of resnet50 forked from the template against fresh spares
  # (TUNER_TEMPLATE=0), each GPU in the other order: trial_overhead-h200-template-ab-gpu{0,1}.md.
  ab() {  # GPU CORES WAYS
    CUDA_VISIBLE_DEVICES=$1 taskset -c "$2" timeout -s INT "${LIMIT:-540}" \
      python3 benchmarks/trial_overhead.py --measure --machine h200 --device cuda --model resnet50 \
        --dtype bfloat16 --batch-sizes 1,32 --dynamic false --modes default --ways "$3" \
        --out "$OUT/trial_overhead-h200-template-ab-gpu$1.md" 2> "$OUT/template-ab-gpu$1.log" | tail -1
  }
  ab 0 "0-$(( half - 1 ))" pre-started,no-template &
  ab 1 "$half-$(( 2 * half - 1 ))" no-template,pre-started &
  wait
  exit
fi
if [ "$gpus" = 1 ]; then
  overhead 0 "0-$(( 2 * half - 1 ))" resnet50 fresh,pre-started,no-prewarm trial_overhead-h200.md
  exit
fi
overhead 0 "0-$(( half - 1 ))" resnet50 fresh,pre-started trial_overhead-h200.md &
{
  overhead 1 "$half-$(( 2 * half - 1 ))" resnet50 no-prewarm,pre-started trial_overhead-h200-prewarm.md
  if [ "${FACTORY:-0}" = 1 ]; then
    overhead 1 "$half-$(( 2 * half - 1 ))" tuner.examples:text_encoder fresh,pre-started \
        trial_overhead-h200-factory.md "${FACTORY_LIMIT:-${LIMIT:-540}}"
  fi
} &
wait
if [ "${IMPORT:-0}" = 1 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout -s INT "${LIMIT:-540}" python3 benchmarks/import_beside_compile.py \
      --device cuda --model resnet18 --dtype float32 --batch-size 1 --repeats 3 \
      --out "$OUT/import_beside_compile-h200.md" 2> "$OUT/import-beside-compile.log" | tail -1
fi
