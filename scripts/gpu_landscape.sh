#!/usr/bin/env bash
# Record (or resume) the knob studies of issue 53 on the visible GPU, within one call:
# benchmarks/record_knobs.py runs `tuner search` over each study of the design until LIMIT
# minutes are nearly spent, never starting a trial that could run past them.
#   MODEL        resnet50 | vit_b_16 | tuner.examples:text_transformer | any torchvision name
#   BATCH_SIZES  1,16 (each study holds them all)
#   DESIGN       screen: one small study per candidate knob (eager, the base mode, the base
#                with the knob), under benchmarks/screens/NAME/; sweep: every cheap candidate
#                once in ONE study (at each batch size eager, reduce-overhead with torch's
#                settings, and that base with exactly one candidate set), under
#                benchmarks/sweeps/NAME/ (benchmarks/knob_sweep.py; ARMS and KNOBS do not
#                apply; the slow candidates stay screens); grid: the landscape, modes
#                default and reduce-overhead x five knobs both ways, under benchmarks/landscapes/;
#                plan: the units of the recording plan (benchmarks/knob_plan.py, "Recording"
#                in benchmarks/results/knobs.md) in order, the next once one is whole (MODEL,
#                BATCH_SIZES, NAME, ARMS and KNOBS are then the units')
#   NAME         default MODEL-bf16-bsB1-B2-GPU (gpu as nvidia-smi names it: h100, h200)
#   ARMS         screen: cheap (default), slow (the autotuning searches, 4-minute compile
#                budget), all, or candidate names; KNOBS: grid: five candidate names
#   LIMIT        minutes this call may spend (default 8.5)
# Resumes the studies carried in the working tree. Gives back $OUT/knobs.tgz, only study.db,
# the Parquet files and design.json at their repository paths: `tar -xzf knobs.tgz` at the
# repository root, then `python benchmarks/knobs.py`. The searches' output: $OUT/knobs.log.
# Carry .whl (make gpu-wheels).
source "$(dirname "$0")/gpu_env.sh"
python3 benchmarks/record_knobs.py --model "${MODEL:-resnet50}" \
    --batch-sizes "${BATCH_SIZES:-1,16}" --design "${DESIGN:-screen}" --name "${NAME:-}" \
    --arms "${ARMS:-cheap}" --knobs "${KNOBS:-}" --limit-min "${LIMIT:-8.5}" \
    --work /tmp/knobs-work --out "$OUT/knobs.tgz" --log "$OUT/knobs.log"
echo "exit $?"
grep -E "^(Error|Traceback)|compiled past|out of memory" "$OUT/knobs.log" | tail -5
