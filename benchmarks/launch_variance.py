"""Why a launch-bound config's latency differs from one process to the next (issue 10).

    python benchmarks/launch_variance.py [--model resnet50 --dtype bfloat16 --batch 16]
                                         [--fresh 6] --out FILE.md [--json-out FILE.json]

Eager resnet50 bf16 at batch size 16 waits on the host CPU between kernels, and on the H200 its
p50 moved 4.3-6.9 ms between fresh processes of the same trial. This measures, for that eager
model (no compile, so each process takes seconds):

* ``sweep``: ONE process times the same model with its timing thread pinned to each core in
  turn (and unpinned before and after): do cores differ?
* ``fresh``: fresh processes, unpinned, then pinned to one core, then to the GPU's own cores:
  how far apart are processes, and does pinning bring them together?
* ``gc``: the same process with the garbage collector off, and after importing what a trial
  process imports besides torch (pandas, optuna): does the Python heap matter?

Figures go to ``--out`` with the host's topology (cores, NUMA nodes, the GPU's local cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def gpu_local_cpus() -> list[int] | None:
    """The cores on the GPU's own NUMA node, as the kernel lists them for its PCI device."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader",
                              "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]],
                             capture_output=True, text=True, check=True).stdout.strip()
        domain, rest = bus.lower().split(":", 1)
        text = Path(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/local_cpulist").read_text()
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None
    cpus: list[int] = []
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus


def topology() -> str:
    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    keep = ("Model name", "Socket", "Core(s) per socket", "Thread(s) per core", "NUMA node",
            "CPU(s)", "Hypervisor", "MHz")
    lscpu = [line for line in run("lscpu").splitlines() if line.startswith(keep)]
    return "\n".join(["```", *lscpu, f"affinity: {sorted(os.sched_getaffinity(0))}",
                      f"GPU local cpus: {gpu_local_cpus()}", run("nvidia-smi", "topo", "-m").strip(),
                      "```"])


class Timed:
    """The model and a timer of one request (call, synchronize) and of a back-to-back loop."""

    def __init__(self, model: str, dtype: str, batch: int) -> None:
        import torch

        from tuner.domain.workload import Workload
        from tuner.runtime import knobs
        from tuner.trial import build

        self.torch = torch
        work = Workload(model=model, device="cuda", dtype=dtype)
        knobs.apply_global_knobs(work)
        self.model, self.inputs = build.build(work, batch)
        torch.set_grad_enabled(False)
        for _ in range(30):
            self.model(*self.inputs)
        torch.cuda.synchronize()

    def measure(self, requests: int = 150, loops: int = 10, n: int = 30) -> dict[str, float]:
        torch = self.torch
        for _ in range(10):
            self.model(*self.inputs)
        torch.cuda.synchronize()
        waits = []
        for _ in range(requests):
            t = time.perf_counter()
            self.model(*self.inputs)
            torch.cuda.synchronize()
            waits.append((time.perf_counter() - t) * 1e3)
        per_call = []
        for _ in range(loops):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                self.model(*self.inputs)
            end.record()
            torch.cuda.synchronize()
            per_call.append(start.elapsed_time(end) / n)
        return {"request_ms": round(statistics.median(waits), 3),
                "loop_ms": round(statistics.median(per_call), 3)}


def child(args: argparse.Namespace) -> None:
    """A fresh process: pin (the whole process) if asked, then time; print one JSON line."""
    if args.pin:
        os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})
    timed = Timed(args.model, args.dtype, args.batch)
    print(json.dumps(timed.measure()))


def sweep(args: argparse.Namespace) -> None:
    """One process: the timing thread pinned to each core in turn; then the gc variants."""
    import gc

    timed = Timed(args.model, args.dtype, args.batch)
    allowed = sorted(os.sched_getaffinity(0))
    rows = [{"case": "unpinned (start)", **timed.measure()}]
    for core in allowed:
        os.sched_setaffinity(0, {core})  # 0: this thread, the one that launches
        rows.append({"case": f"core {core}", **timed.measure()})
    os.sched_setaffinity(0, set(allowed))
    rows.append({"case": "unpinned (end)", **timed.measure()})
    gc.disable()
    rows.append({"case": "gc disabled", **timed.measure()})
    gc.enable()
    import optuna  # noqa: F401 - what the parent of a trial imports, to grow the heap
    import pandas  # noqa: F401
    rows.append({"case": "after importing pandas, optuna", **timed.measure()})
    gc.freeze()
    rows.append({"case": "after gc.freeze()", **timed.measure()})
    print(json.dumps(rows))


def spawn(args: argparse.Namespace, *extra: str) -> dict:
    cmd = [sys.executable, __file__, "--model", args.model, "--dtype", args.dtype,
           "--batch", str(args.batch), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
    return f"{(max(values) - min(values)) / statistics.median(values) * 100:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--fresh", type=int, default=6, help="fresh processes per variant")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sweep", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pin", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.sweep:
        return sweep(args)

    import torch

    lines = [f"launch variance, {time.strftime('%Y-%m-%d')}, {torch.cuda.get_device_name()}, "
             f"torch {torch.__version__}; eager {args.model} {args.dtype} batch {args.batch}",
             "", topology(), ""]
    sweep_rows = spawn(args, "--sweep")
    lines += ["## One process, the timing thread pinned to each core", "",
              "| case | request p50 ms | loop p50 ms |", "|---|---|---|"]
    lines += [f"| {r['case']} | {r['request_ms']} | {r['loop_ms']} |" for r in sweep_rows]
    cores = [r for r in sweep_rows if r["case"].startswith("core ")]
    if cores:
        lines += ["", f"cores: request p50 {min(r['request_ms'] for r in cores)}-"
                  f"{max(r['request_ms'] for r in cores)} ms, spread "
                  f"{spread([r['request_ms'] for r in cores])}"]
    allowed = os.sched_getaffinity(0)
    local = [c for c in gpu_local_cpus() or [] if c in allowed]
    fastest = min(cores, key=lambda r: r["request_ms"])["case"].split()[1] if cores else "0"
    variants = [("unpinned", None), (f"pinned to core {fastest}", fastest)]
    if local:
        variants.append(("pinned to the GPU's local cores", ",".join(map(str, local))))
    fresh = {}
    lines += ["", f"## Fresh processes, {args.fresh} per variant", "",
              "| variant | request p50 ms, each process | spread | loop p50 ms, each process | spread |",
              "|---|---|---|---|---|"]
    for label, pin in variants:
        runs = [spawn(args, "--child", *(["--pin", pin] if pin else [])) for _ in range(args.fresh)]
        fresh[label] = runs
        req, loop = [r["request_ms"] for r in runs], [r["loop_ms"] for r in runs]
        lines.append(f"| {label} | {', '.join(map(str, req))} | {spread(req)} | "
                     f"{', '.join(map(str, loop))} | {spread(loop)} |")
        print(lines[-1], file=sys.stderr)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json_out:
        args.json_out.write_text(json.dumps({"sweep": sweep_rows, "fresh": fresh}))


if __name__ == "__main__":
    main()
