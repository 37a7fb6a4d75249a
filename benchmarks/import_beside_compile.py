"""The import beside the compile: does a pre-started process's import slow the trial's compile?

    python benchmarks/import_beside_compile.py [--device cuda] [--model resnet18] [--dtype float32]
        [--batch-size 1] [--mode default] [--image-size 224] [--repeats 3] [--out FILE.md]
    python benchmarks/import_beside_compile.py --device cpu --model resnet18 --image-size 32 \
        --batch-size 1 --repeats 2 --out benchmarks/results/import_beside_compile-cpu.md

With ``--prestart``, a search hands each trial to a process that was started, imported torch and
pre-built the model while the trial before it ran, and at that hand-over starts the process of
the next trial, which imports torch, torchvision and inductor and pre-builds the model while this
trial compiles. Each run here is one trial of the same inductor config through the tuner's own
pre-starting runner (ProcessRunner(prestart=True)), handed to a process made ready beforehand,
as a search's trial after the first is: (a) alone, no process started beside it; (b) with the
next trial's process started at the hand-over, by the runner's own code (``_hand_over``), as in
a search. Runs alternate a, b, a, b, ... after ``--warmup`` unreported runs. Every run compiles
cold: fresh inductor and triton caches, and a fresh TMPDIR, since inductor keeps its CPU
precompiled headers under ``$TMPDIR/torchinductor_<user>`` whatever TORCHINDUCTOR_CACHE_DIR says.
The report ends with ``import beside compile: alone X s, with import Y s, cost Z %`` (medians of
compile_s_cold). A cost well beyond the alone runs' spread says: start the spare after the compile.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tuner.domain.config import TrialConfig
from tuner.domain.records import Status, TrialProtocol, TrialRequest, TrialResult
from tuner.domain.workload import Workload
from tuner.launch.prestart import Spare
from tuner.launch.runner import ProcessRunner
from tuner.trial.prebuild import PrebuildRequest

ALONE, BESIDE = "alone", "with import"


class _NoSpare:
    """Where the runner keeps the next trial's process, when none is started (run a)."""

    def watch(self) -> None:
        pass

    def let_build(self) -> None:
        pass

    def discard(self) -> None:
        pass


class BesideRunner(ProcessRunner):
    """The tuner's pre-starting runner for one trial, whose process is started (importing and
    pre-building ``prebuild``) when the runner is made; :meth:`ready` waits for it. ``beside``:
    the hand-over starts the next trial's process, as a search's does; otherwise none."""

    def __init__(self, beside: bool, prebuild: PrebuildRequest, timeout_s: float,
                 env: dict[str, str]) -> None:
        # template=False: the next process imports, as measured here, instead of being forked.
        super().__init__(timeout_s=timeout_s, env=env, prestart=True, template=False)
        self.beside = beside
        self._spare = Spare.start(self.python, self._env(), prebuild)

    def ready(self, timeout_s: float) -> bool:
        spare, deadline = self._spare, time.monotonic() + timeout_s
        assert spare is not None
        while not spare.ready.exists():
            if spare.proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _hand_over(self, request: TrialRequest, request_path: Path, result_path: Path,
                   trial_env: dict[str, str]) -> Spare:
        if self.beside:
            return super()._hand_over(request, request_path, result_path, trial_env)
        spare, self._spare = self._spare, _NoSpare()  # type: ignore[assignment]
        assert spare is not None
        spare.give(request_path, result_path, trial_env)
        return spare


def run_once(request: TrialRequest, beside: bool, timeout_s: float) -> TrialResult:
    """One trial of ``request`` with cold caches, alone or with the next process beside it."""
    root = Path(tempfile.mkdtemp(prefix="tuner-import-beside-"))
    (root / "tmp").mkdir()
    runner = BesideRunner(beside, PrebuildRequest(request.workload, request.config.batch_size),
                          timeout_s, env={"TMPDIR": str(root / "tmp")})
    try:
        if not runner.ready(timeout_s):
            return TrialResult.failure(Status.CRASH, "the pre-started process never got ready")
        return runner.run(request, root / "trial", cache_dir=root / "cache")
    finally:
        runner.close()
        shutil.rmtree(root, ignore_errors=True)


def verdict(alone: list[float], beside: list[float]) -> str:
    """The last line: medians of compile_s_cold and the difference in percent of alone's."""
    a, b = statistics.median(alone), statistics.median(beside)
    return (f"import beside compile: alone {a:.2f} s, with import {b:.2f} s, "
            f"cost {(b / a - 1) * 100:+.1f} %")


Run = tuple[str, TrialResult, float]  # kind, result, the host's 1-minute load average before it


def report(runs: list[Run], header: str) -> str:
    """Markdown: one row per run, then per kind the median and spread, then the verdict."""
    lines = [header, "",
             "| run | kind | compile_s_cold | wall_s | quiet_wait_s | load before | status |",
             "|---|---|---|---|---|---|---|"]
    for i, (kind, r, load) in enumerate(runs, 1):
        lines.append(f"| {i} | {kind} | {_num(r.compile_s_cold)} | {_num(r.wall_s)} | "
                     f"{_num(r.quiet_wait_s)} | {load:.1f} | {r.status.value} |")
    times = {k: [r.compile_s_cold for kind, r, _ in runs if kind == k and r.ok
                 and r.compile_s_cold is not None] for k in (ALONE, BESIDE)}
    lines.append("")
    for kind, values in times.items():
        if values:
            lines.append(f"{kind}: median {statistics.median(values):.2f} s, "
                         f"min {min(values):.2f}, max {max(values):.2f} ({len(values)} runs)")
    if times[ALONE] and times[BESIDE]:
        lines += ["", verdict(times[ALONE], times[BESIDE])]
    else:
        lines += ["", "import beside compile: not measured (no ok run of one kind)"]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--mode", default="default")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind (default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="unreported runs first (default 1: loads the libraries from disk)")
    parser.add_argument("--timeout", type=float, default=900.0, help="per run, seconds")
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = parser.parse_args(argv)

    config = TrialConfig("inductor", args.batch_size, args.mode, False)
    work = Workload(model=args.model, device=args.device, dtype=args.dtype,
                    image_size=args.image_size)
    request = TrialRequest(config, work, TrialProtocol(min_calls=10, min_seconds=0.5))
    for i in range(args.warmup):
        r = run_once(request, False, args.timeout)
        print(f"warm-up {i + 1}: {r.status.value} compile {_num(r.compile_s_cold)} s",
              file=sys.stderr)
    runs: list[Run] = []
    for i in range(2 * args.repeats):
        kind = BESIDE if i % 2 else ALONE
        load = os.getloadavg()[0]
        r = run_once(request, kind == BESIDE, args.timeout)
        runs.append((kind, r, load))
        print(f"run {i + 1} {kind}: {r.status.value} compile {_num(r.compile_s_cold)} s, "
              f"wall {_num(r.wall_s)} s {r.message or ''}", file=sys.stderr)

    fp = next((r.fingerprint for _, r, _ in runs if r.fingerprint), {})
    header = (f"# import beside compile, {time.strftime('%Y-%m-%d')}, "
              f"{fp.get('gpu_name') or fp.get('cpu') or 'CPU'}, torch {fp.get('torch')}\n\n"
              f"{args.model} {args.dtype} bs={args.batch_size} {args.image_size} px, "
              f"{config.label} on {args.device}, cold caches; runs alternate alone / with the "
              "next trial's process (import and pre-build) started at the hand-over.")
    text = report(runs, header)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if all(r.ok for _, r, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
