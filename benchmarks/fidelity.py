"""Latency fidelity: the tuner's p50 against independent timers, config by config.

    python benchmarks/fidelity.py [--quick] [--device cuda] [--out FILE.md]

For each config this runs one tuner trial (a fresh process, the real protocol) and then, in
another fresh process with the same inputs and the same inductor cache, two independent timers:

* ``loop``: N back-to-back calls between ONE pair of device events, divided by N, median of
  several loops. It sees the same thing a serving loop sees (launch overhead included) without
  the tuner's per-call events.
* ``do_bench`` (CUDA only): triton.testing.do_bench, median; it flushes the L2 cache before each
  call, so for small models it is expected to be slower than a hot-cache serving loop.

The ratio tuner/loop is the figure of merit (target within +-3 %). Compile times are not
compared, so every trial shares one warm inductor cache to keep the run short.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.launch.runner import ProcessRunner
from tuner.spec.records import Status, TrialProtocol, TrialRequest
from tuner.spec.space import TrialConfig
from tuner.spec.workload import Workload

FULL = [("resnet18", bs) for bs in (1, 32)] + [("resnet50", bs) for bs in (8, 64)]
QUICK = [("resnet18", 1)]
MODES = [("eager", None), ("inductor", "default"), ("inductor", "reduce-overhead")]


def independent(request_path: str) -> None:
    """Child process: time the same compiled model with the independent timers; print JSON."""
    import torch

    from tuner.spec.config import uses_cudagraphs
    from tuner.trial import build as wl

    request = TrialRequest.from_dict(json.loads(Path(request_path).read_text()))
    cfg, work = request.config, request.workload
    wl.apply_global_knobs(work)
    model, inputs = wl.build(work, cfg.batch_size)
    fn = torch.compile(model, **cfg.compile_kwargs()) if cfg.compiled else model
    cuda = work.device.startswith("cuda")
    mark = uses_cudagraphs(cfg) and cuda

    def call():
        if mark:
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*inputs)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    out: dict[str, float | None] = {}
    with torch.no_grad():
        for _ in range(30):
            call()
        sync()
        per_call = []
        n = 50
        for _ in range(15):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(n):
                    call()
                end.record()
                sync()
                per_call.append(start.elapsed_time(end) / n)
            else:
                t = time.perf_counter()
                for _ in range(n):
                    call()
                per_call.append((time.perf_counter() - t) * 1e3 / n)
        out["loop_ms"] = statistics.median(per_call)
        out["do_bench_ms"] = None
        if cuda:
            from triton.testing import do_bench

            out["do_bench_ms"] = do_bench(call, warmup=100, rep=1000, return_mode="median")
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="resnet18 bs=1 only")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    parser.add_argument("--independent", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.independent:
        independent(args.independent)
        return

    cache = Path(tempfile.mkdtemp(prefix="tuner-fidelity-"))
    runner = ProcessRunner(timeout_s=900, cache_dir=cache)
    protocol = TrialProtocol(warm_cache=True)
    rows = []
    for model, bs in (QUICK if args.quick else FULL):
        for backend, mode in MODES:
            if mode == "reduce-overhead" and not args.device.startswith("cuda"):
                continue
            config = TrialConfig(backend, bs, mode, False if backend != "eager" else None)
            work = Workload(model=model, device=args.device, image_size=args.image_size)
            request = TrialRequest(config, work, protocol)
            trial_dir = cache / "trials" / f"{model}-{bs}-{config.label}"
            result = runner.run(request, trial_dir)
            if result.status is not Status.OK:
                print(f"{model} bs={bs} {config.label}: {result.status.value} {result.message}",
                      file=sys.stderr)
                continue
            env_cache = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                         "TRITON_CACHE_DIR": str(cache / "triton")}
            child = subprocess.run(
                [sys.executable, __file__, "--independent", str(trial_dir / "request.json")],
                capture_output=True, text=True, env={**__import__("os").environ, **env_cache})
            if child.returncode != 0:
                print(child.stderr[-2000:], file=sys.stderr)
                continue
            ind = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append((model, bs, config.label, result.latency_ms_p50, result.latency_ms_iqr,
                         ind["loop_ms"], ind["do_bench_ms"]))
            print(f"{model} bs={bs} {config.label}: tuner {result.latency_ms_p50:.3f} ms, "
                  f"loop {ind['loop_ms']:.3f} ms", file=sys.stderr)

    fp = result.fingerprint if rows else {}
    lines = [f"fidelity, {time.strftime('%Y-%m-%d')}, {fp.get('gpu_name') or fp.get('cpu')}, "
             f"torch {fp.get('torch')}",
             "",
             "| model | batch | config | tuner p50 ms | tuner IQR ms | loop ms | tuner/loop | do_bench ms |",
             "|---|---|---|---|---|---|---|---|"]
    for model, bs, label, p50, iqr, loop, bench in rows:
        bench_s = f"{bench:.3f}" if bench is not None else "-"
        lines.append(f"| {model} | {bs} | {label} | {p50:.3f} | {iqr:.3f} | {loop:.3f} | "
                     f"{p50 / loop:.3f} | {bench_s} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
