#!/usr/bin/env bash
# Record (or resume) the exhaustive grid of benchmarks/landscapes/: alexnet bf16 at batch size 16
# (MODEL=... for another), inductor's two modes times five knobs, plus eager: 66 configs, each
# one real trial. (resnet18 took about 30 s a trial on one H200: 33 GPU-minutes for the grid.)
# GPUS=0,1 (default) runs one worker per GPU, GPUS=none one search on the visible GPU; BUDGET bounds this run (resume by running again
# with the study folder copied back to $LANDSCAPES). Writes the study under $OUT/landscapes.
source "$(dirname "$0")/gpu_env.sh"
LANDSCAPES=${LANDSCAPES:-benchmarks/landscapes}
MODEL=${MODEL:-alexnet}
NAME=$MODEL-bf16-bs16-h200
mkdir -p "$OUT/landscapes"
if [ -d "$LANDSCAPES/$NAME" ]; then cp -r "$LANDSCAPES/$NAME" "$OUT/landscapes/"; fi
if [ "${GPUS:-0,1}" = none ]; then gpus=(--device cuda); else gpus=(--gpus "${GPUS:-0,1}"); fi
python3 -m tuner search --model "$MODEL" --dtype bfloat16 --batch-sizes 16 \
    --backend eager,inductor --mode default,reduce-overhead --channels-last false,true \
    --inductor-option coordinate_descent_tuning=false,true --inductor-option freezing=false,true \
    --inductor-option epilogue_fusion=false,true --inductor-option shape_padding=false,true \
    --min-seconds 1 --confirm 0 --budget "${BUDGET:-8m}" "${gpus[@]}" \
    --name "$NAME" --studies-dir "$OUT/landscapes" > "$OUT/landscape.log" 2>&1
tail -4 "$OUT/landscape.log"
# $OUT gives back at most 8 files: the study folder as one archive, without per-trial folders.
tar -czf "$OUT/landscape.tgz" -C "$OUT/landscapes" --exclude=trials --exclude=cache "$NAME" \
    && rm -rf "$OUT/landscapes"
