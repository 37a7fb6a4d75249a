#!/usr/bin/env bash
# A short search on the GPU whose finalists are measured again (--confirm 2): what `tuner show`
# prints of each finalist's median p50 and p99 over its processes, the front chosen on those
# medians, benchmarks/repeat_spread.py over the study, and `tuner recommend` at the first batch
# size without a limit and with --max-p99-ms just under the recommended config's median p99.
# Carry .whl (make gpu-wheels); writes under $OUT.
#   GPU_TESTS=1  first run the pytest gpu tests (about 4 minutes on the H200)
#   BATCH_SIZES (default 1,32), DYNAMIC (default false): the space searched
#   CONFIRM (default 2): --confirm, a number of repeats or auto
source "$(dirname "$0")/gpu_env.sh"
if [ "${GPU_TESTS:-0}" = 1 ]; then
  python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tail -15 | tee "$OUT/gpu-tests.log"
fi
rm -rf studies/h200-median
timeout -s TERM "${SEARCH_S:-330}" python3 -m tuner search --model resnet18 \
    --batch-sizes "${BATCH_SIZES:-1,32}" --dtype float32 --backend eager,inductor \
    --mode default,reduce-overhead --dynamic "${DYNAMIC:-false}" \
    --inductor-option none --channels-last false --name h200-median --confirm "${CONFIRM:-2}" --timeout 300 \
    > "$OUT/search.txt" 2> "$OUT/search.log"
echo "search exit: $?"
grep -v '^W' "$OUT/search.log" | tail -25
python3 -m tuner show studies/h200-median > "$OUT/show.txt" 2>&1
python3 -m tuner show studies/h200-median --all > "$OUT/show-all.txt" 2>&1
python3 benchmarks/repeat_spread.py --markdown studies/h200-median > "$OUT/repeat_spread.md" 2>&1
first_bs=${BATCH_SIZES:-1,32}; first_bs=${first_bs%%,*}
python3 -m tuner recommend studies/h200-median --batch-size "$first_bs" > "$OUT/recommend.txt" 2>&1
p99=$(python3 -m tuner recommend studies/h200-median --batch-size "$first_bs" --json \
      | python3 -c 'import json, sys; print(round(json.load(sys.stdin)["measured"]["latency_ms_p99_median"] * 0.99, 3))')
echo "--- tuner recommend --batch-size $first_bs --max-p99-ms $p99 (1 % under its median p99)" >> "$OUT/recommend.txt"
python3 -m tuner recommend studies/h200-median --batch-size "$first_bs" --max-p99-ms "$p99" >> "$OUT/recommend.txt" 2>&1
echo "exit: $?" >> "$OUT/recommend.txt"
cat "$OUT/show.txt" "$OUT/repeat_spread.md" "$OUT/recommend.txt"
cp studies/h200-median/trials.parquet studies/h200-median/pareto.parquet "$OUT/" 2>/dev/null
