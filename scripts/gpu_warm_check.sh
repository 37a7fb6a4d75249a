#!/usr/bin/env bash
# Issue 55's GPU check: does a recommendation warm-start on the GPU, as production loads it?
# The same search twice (MODEL, default resnet50, bf16, reduce-overhead at batch size 1, finalists
# confirmed twice), then `tuner check` of each study twice (text, then --json). Each check runs in
# a fresh process with empty inductor and Triton caches. Writes under $OUT: warm.log (all output),
# check-<study>-<n>.txt/.json, and studies.tgz (the two studies without caches or artifacts).
# Carry .whl (make gpu-wheels).
source "$(dirname "$0")/gpu_env.sh"
MODEL=${MODEL:-resnet50}
mkdir -p "$OUT/studies"
for name in warm-a warm-b; do
  python3 -m tuner search --model "$MODEL" --dtype bfloat16 --batch-sizes 1 --device cuda \
      --backend eager,inductor --mode reduce-overhead --confirm 2 --name "$name" \
      --studies-dir "$OUT/studies" >> "$OUT/warm.log" 2>&1
  echo "search $name: exit $?"
  for n in 1 2; do
    python3 -m tuner check "$OUT/studies/$name" --batch-size 1 > "$OUT/check-$name-$n.txt" 2>&1
    echo "check $name #$n: exit $?"; cat "$OUT/check-$name-$n.txt"
  done
  python3 -m tuner check "$OUT/studies/$name" --batch-size 1 --json > "$OUT/check-$name.json" 2>>"$OUT/warm.log"
  echo "check $name --json: exit $?"
done
python3 -m tuner show "$OUT/studies/warm-a" > "$OUT/show-warm-a.txt" 2>&1
tar -czf "$OUT/studies.tgz" -C "$OUT/studies" --exclude=trials --exclude=cache \
    --exclude=artifacts --exclude=references warm-a warm-b && rm -rf "$OUT/studies"
