"""Whether readying the device ahead (TUNER_PREWARM=1, tuner.trial.prewarm) changes what a trial
measures.

    CUDA_VISIBLE_DEVICES=0 python benchmarks/prewarm_fidelity.py --repeats 4 \
        --out /tmp/prewarm_fidelity-gpu0.md
    python benchmarks/prewarm_fidelity.py --pool /tmp/prewarm_fidelity-*.md \
        --out benchmarks/results/prewarm_fidelity.md

Each sample is a fresh runner with pre-started processes running the same config twice, each
trial a cold compile: the first trial (the control) never has the device readied ahead; the
second one's process readies it beside the first one's compile when the way is ``on``, and does
not when it is ``off``. Ways alternate, ``on`` first (``--first off``: ``off`` first), for
``--repeats`` pairs. The second trial's p50 over the first's, sample by sample, takes out the
drift of a shared machine; if readying the device ahead leaves the measurement as it was, that
ratio is the same both ways. Where the config's cold trials land in two modes (resnet50 bf16 at
bs 32 on the H200: 2.0-2.5 or 3.0-3.8 ms), a slow control moves the ratio as much, so the
summary also gives the p50s themselves: the trials' of each way and the controls'. Each trial
also records the GPU's own time a call (TUNER_GPU_TIME=1, after its steady state): where readying
ahead changed the GPU's work (cuDNN's algorithm choices), the trial's GPU time moves against its
control's; where only the host core moved the p50, it does not. Rows are
written to --out as each sample ends, the summary last.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path

from tuner.domain.config import TrialConfig
from tuner.domain.records import TrialProtocol, TrialRequest, TrialResult
from tuner.domain.workload import Workload
from tuner.launch.runner import ProcessRunner
from tuner.trial.contract import GPU_TIME_ENV
from tuner.trial.prebuild import PrebuildRequest
from tuner.trial.prewarm import PREWARM_ENV

HEADER = ("| sample | way | control p50 ms | trial p50 ms | trial / control | trial prewarmed | "
          "trial eager_ref s | trial compile s | loop ms: control / trial | timing core: control / "
          "trial | GPU ms a call: control / trial |")


def sample(config: TrialConfig, workload: Workload, protocol: TrialProtocol, way: str,
           folder: Path) -> tuple[TrialResult, TrialResult]:
    """The control trial and the measured one, in a fresh runner, the way set."""
    os.environ[PREWARM_ENV] = "1" if way == "on" else "0"
    os.environ[GPU_TIME_ENV] = "1"  # the kernels' own time: a slow host core leaves it as it was
    runner = ProcessRunner(timeout_s=900, prestart=True)
    try:
        runner.start_spare(PrebuildRequest(workload, config.batch_size))
        control, trial = (runner.run(TrialRequest(config, workload, protocol), folder / name)
                          for name in ("control", "trial"))
    finally:
        runner.close()
    return control, trial


def row(number: int, way: str, control: TrialResult, trial: TrialResult) -> str:
    ratio = (trial.latency_ms_p50 / control.latency_ms_p50
             if trial.latency_ms_p50 and control.latency_ms_p50 else None)
    cells = [number, way, _f(control.latency_ms_p50), _f(trial.latency_ms_p50), _f(ratio),
             trial.prewarmed, _f(trial.eager_reference_s, 2), _f(trial.compile_s_cold, 2),
             f"{_f(control.host_loop_ms, 2)} / {_f(trial.host_loop_ms, 2)}",
             f"{_core(control.timing_cpu)} / {_core(trial.timing_cpu)}",
             f"{_f(control.gpu_time_ms)} / {_f(trial.gpu_time_ms)}"]
    if not (control.ok and trial.ok):
        cells.append(f"{control.status.value}/{trial.status.value}: {trial.message or control.message}")
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _core(cpu: int | None) -> str:
    """The core a trial timed on (TUNER_TIMING_CPU), or "-" where it was not pinned."""
    return "-" if cpu is None else str(cpu)


def summary(ratios: dict[str, list[float]],
            p50s: dict[str, list[float]] | None = None) -> list[str]:
    """Each way's trial / control ratios and, given ``p50s`` (the trials' own p50 by way, and
    the controls' under "control"), the latencies themselves: a config whose cold trials land
    in two modes moves the ratio through its control as much as through its trial."""
    def spread(values: list[float], digits: int) -> str:
        return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-"
                f"{max(values):.{digits}f}), {len(values)}")

    lines = ["", "trial / control p50, by way: median (min-max), samples"]
    lines += [f"- {way}: {spread(values, 3)}" for way, values in ratios.items() if values]
    if p50s:
        lines += ["", "p50 ms, by way: median (min-max), samples"]
        lines += [f"- {way}: {spread(values, 4)}" for way, values in p50s.items() if values]
    if all(ratios.get(w) for w in ("on", "off")):
        lines += ["", f"prewarm fidelity: median trial / control, on "
                      f"{statistics.median(ratios['on']):.3f}, off "
                      f"{statistics.median(ratios['off']):.3f}"]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke test (nothing is readied)")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--repeats", type=int, default=3, help="pairs of samples, one each way")
    parser.add_argument("--first", choices=("on", "off"), default="on")
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--pool", type=Path, nargs="+", metavar="FILE",
                        help="measure nothing: pool the samples of files this script wrote")
    args = parser.parse_args(argv)
    if args.pool:
        text = "\n".join([f"# prewarm fidelity, every sample pooled ({datetime.date.today()})", "",
                          f"`python benchmarks/prewarm_fidelity.py --pool "
                          f"{' '.join(p.name for p in args.pool)}`", "", *pool(args.pool)]) + "\n"
        print(text, end="")
        if args.out:
            args.out.write_text(text)
        return

    import torch

    config = TrialConfig("inductor", args.batch_size, args.mode, False)
    workload = Workload(model=args.model, device=args.device, dtype=args.dtype,
                        image_size=args.image_size)
    protocol = TrialProtocol(min_seconds=args.min_seconds)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    lines = [f"# prewarm fidelity, {datetime.date.today()}, {name}, torch {torch.__version__}", "",
             f"`python benchmarks/prewarm_fidelity.py {' '.join(sys.argv[1:])}`: {args.model} "
             f"{args.dtype}, inductor {args.mode} at batch size {args.batch_size}; "
             "see the script for the design.", "", HEADER, "|" + "---|" * 11]
    out = args.out

    def emit(line: str) -> None:
        print(line, flush=True)
        if out is not None:
            with open(out, "a") as f:
                f.write(line + "\n")

    if out is not None:
        out.write_text("")
    for line in lines:
        emit(line)
    ways = ["on", "off"] if args.first == "on" else ["off", "on"]
    ratios: dict[str, list[float]] = {"on": [], "off": []}
    p50s: dict[str, list[float]] = {"on": [], "off": [], "control": []}
    with tempfile.TemporaryDirectory(prefix="tuner-prewarm-") as tmp:
        try:
            for number in range(args.repeats * 2):
                way = ways[number % 2]
                control, trial = sample(config, workload, protocol, way, Path(tmp) / str(number))
                emit(row(number, way, control, trial))
                if control.ok and trial.ok and control.latency_ms_p50 and trial.latency_ms_p50:
                    ratios[way].append(trial.latency_ms_p50 / control.latency_ms_p50)
                    p50s[way].append(trial.latency_ms_p50)
                    p50s["control"].append(control.latency_ms_p50)
        except KeyboardInterrupt:  # a time limit (timeout -s INT): summarise what finished
            emit("")
            emit(f"(interrupted after {sum(map(len, ratios.values()))} finished samples)")
    for line in summary(ratios, p50s):
        emit(line)


def pool(paths: list[Path], slow_ms: float = 3.0) -> list[str]:
    """Every sample of the files this script wrote, together: each way's trial / control
    ratios, how many trials of each way (and controls) were slow (p50 at or above ``slow_ms``),
    and a one-sided Mann-Whitney test of readied ahead reading higher than not (normal
    approximation, no tie correction)."""
    ratios: dict[str, list[float]] = {"on": [], "off": []}
    p50s: dict[str, list[float]] = {"on": [], "off": [], "control": []}
    gpu_ratios: dict[str, list[float]] = {"on": [], "off": []}
    gpu_ms: dict[str, list[float]] = {"control on": [], "control off": [], "on": [], "off": []}
    lines = ["| file | samples on | samples off | median trial / control: on | off |",
             "|---|---|---|---|---|"]
    for path in paths:
        mine: dict[str, list[float]] = {"on": [], "off": []}
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 5 or not cells[0].isdigit() or cells[1] not in mine:
                continue
            try:
                control, trial, ratio = float(cells[2]), float(cells[3]), float(cells[4])
            except ValueError:  # a failed sample
                continue
            mine[cells[1]].append(ratio)
            p50s[cells[1]].append(trial)
            p50s["control"].append(control)
            gpu = _pair(cells[10]) if len(cells) > 10 else None
            if gpu:
                gpu_ratios[cells[1]].append(gpu[1] / gpu[0])
                gpu_ms[f"control {cells[1]}"].append(gpu[0])
                gpu_ms[cells[1]].append(gpu[1])
        for way in mine:
            ratios[way] += mine[way]
        lines.append(f"| `{path.name}` | {len(mine['on'])} | {len(mine['off'])} | "
                     f"{_median(mine['on'])} | {_median(mine['off'])} |")
    lines += ["", f"all: trial / control, median: on {_median(ratios['on'])} "
              f"({len(ratios['on'])}), off {_median(ratios['off'])} ({len(ratios['off'])}); "
              f"one-sided Mann-Whitney p (on above off) = {_greater_p(ratios['on'], ratios['off']):.3f}"]
    lines.append("slow trials (p50 >= " + f"{slow_ms} ms): " + ", ".join(
        f"{way} {sum(v >= slow_ms for v in values)} of {len(values)}"
        for way, values in p50s.items()))
    if any(gpu_ratios.values()):
        lines.append(f"GPU time a call (the kernels' own), trial / control, median: on "
                     f"{_median(gpu_ratios['on'])} ({len(gpu_ratios['on'])}), off "
                     f"{_median(gpu_ratios['off'])} ({len(gpu_ratios['off'])}); one-sided "
                     f"Mann-Whitney p (on above off) = "
                     f"{_greater_p(gpu_ratios['on'], gpu_ratios['off']):.3f}")
        # Each way's own figures: a control measures beside the readied (idle) process in the
        # samples readied ahead, beside none in the others; the trials are the readied ones.
        lines.append("GPU time a call, ms, median: controls of the samples readied ahead "
                     + ", of the others ".join(f"{_median(gpu_ms[k])} ({len(gpu_ms[k])})"
                                               for k in ("control on", "control off"))
                     + "; trials readied ahead " + ", others ".join(
                         f"{_median(gpu_ms[k])} ({len(gpu_ms[k])})" for k in ("on", "off")))
    return lines


def _pair(cell: str) -> tuple[float, float] | None:
    """The control's and the trial's figures of a "control / trial" cell, if both are there."""
    try:
        control, trial = (float(v) for v in cell.split("/"))
    except ValueError:
        return None
    return (control, trial) if control > 0 else None


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "-"


def _greater_p(a: list[float], b: list[float]) -> float:
    """One-sided p of values in ``a`` ranking above those in ``b`` (Mann-Whitney U, normal
    approximation)."""
    if not a or not b:
        return float("nan")
    u = sum((x > y) + 0.5 * (x == y) for x in a for y in b)
    n, m = len(a), len(b)
    z = (u - n * m / 2) / ((n * m * (n + m + 1) / 12) ** 0.5)
    return 0.5 * math.erfc(z / math.sqrt(2))


def _f(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    main()
