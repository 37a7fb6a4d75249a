"""The first call in production: cold, from the study's saved compile artifacts, and warm.

    python benchmarks/warm_start.py studies/h200-resnet18 --batch-size 32 [--repeats 3]

The study's recommended config (objective latency) is applied the way production code would,
in fresh processes, and the first call after ``rec.apply(model)`` is timed (synchronised):

- cold: empty inductor and triton caches, ``rec.apply(model, warm_start=False)``;
- artifacts: empty caches, ``rec.apply(model)``, which loads the study's artifacts file first
  (the time includes loading it);
- warm: the cold process's cache folders again, ``warm_start=False`` (a second process).

Each process also reports inductor's FX-graph cache hits and misses, so a "warm" start that
compiled cold anyway shows up. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def child(study: str, batch_size: int, warm_start: bool) -> None:
    import torch
    from torch._dynamo.utils import counters

    import tuner
    from tuner.trial import build as workload

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = tuner.recommend(study, batch_size=batch_size)
    model, inputs = workload.build(rec.workload, batch_size)
    sync = torch.cuda.synchronize if rec.workload.device.startswith("cuda") else (lambda: None)
    started = time.perf_counter()
    compiled = rec.apply(model, warm_start=warm_start)
    apply_s = time.perf_counter() - started
    with torch.no_grad():
        sync()
        started = time.perf_counter()
        compiled(*inputs)
        sync()
        first_s = time.perf_counter() - started
    print(json.dumps({"config": rec.config.label, "compiled": rec.config.compiled,
                      "apply_s": apply_s, "first_call_s": first_s,
                      "hits": counters["inductor"]["fxgraph_cache_hit"],
                      "misses": counters["inductor"]["fxgraph_cache_miss"],
                      "artifacts": str(rec.artifacts_path), "torch": torch.__version__}))


def run(study: str, batch_size: int, warm_start: bool, cache: Path) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
           "TRITON_CACHE_DIR": str(cache / "triton"), "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", study, "--batch-size",
                           str(batch_size)] + ([] if warm_start else ["--no-warm-start"]),
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("study")
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-warm-start", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.study, args.batch_size, not args.no_warm_start)
        return
    rows: dict[str, list[dict]] = {"cold": [], "artifacts": [], "warm": []}
    for _ in range(args.repeats):
        cache = Path(tempfile.mkdtemp(prefix="tuner-bench-"))
        empty = Path(tempfile.mkdtemp(prefix="tuner-bench-"))
        try:
            rows["cold"].append(run(args.study, args.batch_size, False, cache))
            rows["warm"].append(run(args.study, args.batch_size, False, cache))
            rows["artifacts"].append(run(args.study, args.batch_size, True, empty))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(empty, ignore_errors=True)
    first = rows["cold"][0]
    if not first["compiled"]:
        sys.exit(f"the recommended config is {first['config']}: nothing is compiled")
    print(f"study {args.study}, batch size {args.batch_size}: {first['config']}, torch "
          f"{first['torch']}, artifacts {first['artifacts']}; {args.repeats} processes each")
    print(f"{'start':<10} {'apply s':>8} {'first call s':>13} {'min':>7} {'max':>7}  cache")
    for kind, runs in rows.items():
        firsts = [r["first_call_s"] for r in runs]
        apply_s = statistics.median(r["apply_s"] for r in runs)
        print(f"{kind:<10} {apply_s:>8.2f} {statistics.median(firsts):>13.2f} {min(firsts):>7.2f} "
              f"{max(firsts):>7.2f}  {sum(r['hits'] for r in runs)} hits, "
              f"{sum(r['misses'] for r in runs)} misses")

if __name__ == "__main__":
    main()
