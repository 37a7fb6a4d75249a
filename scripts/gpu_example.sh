#!/usr/bin/env bash
# The H200 examples over the extended space (scripts/extended-space.toml): resnet50 bf16 at
# batch sizes 1 and 16, and torchvision's vit_b_16 bf16 at batch size 8, one worker per GPU,
# each study bounded by BUDGET; then the finalists confirmed. Studies come back as one archive.
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$OUT/studies"
for case in "resnet50 1,16" "vit_b_16 8"; do
  set -- $case
  python3 -m tuner search --model "$1" --dtype bfloat16 --batch-sizes "$2" \
      --space scripts/extended-space.toml --gpus "${GPUS:-0,1}" --budget "${BUDGET:-4m}" \
      --confirm 2 --name "h200-$1-bf16-extended" --studies-dir "$OUT/studies" \
      > "$OUT/example-$1.log" 2>&1
  tail -12 "$OUT/example-$1.log"
done
tar -czf "$OUT/examples.tgz" -C "$OUT/studies" --exclude=trials --exclude=cache \
    --exclude=artifacts . && rm -rf "$OUT/studies"
