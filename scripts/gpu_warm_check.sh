#!/usr/bin/env bash
# Issue 55's GPU check: does a recommendation warm-start on the GPU, as production loads it?
# The same search once per name in STUDIES (default "warm-a warm-b"): MODEL (default resnet50),
# bf16, reduce-overhead at batch size 1, finalists confirmed twice; then `tuner check` of each
# study twice (text) and once more with --json. Each check runs in a fresh process with empty
# inductor and Triton caches. Gives back $OUT/warm.tgz: warm/warm.log (the searches' output and
# the artifacts' sizes), warm/check-<study>-<n>.txt and .json, warm/show.txt (the first study)
# and the studies without caches or artifacts (warm/studies/).
# Carry .whl (make gpu-wheels).
source "$(dirname "$0")/gpu_env.sh"
MODEL=${MODEL:-resnet50}
W=/tmp/warm; rm -rf $W; mkdir -p "$W/studies"
for name in ${STUDIES:-warm-a warm-b}; do
  python3 -m tuner search --model "$MODEL" --dtype bfloat16 --batch-sizes 1 --device cuda \
      --backend eager,inductor --mode reduce-overhead --inductor-option none --channels-last false \
      --confirm 2 --name "$name" \
      --studies-dir "$W/studies" >> "$W/warm.log" 2>&1
  echo "search $name: exit $?"
  for n in 1 2; do
    python3 -m tuner check "$W/studies/$name" --batch-size 1 > "$W/check-$name-$n.txt" 2>&1
    echo "check $name #$n: exit $?"; cat "$W/check-$name-$n.txt"
  done
  ls -l "$W/studies/$name/artifacts" >> "$W/warm.log" 2>&1
  python3 -m tuner check "$W/studies/$name" --batch-size 1 --json > "$W/check-$name.json" 2>>"$W/warm.log"
  echo "check $name --json: exit $?"
done
first=(${STUDIES:-warm-a})
python3 -m tuner show "$W/studies/${first[0]}" > "$W/show.txt" 2>&1
tar -czf "$OUT/warm.tgz" -C /tmp --exclude=trials --exclude=cache --exclude=artifacts \
    --exclude=references warm
