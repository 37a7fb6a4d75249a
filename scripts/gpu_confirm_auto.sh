#!/usr/bin/env bash
# `--confirm auto` on the H200: resnet50 bf16 at batch size 16, eager against inductor's default
# and reduce-overhead, each finalist measured again in fresh processes until its 95% interval is
# within 5% of its p50 (or 6 repeats). Carry .whl (make gpu-wheels). Writes under $OUT.
source "$(dirname "$0")/gpu_env.sh"
export CUDA_VISIBLE_DEVICES=${GPU:-0}
NAME=${NAME:-h200-resnet50-bf16}
python3 -m tuner search --model resnet50 --dtype bfloat16 --batch-sizes 16 \
    --backend eager,inductor --mode default,reduce-overhead --dynamic false --name "$NAME" \
    --inductor-option none --channels-last false \
    --timeout 300 --confirm 0 > "$OUT/search.txt" 2> "$OUT/search.log"
echo "search exit: $?"
timeout -s INT -k 60 "${CONFIRM_BUDGET:-330}" python3 -m tuner confirm "studies/$NAME" --repeats auto \
    --timeout 300 > "$OUT/confirm.txt" 2> "$OUT/confirm.log"
echo "confirm exit: $?"
grep -v '^W' "$OUT/confirm.log" | tail -25
cat "$OUT/confirm.txt"
cp "studies/$NAME"/*.parquet "studies/$NAME/study.db" "$OUT/" 2>/dev/null
