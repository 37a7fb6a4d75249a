"""Latency fidelity: the tuner's two steady-state figures against independent timers.

    python benchmarks/fidelity.py [--quick] [--device cuda] [--cases resnet18:float32:1,...]
                                  [--json-out ROWS.json] [--out FILE.md]
    python benchmarks/fidelity.py --combine A.json B.json --out FILE.md

For each config this runs one tuner trial (a fresh process, the real protocol: the "fresh"
columns) and then, in ONE other fresh process:

* ``--rounds`` pairs of the trial's protocol (``run_trial``, the code a trial process runs) and
  the independent timers on their own build and compile ("whole trials");
* ``--slices`` alternations (A B B A ...), on ONE compiled model, of the trial's own timing code
  (``Device.time_requests_ms`` / ``time_stream_ms``, pinned and watched as in a trial) and the
  independent timers, ``--slice-seconds`` each ("timers": the fidelity line).

On the shared H200 VM the host's launch speed drifts by tens of percent within seconds
(benchmarks/results/launch_variance.md: launch-bound configs moved 61 % between fresh processes);
a whole trial lasts seconds, so whole-trial pairs still differ by that drift, and only timers
alternated in short slices compare the timers alone. The independent timers:

* ``request``: each call followed by a synchronize, timed on the host, median: what one request
  waits. Compared with the tuner's ``latency_ms_p50``.
* ``loop``: back-to-back calls between ONE pair of device events, divided by their number,
  median over loops: what a busy server pays per call. Compared with the tuner's
  ``stream_ms_p50``.
* ``do_bench`` (CUDA only): triton.testing.do_bench, median; it flushes the L2 cache before each
  call, so for small models it is expected to be slower than a hot-cache serving loop.

The output ends with ``fidelity: per-request worst X %, stream worst Y %``: the largest absolute
difference between the interleaved medians, in percent of the independent figure. The lines
before it, ``across processes: ...`` and ``whole trials: ...``, compare the fresh trial and the
whole-trial rounds with the whole-trial independent medians. Compile times are not compared,
so every trial of a run shares one warm inductor cache to keep the run short. ``--json-out``
and ``--combine`` let two GPUs each measure half the cases and one table hold both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.domain.records import Status, TrialProtocol, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner

FULL = [("resnet18", "float32", 1), ("resnet18", "float32", 32), ("resnet50", "bfloat16", 16),
        ("resnet50", "bfloat16", 64)]
QUICK = [("resnet18", "float32", 1)]
MODES = [("eager", None), ("inductor", "default"), ("inductor", "reduce-overhead")]


def paired(request_path: str, rounds: int, slices: int, slice_s: float) -> None:
    """Child process: ``rounds`` times, the trial protocol then the independent timers, each on
    its own build and compile of the same config (warm inductor cache); print JSON."""
    import torch

    from tuner.trial.protocol import run_trial

    for name in ("recompile_limit", "cache_size_limit"):  # each round compiles a new module
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    request = TrialRequest.from_dict(json.loads(Path(request_path).read_text()))
    tuner_request, tuner_stream, ind = [], [], []
    for _ in range(rounds):
        result = run_trial(request, time.perf_counter())
        if result.status is not Status.OK:
            raise SystemExit(f"trial in process: {result.status.value} {result.message}")
        tuner_request.append(result.latency_ms_p50)
        tuner_stream.append(result.stream_ms_p50)
        ind.append(independent(request))
    out = {"paired_tuner_request_ms": statistics.median(tuner_request),
           "paired_tuner_stream_ms": statistics.median(tuner_stream),
           "paired_tuner_request_all": tuner_request, "paired_tuner_stream_all": tuner_stream,
           "request_all": [r["request_ms"] for r in ind], "loop_all": [r["loop_ms"] for r in ind]}
    for key in ("request_ms", "loop_ms", "do_bench_ms"):
        values = [r[key] for r in ind if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    out.update(interleaved(request, slices, slice_s))
    print(json.dumps(out))


def compiled_call(request: TrialRequest):
    """The config built and compiled again as the trial does: (call, sync, cuda)."""
    import torch

    from tuner.domain.config import uses_cudagraphs
    from tuner.runtime import knobs
    from tuner.trial import build as wl

    cfg, work = request.config, request.workload
    knobs.apply_global_knobs(work)
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

    return call, sync, cuda


def independent_timers(call, sync, cuda: bool, requests: int = 200, loops: int = 15,
                       n: int = 50) -> tuple[list[float], list[float]]:
    """``request``: each call then synchronize, on the host; ``loop``: ``n`` back-to-back calls
    between one pair of device events (host clock on the CPU), divided by ``n``."""
    import torch

    waits = []
    for _ in range(requests):
        t = time.perf_counter()
        call()
        sync()
        waits.append((time.perf_counter() - t) * 1e3)
    per_call = []
    for _ in range(loops):
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
    return waits, per_call


def independent(request: TrialRequest) -> dict[str, float | None]:
    """The same config built and compiled again, timed with the independent timers."""
    import torch

    from tuner.trial import affinity

    call, sync, cuda = compiled_call(request)
    out: dict[str, float | None] = {}
    with torch.no_grad(), affinity.timing_thread_on(affinity.timing_cpu()):
        for _ in range(30):
            call()
        sync()
        waits, per_call = independent_timers(call, sync, cuda)
        out["request_ms"] = statistics.median(waits)
        out["loop_ms"] = statistics.median(per_call)
        out["do_bench_ms"] = None
        if cuda:
            from triton.testing import do_bench

            out["do_bench_ms"] = do_bench(call, warmup=100, rep=1000, return_mode="median")
    return out


def interleaved(request: TrialRequest, slices: int, slice_s: float) -> dict[str, float]:
    """The timers alone, on ONE compiled model: ``slices`` times, the trial's own timing code
    (``Device.time_requests_ms`` and ``time_stream_ms``, pinned and watched as the trial does,
    for ``slice_s`` seconds each) then the independent timers for about as long. Host speed
    drifts within seconds on a shared VM; slices this short put both timers under the same
    drift, so their pooled medians differ by the timers alone."""
    import torch

    from tuner.trial import affinity
    from tuner.trial.device import Device
    from tuner.trial.host import OtherProcesses

    call, sync, cuda = compiled_call(request)
    dev = Device(request.workload.device)
    proto = request.protocol
    tuner_request, tuner_stream, request_ms, loop_ms = [], [], [], []
    with torch.no_grad(), affinity.timing_thread_on(affinity.timing_cpu()):
        for _ in range(30):
            call()
        sync()
        calls = 20

        def tuner_timers() -> None:
            nonlocal calls
            with OtherProcesses():
                tuner_request.extend(dev.time_requests_ms(call, proto.min_calls, slice_s,
                                                          proto.max_seconds)[0])
                stream = dev.time_stream_ms(call, proto.min_calls, slice_s, proto.max_seconds)[0]
            tuner_stream.extend(stream)
            calls = max(len(stream), 20)

        def independent_part() -> None:
            # about as long as the tuner's: as many calls as its last stream, in loops of 50
            # (each loop starts on an idle GPU after a synchronize: in loops of 10 that ramp
            # made reduce-overhead 8 % slower per call on the H200)
            waits, per_call = independent_timers(call, sync, cuda, requests=calls,
                                                 loops=max(calls // 50, 2), n=50)
            request_ms.extend(waits)
            loop_ms.extend(per_call)

        for i in range(slices):  # A B B A ...: a drift across a pair of slices cancels
            for part in (tuner_timers, independent_part)[::1 if i % 2 == 0 else -1]:
                part()
    return {"slice_tuner_request_ms": statistics.median(tuner_request),
            "slice_tuner_stream_ms": statistics.median(tuner_stream),
            "slice_request_ms": statistics.median(request_ms),
            "slice_loop_ms": statistics.median(loop_ms)}


def table(rows: list[dict], header: str) -> str:
    lines = [header, "",
             "\"timers\": the trial's timing code and the independent timers on one compiled "
             "model, alternating in short slices (pooled medians; the fidelity line). \"whole "
             "trials\": medians of paired rounds, each a whole tuner trial (run_trial) then the "
             "independent timers on their own compile, seconds apart in one process. \"fresh\": "
             "the tuner's trial in its own process, against the whole-trial independent medians.",
             "",
             "| model | dtype | batch | config | timers: tuner request ms | independent request ms "
             "| diff | tuner stream ms | independent loop ms | diff | whole trials: request diff "
             "| stream diff | fresh request ms | diff | fresh stream ms | diff | do_bench ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    worst = dict.fromkeys(["request", "stream", "whole request", "whole stream",
                           "fresh request", "fresh stream"], 0.0)

    def diff(name: str, tuner: float, reference: float) -> str:
        d = (tuner / reference - 1) * 100
        worst[name] = max(worst[name], abs(d))
        return f"{d:+.1f} %"

    for r in rows:
        bench = f"{r['do_bench_ms']:.3f}" if r.get("do_bench_ms") is not None else "-"
        lines.append(
            f"| {r['model']} | {r['dtype']} | {r['batch']} | {r['config']} | "
            f"{r['slice_tuner_request_ms']:.3f} | {r['slice_request_ms']:.3f} | "
            f"{diff('request', r['slice_tuner_request_ms'], r['slice_request_ms'])} | "
            f"{r['slice_tuner_stream_ms']:.3f} | {r['slice_loop_ms']:.3f} | "
            f"{diff('stream', r['slice_tuner_stream_ms'], r['slice_loop_ms'])} | "
            f"{diff('whole request', r['paired_tuner_request_ms'], r['request_ms'])} | "
            f"{diff('whole stream', r['paired_tuner_stream_ms'], r['loop_ms'])} | "
            f"{r['tuner_request_ms']:.3f} | {diff('fresh request', r['tuner_request_ms'], r['request_ms'])} | "
            f"{r['tuner_stream_ms']:.3f} | {diff('fresh stream', r['tuner_stream_ms'], r['loop_ms'])} | "
            f"{bench} |")
    lines += ["", f"across processes: per-request worst {worst['fresh request']:.1f} %, stream worst "
              f"{worst['fresh stream']:.1f} %",
              f"whole trials: per-request worst {worst['whole request']:.1f} %, stream worst "
              f"{worst['whole stream']:.1f} %",
              f"fidelity: per-request worst {worst['request']:.1f} %, stream worst "
              f"{worst['stream']:.1f} %"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="resnet18 bs=1 only")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    parser.add_argument("--cases", help="MODEL:DTYPE:BATCH,... instead of the default set")
    parser.add_argument("--json-out", type=Path, help="also write the rows here (JSON)")
    parser.add_argument("--combine", nargs="+", type=Path,
                        help="make one table of the --json-out files of several runs")
    parser.add_argument("--rounds", type=int, default=3,
                        help="paired rounds per config (default 3)")
    parser.add_argument("--slices", type=int, default=20,
                        help="alternations of the two timers on one compiled model (default 20)")
    parser.add_argument("--slice-seconds", type=float, default=0.25,
                        help="seconds of each timer per slice (default 0.25)")
    parser.add_argument("--paired", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.paired:
        paired(args.paired, args.rounds, args.slices, args.slice_seconds)
        return
    if args.combine:
        runs = [json.loads(p.read_text()) for p in args.combine]
        text = table([r for run in runs for r in run["rows"]], runs[0]["header"])
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return
    cases = QUICK if args.quick else FULL
    if args.cases:
        cases = [(m, d, int(b)) for m, d, b in (c.split(":") for c in args.cases.split(","))]

    cache = Path(tempfile.mkdtemp(prefix="tuner-fidelity-"))
    runner = ProcessRunner(timeout_s=900, cache_dir=cache)
    protocol = TrialProtocol(warm_cache=True)
    rows, failed = [], []
    result = None
    for model, dtype, bs in cases:
        for backend, mode in MODES:
            if mode == "reduce-overhead" and not args.device.startswith("cuda"):
                continue
            config = TrialConfig(backend, bs, mode, False if backend != "eager" else None)
            work = Workload(model=model, device=args.device, dtype=dtype,
                            image_size=args.image_size)
            request = TrialRequest(config, work, protocol)
            trial_dir = cache / "trials" / f"{model}-{dtype}-{bs}-{config.label}"
            result = runner.run(request, trial_dir)
            if result.status is not Status.OK:
                print(f"{model} bs={bs} {config.label}: {result.status.value} {result.message}",
                      file=sys.stderr)
                failed.append(f"{model} {dtype} bs={bs} {config.label}: {result.status.value}")
                continue
            env_cache = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                         "TRITON_CACHE_DIR": str(cache / "triton")}
            child = subprocess.run(
                [sys.executable, __file__, "--paired", str(trial_dir / "request.json"),
                 "--rounds", str(args.rounds), "--slices", str(args.slices),
                 "--slice-seconds", str(args.slice_seconds)],
                capture_output=True, text=True, env={**os.environ, **env_cache})
            if child.returncode != 0:
                print(child.stderr[-2000:], file=sys.stderr)
                failed.append(f"{model} {dtype} bs={bs} {config.label}: paired process failed")
                continue
            ind = json.loads(child.stdout.strip().splitlines()[-1])
            rows.append({"model": model, "dtype": dtype, "batch": bs, "config": config.label,
                         "tuner_request_ms": result.latency_ms_p50,
                         "tuner_stream_ms": result.stream_ms_p50, **ind})
            print(f"{model} {dtype} bs={bs} {config.label}: paired request "
                  f"{ind['paired_tuner_request_ms']:.3f} vs {ind['request_ms']:.3f} ms, stream "
                  f"{ind['paired_tuner_stream_ms']:.3f} vs loop {ind['loop_ms']:.3f} ms; fresh "
                  f"request {result.latency_ms_p50:.3f}, stream {result.stream_ms_p50:.3f} ms",
                  file=sys.stderr)

    fp = result.fingerprint if result is not None else {}
    header = (f"fidelity, {time.strftime('%Y-%m-%d')}, {fp.get('gpu_name') or fp.get('cpu')}, "
              f"torch {fp.get('torch')}")
    text = table(rows, header)
    print(text)
    if args.json_out:
        args.json_out.write_text(json.dumps({"header": header, "rows": rows}))
    if args.out:
        args.out.write_text(text + "\n")
    if failed:  # a worst figure over the cases that ran says nothing about the ones that did not
        raise SystemExit(f"fidelity: {len(failed)} configs not measured: " + "; ".join(failed))


if __name__ == "__main__":
    main()
