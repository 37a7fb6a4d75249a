#!/usr/bin/env bash
# Why launch-bound latency moves between processes (issue 10): benchmarks/launch_variance.py on
# one GPU, then the fidelity cases of resnet50 bf16 at batch size 16 with the timing thread of
# the trial and of the independent timer pinned to the fastest core the sweep found.
source "$(dirname "$0")/gpu_env.sh"
python3 benchmarks/launch_variance.py --fresh "${FRESH:-5}" --out "$OUT/launch_variance.md" \
    --json-out "$OUT/launch_variance.json" 2> "$OUT/launch-variance.log"
tail -25 "$OUT/launch_variance.md"
core=$(python3 -c "
import json; rows=json.load(open('$OUT/launch_variance.json'))['sweep']
cores=[r for r in rows if r['case'].startswith('core ')]
print(min(cores, key=lambda r: r['request_ms'])['case'].split()[1])")
echo "timing core: $core"
TUNER_TIMING_CPU=$core python3 benchmarks/fidelity.py --cases ${CASES:-resnet50:bfloat16:16} \
    --json-out "$OUT/fidelity-pinned.json" > "$OUT/fidelity-pinned.md" 2> "$OUT/fidelity-pinned.log"
tail -6 "$OUT/fidelity-pinned.md"
