"""What makes one config's cold trials land in two modes on a GPU, and whether a busy CPU
during the first eager call (where cuDNN times its algorithms) brings the slow one.

    CUDA_VISIBLE_DEVICES=0 python benchmarks/slow_mode.py --runs 12 --limit-s 500 \
        --out benchmarks/results/slow_mode.md

resnet50 bf16 at bs 32, inductor default, cold trials: their steady-state p50 on the H200 came
out at 2.0-2.5 ms or at 3.0-3.8 ms (benchmarks/results/prewarm_fidelity.md), and readying the
device ahead, beside another trial's compile, made the slow mode more frequent (6 of 8 against
7 of 26). This runs that config the way a trial does, each run in a fresh process with empty
inductor and triton caches: the model on the GPU with ``cudnn.benchmark`` on, its first eager
call, eager p50, ``torch.compile`` and its first call, warm-up, compiled p50, then the profiler
over 10 eager and 10 compiled calls (the GPU time of each kernel). Runs take the ``--ways`` in
turn (``quiet,busy`` unless given):

- ``quiet``: nothing else runs;
- ``busy``: one spinning process per core runs during the first eager call only;
- ``gpu-busy``: another process runs matmuls on the same GPU during the first eager call
  only (where cuDNN times its algorithms), as a compile's kernel benchmarks beside a process
  that readies the device ahead (TUNER_PREWARM=1) would;
- ``fastest``: quiet, and before each p50 the process moves to the core that runs a fixed
  Python loop fastest then, as ``TUNER_TIMING_CPU=fastest`` has a trial do
  (:func:`tuner.trial.affinity.fastest_cpu`); the compile itself runs on every core.

If the slow mode is a choice made during a first call (cuDNN's algorithm for a conv shape,
triton's config for a kernel), the slow runs' kernels differ from the fast runs' in name or in
time, and the summary lists the kernels whose time differs most; if ``busy`` runs are slow more
often, a busy CPU while cuDNN times its algorithms is what brings it; if ``fastest`` runs are
never slow, picking the core is the cure. Rows are written as each run ends; the whole record of every run (every kernel's time) goes to ``--json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, statistics, subprocess, sys, time
import torch, torchvision
from tuner.trial.affinity import fastest_cpu
from tuner.trial.host import core_loop_ms as loop_ms  # the loop a trial times (host_loop_ms)
model_name, dtype_name, batch, way = sys.argv[1:5]
dtype = getattr(torch, dtype_name)
torch.backends.cudnn.benchmark = True
model = torchvision.models.get_model(model_name).eval().to("cuda", dtype)
x = torch.randn(int(batch), 3, 224, 224, device="cuda", dtype=dtype)
torch.cuda.synchronize()

def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t

def p50_ms(fn, calls=200):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(calls):
        start.record(); fn(); end.record(); end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)

def cpu_now():
    # the core this process last ran on (/proc/self/stat, field 39)
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])

def kernels(fn, calls=10):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", None)
        if us is None:
            us = event.cuda_time_total
        if us and event.count:
            out[event.key] = [event.count / calls, us / calls]
    return out

def core_loops():
    # every core this process may use, the loop on each in turn (3 loops, as the probe does)
    times = {}
    for cpu in sorted(allowed):
        os.sched_setaffinity(0, {cpu})
        times[cpu] = loop_ms(3)
    os.sched_setaffinity(0, allowed)
    return times

def pin_fastest():
    # the core TUNER_TIMING_CPU=fastest has a trial time on, and stay there
    best = fastest_cpu()
    os.sched_setaffinity(0, {best})
    return best

# another process's matmuls on the same GPU, as a compile's kernel benchmarks beside it would be
GPU_BURNER = ("import torch\n"
              "a = torch.randn(4096, 4096, device='cuda')\n"
              "a @ a; torch.cuda.synchronize(); print('ready', flush=True)\n"
              "while True:\n"
              "    a @ a\n")
allowed = os.sched_getaffinity(0)
out = {"way": way}
with torch.no_grad():
    burners = []
    if way == "busy":
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(os.cpu_count() or 1)]
        time.sleep(1.0)
    if way == "gpu-busy":
        burners = [subprocess.Popen([sys.executable, "-c", GPU_BURNER], stdout=subprocess.PIPE)]
        burners[0].stdout.readline()  # its CUDA context made, its matmuls under way
    try:
        out["eager_first_s"] = timed(lambda: model(x))
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.wait()
    for _ in range(20):
        model(x)
    if way == "fastest":
        out["pinned"] = pin_fastest()
    out["eager_p50_ms"] = p50_ms(lambda: model(x))
    compiled = torch.compile(model)
    os.sched_setaffinity(0, allowed)  # the compile (and its workers) on every core
    out["compiled_first_s"] = timed(lambda: compiled(x))
    for _ in range(50):
        compiled(x)
    if way == "fastest":
        out["pinned_compiled"] = pin_fastest()
    out["loop_ms"] = loop_ms()
    out["compiled_p50_ms"] = p50_ms(lambda: compiled(x))
    out["cpu"] = cpu_now()
    out["loop_ms_after"] = loop_ms()
    out["eager_p50_ms_after"] = p50_ms(lambda: model(x))
    os.sched_setaffinity(0, allowed)
    out["core_loops"] = core_loops()
    out["eager_kernels"] = kernels(lambda: model(x))
    out["compiled_kernels"] = kernels(lambda: compiled(x))
print("RESULT " + json.dumps(out))
"""

ROOT = Path(__file__).resolve().parents[1]
HEADER = ("| run | way | eager first s | eager p50 ms | compiled first s | compiled p50 ms | "
          "eager p50 ms after | GPU ms a call: eager / compiled | core | loop ms | "
          "every core's loop ms: min / median / max |")


def run_once(args: argparse.Namespace, way: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
                   TRITON_CACHE_DIR=f"{tmp}/triton", TMPDIR=tmp,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])))
        proc = subprocess.run([sys.executable, "-c", CHILD, args.model, args.dtype,
                               str(args.batch_size), way],
                              capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        return {"way": way, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1][len("RESULT "):])


def fmt(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def row_line(number: int, r: dict) -> str:
    if "error" in r:
        return f"| {number} | {r['way']} | error: {r['error']} |"
    return (f"| {number} | {r['way']} | {fmt(r['eager_first_s'], 2)} | {fmt(r['eager_p50_ms'])} | "
            f"{fmt(r['compiled_first_s'], 1)} | {fmt(r['compiled_p50_ms'])} | "
            f"{fmt(r['eager_p50_ms_after'])} | {gpu_ms(r['eager_kernels'])} / "
            f"{gpu_ms(r['compiled_kernels'])} | {r.get('cpu', '')} | "
            f"{fmt(r.get('loop_ms'), 2)} / {fmt(r.get('loop_ms_after'), 2)} | "
            f"{spread(r.get('core_loops'))} |")


def spread(loops: dict | None) -> str:
    """The fastest, median and slowest core of one process, by the loop (ms)."""
    if not loops:
        return ""
    times = sorted(loops.values())
    return f"{times[0]:.2f} / {statistics.median(times):.2f} / {times[-1]:.2f}"


def gpu_ms(kernels: dict) -> str:
    """The GPU time of one call: every kernel's, summed (the profiler's device time)."""
    return f"{sum(us for _, us in kernels.values()) / 1e3:.3f}"


def kernel_differences(runs: list[dict], which: str, slow_ms: float, key: str,
                       top: int = 8) -> list[str]:
    """The kernels whose GPU time a call differs most between the slow runs and the fast ones
    (mean over runs; a kernel only one group ran counts 0 in the other)."""
    slow = [r[which] for r in runs if r[key] >= slow_ms]
    fast = [r[which] for r in runs if r[key] < slow_ms]
    if not slow or not fast:
        return [f"(no {'slow' if not slow else 'fast'} runs by {key})"]
    names = set().union(*slow, *fast)

    def mean_us(group: list[dict], name: str) -> float:
        return sum(k.get(name, [0, 0])[1] for k in group) / len(group)

    diffs = sorted(((mean_us(slow, n) - mean_us(fast, n), n) for n in names),
                   key=lambda d: -abs(d[0]))
    total_slow = sum(mean_us(slow, n) for n in names)
    total_fast = sum(mean_us(fast, n) for n in names)
    lines = [f"GPU time a call, all kernels: slow runs {total_slow / 1e3:.3f} ms, "
             f"fast runs {total_fast / 1e3:.3f} ms ({len(slow)} slow, {len(fast)} fast)", "",
             "| kernel | slow runs us | fast runs us | ran in slow / fast runs |", "|---|---|---|---|"]
    for _diff, name in diffs[:top]:
        ran = (f"{sum(name in k for k in slow)}/{len(slow)} / "
               f"{sum(name in k for k in fast)}/{len(fast)}")
        lines.append(f"| `{name[:110]}` | {mean_us(slow, name):.1f} | {mean_us(fast, name):.1f} "
                     f"| {ran} |")
    return lines


def summary(runs: list[dict], slow_ms: float) -> list[str]:
    ok = [r for r in runs if "error" not in r]
    lines = ["", "## Summary", ""]
    for way in dict.fromkeys(r["way"] for r in ok):
        mine = [r for r in ok if r["way"] == way]
        if not mine:
            continue
        slow = sum(r["compiled_p50_ms"] >= slow_ms for r in mine)
        eager_slow = sum(r["eager_p50_ms"] >= statistics.median(x["eager_p50_ms"] for x in ok) * 1.2
                         for r in mine)
        lines.append(f"- {way}: compiled p50 slow (>= {slow_ms} ms) in {slow} of {len(mine)}; "
                     f"compiled p50 median {statistics.median(r['compiled_p50_ms'] for r in mine):.3f} ms; "
                     f"eager p50 median {statistics.median(r['eager_p50_ms'] for r in mine):.3f} ms "
                     f"(over 1.2x the median of all: {eager_slow}); eager first call median "
                     f"{statistics.median(r['eager_first_s'] for r in mine):.2f} s")
    lines += core_lines(ok, slow_ms)
    lines += ["", "### Compiled calls: kernels, slow runs against fast", ""]
    lines += kernel_differences(ok, "compiled_kernels", slow_ms, "compiled_p50_ms")
    eager_cut = statistics.median(r["eager_p50_ms"] for r in ok) * 1.2 if ok else 0.0
    lines += ["", f"### Eager calls: kernels, slow runs (eager p50 >= {eager_cut:.3f} ms, 1.2x the "
              "median) against fast", ""]
    lines += kernel_differences(ok, "eager_kernels", eager_cut, "eager_p50_ms")
    return lines


def core_lines(runs: list[dict], slow_ms: float) -> list[str]:
    """Whether a slow run's process was slow on every core or on the one it timed on: each
    group's fastest and slowest core (the loop after the p50s), medians over its runs."""
    lines = []
    for name, group in (("slow", [r for r in runs if r["compiled_p50_ms"] >= slow_ms]),
                        ("fast", [r for r in runs if r["compiled_p50_ms"] < slow_ms])):
        loops = [sorted(r["core_loops"].values()) for r in group if r.get("core_loops")]
        if loops:
            lines.append(f"- {name} runs' cores ({len(loops)} runs): fastest core's loop median "
                         f"{statistics.median(t[0] for t in loops):.2f} ms, slowest core's "
                         f"{statistics.median(t[-1] for t in loops):.2f} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--slow-ms", type=float, default=3.0,
                        help="a compiled p50 at or above this is the slow mode")
    parser.add_argument("--limit-s", type=float, default=500,
                        help="start no run after this many seconds; summarise what ran")
    parser.add_argument("--ways", type=lambda text: text.split(","), default=["quiet", "busy"],
                        help="ways the runs take in turn: quiet, busy, gpu-busy, fastest")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    head = [f"# Two modes of one config's cold trials, {datetime.date.today()}, "
            f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} cores", "",
            f"`python benchmarks/slow_mode.py --model {args.model} --dtype {args.dtype} "
            f"--batch-size {args.batch_size} --runs {args.runs}`: one fresh process a row, empty "
            "inductor and triton caches; `busy`: a spinning process per core during the first "
            "eager call only. p50 of 200 calls between CUDA events, each call waited for. GPU ms a "
            "call: every kernel's time, summed, from the profiler. core: the one the process ran "
            "on after its compiled p50; loop ms: a fixed Python loop before and after it (the "
            "core's speed); every core's loop ms: the loop on each core in turn, after the p50s "
            "(is a slow process slow on every core, or on some?). `fastest`: each p50 on the "
            "core that ran the loop fastest just before it.", "", HEADER,
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    runs: list[dict] = []
    started = time.monotonic()

    def write() -> None:
        text = "\n".join(head + [row_line(i + 1, r) for i, r in enumerate(runs)]
                         + summary(runs, args.slow_ms)) + "\n"
        if args.out:
            args.out.write_text(text)
        if args.json:
            args.json.write_text(json.dumps(runs))
        return None

    for number in range(args.runs):
        if time.monotonic() - started > args.limit_s:
            head.insert(2, f"Stopped at the time limit after {number} of {args.runs} runs.\n")
            break
        way = args.ways[number % len(args.ways)]
        runs.append(run_once(args, way))
        print(row_line(number + 1, runs[-1]), file=sys.stderr, flush=True)
        write()
    write()
    print("\n".join(summary(runs, args.slow_ms)))


if __name__ == "__main__":
    main()
