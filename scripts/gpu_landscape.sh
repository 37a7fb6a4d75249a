#!/usr/bin/env bash
# Record (or resume) the exhaustive grid of benchmarks/landscapes/: resnet18 bf16 at batch size
# 16, inductor's two modes times five knobs, plus eager: 66 configs, each one real trial.
# GPUS=0,1 (default) runs one worker per GPU, GPUS=none one search on the visible GPU; BUDGET bounds this run (resume by running again
# with the study folder copied back to $LANDSCAPES). Writes the study under $OUT/landscapes.
source "$(dirname "$0")/gpu_env.sh"
LANDSCAPES=${LANDSCAPES:-benchmarks/landscapes}
NAME=resnet18-bf16-bs16-h200
mkdir -p "$OUT/landscapes"
if [ -d "$LANDSCAPES/$NAME" ]; then cp -r "$LANDSCAPES/$NAME" "$OUT/landscapes/"; fi
if [ "${GPUS:-0,1}" = none ]; then gpus=(--device cuda); else gpus=(--gpus "${GPUS:-0,1}"); fi
python3 -m tuner search --model resnet18 --dtype bfloat16 --batch-sizes 16 \
    --backend eager,inductor --mode default,reduce-overhead --channels-last false,true \
    --inductor-option coordinate_descent_tuning=false,true --inductor-option freezing=false,true \
    --inductor-option epilogue_fusion=false,true --inductor-option shape_padding=false,true \
    --min-seconds 1 --confirm 0 --budget "${BUDGET:-8m}" "${gpus[@]}" \
    --name "$NAME" --studies-dir "$OUT/landscapes" > "$OUT/landscape.log" 2>&1
tail -4 "$OUT/landscape.log"
