#!/usr/bin/env bash
# One example study over the extended space (scripts/extended-space.toml) on the visible GPU,
# with the command of scripts/gpu_example.sh, named after the GPU it ran on: MODEL (resnet50) at
# BATCH_SIZES (1,16) in bf16 makes studies/<gpu>-<model>-bf16-extended, <gpu> being h100 or
# h200 as nvidia-smi names the card. BUDGET (default 5m) bounds the search, its finalists are
# confirmed twice, LIMIT (seconds, default 540) stops it cleanly (SIGINT) before the device's
# 10-minute limit. Resumable: copy the returned study back under studies/ and run again.
# START_FROM (a study, e.g. studies/h200-resnet50-bf16-extended) measures that study's finalists
# and fronts first (tuner search --start-from) and names the study ...-from-<its GPU>.
# Comes back as one archive, study.tgz, without caches. Carry .whl (make gpu-wheels).
source "$(dirname "$0")/gpu_env.sh"
MODEL=${MODEL:-resnet50}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oiE 'h100|h200' | tr A-Z a-z)
name="${gpu:-gpu}-$MODEL-bf16-extended"
start=()
if [ -n "${START_FROM:-}" ]; then
  start=(--start-from "$START_FROM")
  name="$name-from-$(basename "$START_FROM" | cut -d- -f1)"
fi
mkdir -p "$OUT/studies"
[ -d "studies/$name" ] && cp -r "studies/$name" "$OUT/studies/"
timeout -s INT -k 60 "${LIMIT:-540}" \
  python3 -m tuner search --model "$MODEL" --dtype bfloat16 --batch-sizes "${BATCH_SIZES:-1,16}" \
    --device cuda --space scripts/extended-space.toml --budget "${BUDGET:-5m}" --confirm 2 \
    --name "$name" --studies-dir "$OUT/studies" "${start[@]}" > "$OUT/study-$MODEL.log" 2>&1
echo "exit $?"
grep -v '^W' "$OUT/study-$MODEL.log" | tail -12
python3 -m tuner show "$OUT/studies/$name" > "$OUT/show-$MODEL.txt" 2>&1
tar -czf "$OUT/study.tgz" -C "$OUT/studies" --exclude=trials --exclude=cache \
    --exclude=artifacts --exclude=references "$name" && rm -rf "$OUT/studies"
