#!/usr/bin/env bash
# Every GPU check of a change, in one command on the GPU machine (see docs/offline-gpu.md).
# Carry .whl (make gpu-wheels). Writes logs and Parquet files under $OUT when set.
#   GPU_SEARCH_BUDGET  seconds the example search may start trials for (default 250)
#   GPU_SKIP_TESTS=1   skip the pytest gpu tests
#   GPU_CONFIRM=1      also measure the example study's finalists again (fresh processes: spread,
#                      interval, warm and from-artifacts compiles), then the first production call
#                      cold / from artifacts / warm. GPU_CONFIRM_REPEATS (default 3),
#                      GPU_CONFIRM_BUDGET seconds (default 900).
#   GPU_FIDELITY=1     benchmarks/fidelity.py: the tuner's p50 against independent timers
#   GPU_OVERHEAD=1     benchmarks/trial_overhead.py --measure: fresh vs pre-started trial processes,
#                      resnet50 bf16 and the factory tuner.examples:text_encoder bf16
#   GPU_SCALEOUT=1     benchmarks/trials_per_hour.py --gpus 0 --gpus 0,1 (nvidia-h200-x2): the
#                      same fixed grid on one GPU and on two; TPH_BATCH_SIZES (default 1,8,32:
#                      15 configs; 1,8,16,32: 20, which two workers split evenly)
#   GPU_IMPORT=1       benchmarks/import_beside_compile.py: cold compiles alone and beside the
#                      next trial's pre-started import, 3 each
#   GPU_SEARCH=0       skip the example search
#   GPU_VIT=1          a random vit_b_16 bf16, eager and inductor at batch sizes 1 and 8: its
#                      head is drawn, not zero (tuner.trial.build), so its output varies and the
#                      check against eager measures an error
#   GPU_LONG=1         resnet18 max-autotune at batch size 32 under --compile-timeout 100s: the
#                      search's "still running after 1 min (in its first call, compiling)" line
source "$(dirname "$0")/gpu_env.sh"

if [ "${GPU_SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -q -m gpu tests -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee "$OUT/gpu-tests.log" | tail -15
fi

# The example study: resumable, so a second call finishes what the first budget left.
if [ "${GPU_SEARCH:-1}" = 1 ]; then
timeout -s TERM $(( ${GPU_SEARCH_BUDGET:-250} + ${GPU_SEARCH_GRACE:-200} )) python3 -m tuner search \
    --model resnet18 --batch-sizes 1,32 --dtype float32 \
    --backend eager,inductor --mode default,reduce-overhead,max-autotune-no-cudagraphs \
    --dynamic false --inductor-option none --channels-last false --name h200-resnet18 --budget "${GPU_SEARCH_BUDGET:-250}" --timeout ${GPU_TRIAL_TIMEOUT:-420} \
    --confirm 0 > "$OUT/search.txt" 2> "$OUT/search.log"
echo "search exit: $?"
tail -5 "$OUT/search.log"
cp studies/h200-resnet18/*.parquet studies/h200-resnet18/study.db "$OUT/" 2>/dev/null
cat "$OUT/search.txt"
fi

if [ "${GPU_VIT:-0}" = 1 ]; then
  timeout -s TERM 400 python3 -m tuner search --model vit_b_16 --batch-sizes 1,8 \
      --dtype bfloat16 --backend eager,inductor --mode default --dynamic false \
      --inductor-option none --channels-last false --name gpu-vit --confirm 0 \
      --studies-dir "$OUT/studies" > "$OUT/vit-search.txt" 2> "$OUT/vit-search.log"
  echo "vit search exit: $?"
  tail -3 "$OUT/vit-search.log"
  python3 -c 'import sys, pandas as pd; df = pd.read_parquet(sys.argv[1]); print(df[["label", "batch_size", "status", "correct", "max_abs_error", "tolerance", "correctness_note"]].to_string())' \
      "$OUT/studies/gpu-vit/trials.parquet" | tee "$OUT/vit-errors.txt"
fi
if [ "${GPU_LONG:-0}" = 1 ]; then
  timeout -s TERM 300 python3 -m tuner search --model resnet18 --batch-sizes 32 \
      --backend eager,inductor --mode max-autotune --dynamic false --inductor-option none \
      --channels-last false --compile-timeout 100s --name gpu-long --confirm 0 \
      --studies-dir "$OUT/studies" > "$OUT/long-search.txt" 2> "$OUT/long-search.log"
  echo "long search exit: $?"
  grep -E "running|still running|\[[0-9]+/" "$OUT/long-search.log"
fi
if [ "${GPU_FIDELITY:-0}" = 1 ]; then
  python3 benchmarks/fidelity.py --device cuda --out "$OUT/fidelity.md" 2> "$OUT/fidelity.log"
  echo "fidelity exit: $?"
fi
if [ "${GPU_OVERHEAD:-0}" = 1 ]; then
  # A torchvision model, then a factory model: each a short search, fresh vs pre-started.
  python3 benchmarks/trial_overhead.py --measure --machine h200 --device cuda --model resnet50 \
      --dtype bfloat16 --batch-sizes 1,32 --dynamic false,true \
      --out "$OUT/trial_overhead-h200.md" 2> "$OUT/trial-overhead.log" | tail -4
  python3 benchmarks/trial_overhead.py --measure --machine h200 --device cuda \
      --model tuner.examples:text_encoder --dtype bfloat16 --batch-sizes 1,32 --dynamic false,true \
      --out "$OUT/trial_overhead-h200-factory.md" 2>> "$OUT/trial-overhead.log" | tail -4
fi
if [ "${GPU_SCALEOUT:-0}" = 1 ]; then
  # The same fixed grid on one GPU, then on two; a set finished in /tmp/tph-keep is read back,
  # so a second call on a warm machine finishes what a cut-off first one left.
  # Three batch sizes (15 configs): with 10, start-up and the last trial's tail were a fifth
  # of the two-GPU run's wall time (benchmarks/trials_per_hour.py, below, measures it).
  python3 benchmarks/trials_per_hour.py --gpus 0 --gpus 0,1 --batch-sizes "${TPH_BATCH_SIZES:-1,8,32}" --keep /tmp/tph-keep \
      --out "$OUT/trials_per_hour-h200.md" 2> "$OUT/trials-per-hour.log"
  echo "trials per hour exit: $?"; tail -1 "$OUT/trials_per_hour-h200.md"
fi
if [ "${GPU_IMPORT:-0}" = 1 ]; then
  python3 benchmarks/import_beside_compile.py --device cuda --model resnet18 --dtype float32 \
      --batch-size 1 --repeats 3 --out "$OUT/import_beside_compile-h200.md" \
      2> "$OUT/import-beside-compile.log" | tail -1
fi

# Finalists measured again, and warm starts. The study's
# trial caches do not travel (studies/*/cache is not in git), so on a fresh machine the first
# repeat of each compiled finalist compiles cold into its cache, the second is warm and saves the
# artifacts, the third starts from them: 3 repeats give all three. Resumable like the search.
if [ "${GPU_CONFIRM:-0}" = 1 ]; then
  timeout -s TERM "${GPU_CONFIRM_BUDGET:-900}" python3 -m tuner confirm studies/h200-resnet18 \
      --repeats "${GPU_CONFIRM_REPEATS:-3}" --timeout ${GPU_TRIAL_TIMEOUT:-420} \
      > "$OUT/confirm.txt" 2> "$OUT/confirm.log"
  echo "confirm exit: $?"
  grep -v '^W' "$OUT/confirm.log" | tail -20
  python3 benchmarks/repeat_spread.py studies/h200-resnet18 | tee "$OUT/repeat_spread.txt"
  for bs in 1 32; do
    python3 benchmarks/warm_start.py studies/h200-resnet18 --batch-size $bs --repeats 2 \
        | tee -a "$OUT/warm_start.txt"
  done
  cp studies/h200-resnet18/*.parquet studies/h200-resnet18/study.db "$OUT/" 2>/dev/null
  du -sh studies/h200-resnet18/artifacts studies/h200-resnet18/cache 2>/dev/null
fi
