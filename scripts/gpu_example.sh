#!/usr/bin/env bash
# The H200 examples over the extended space (scripts/extended-space.toml), one study per GPU at
# the same time: resnet50 bf16 at batch sizes 1 and 16 on GPU 0, torchvision's vit_b_16 bf16 at
# batch size 8 on GPU 1 (nvidia-h200-x2), each on its own half of the host's cores, each search
# bounded by BUDGET (default 5m) and its finalists confirmed twice; LIMIT (seconds, default 560)
# stops a study cleanly (SIGINT: the trial in flight ends, the files are written) before the
# device's 10-minute limit. Resumable: copy a returned study back under studies/ and run again.
# Studies come back as one archive, examples.tgz. Carry .whl (make gpu-wheels).
source "$(dirname "$0")/gpu_env.sh"
mkdir -p "$OUT/studies"
for s in studies/h200-resnet50-bf16-extended studies/h200-vit_b_16-bf16-extended; do
  [ -d "$s" ] && cp -r "$s" "$OUT/studies/"
done
half=$(( $(nproc) / 2 ))
run() {  # GPU CORES MODEL BATCH_SIZES
  CUDA_VISIBLE_DEVICES=$1 taskset -c "$2" timeout -s INT -k 60 "${LIMIT:-560}" \
    python3 -m tuner search --model "$3" --dtype bfloat16 --batch-sizes "$4" --device cuda \
      --space scripts/extended-space.toml --budget "${BUDGET:-5m}" --confirm 2 \
      --name "h200-$3-bf16-extended" --studies-dir "$OUT/studies" > "$OUT/example-$3.log" 2>&1
}
run 0 "0-$(( half - 1 ))" resnet50 1,16 &
run 1 "$half-$(( 2 * half - 1 ))" vit_b_16 8 &
wait
for m in resnet50 vit_b_16; do grep -v '^W' "$OUT/example-$m.log" | tail -12; done
tar -czf "$OUT/examples.tgz" -C "$OUT/studies" --exclude=trials --exclude=cache \
    --exclude=artifacts --exclude=references . && rm -rf "$OUT/studies"
