"""The tuner's own time per trial: wall time minus the worker's compile + warm-up + measure.

    python benchmarks/trial_overhead.py STUDY                  # from a study's Parquet file
    python benchmarks/trial_overhead.py --measure [--device cuda] [--out FILE.md]

STUDY: wall_s is what the search process waited for each trial; the worker records its import,
build, cold compile, warm-up and steady-state measuring times. What is left is the tuner's own
overhead per trial (process start, fingerprint, eager reference, correctness, writing the record).

--measure runs the same configs twice, one fresh process per trial started when the trial starts
(--no-prestart) and with the next trial's process pre-started while a trial runs (--prestart),
and prints both tables: overhead per trial, how long each trial waited for the next process's
import (quiet_wait_s, part of the overhead) and the cold compile (to see whether that import,
running beside the compile, slowed it).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

import pandas as pd

from tuner.data import files

PHASES = ["compile_s_cold", "warmup_s", "measure_s"]


def overhead_table(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["status"] == "ok"].copy()
    ok["overhead_s"] = ok["wall_s"] - ok[PHASES].sum(axis=1)
    return ok


def from_study(path: str) -> None:
    df, meta = files.read(path)
    ok = overhead_table(df)
    ok["other_s"] = ok["overhead_s"] - ok[["import_s", "build_s"]].sum(axis=1)
    cols = ["label", "batch_size", "wall_s", "import_s", "build_s", *PHASES, "other_s"]
    print(f"study {meta.get('study')}: {', '.join(fp.get('gpu_name') or fp.get('cpu') or '?' for fp in meta.get('fingerprints', []))}")
    print(ok[cols].round(2).to_string(index=False))
    useful = ok[PHASES].sum(axis=1)
    print(f"\nper trial (mean of {len(ok)}): wall {ok['wall_s'].mean():.1f} s, "
          f"compile+warm-up+measure {useful.mean():.1f} s, "
          f"import+build {(ok['import_s'] + ok['build_s']).mean():.1f} s, "
          f"other {ok['other_s'].mean():.1f} s")
    print(f"tuner overhead per trial (wall minus compile+warm-up+measure): "
          f"{ok['overhead_s'].mean():.1f} s")


def measure(args: argparse.Namespace) -> str:
    import torch

    from tuner.launch.runner import ProcessRunner
    from tuner.spec.records import TrialProtocol, TrialRequest
    from tuner.spec.space import TrialConfig
    from tuner.spec.workload import Workload

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    workload = Workload(model=args.model, device=device, image_size=args.image_size)
    modes = ["default", "reduce-overhead"] if device.startswith("cuda") else ["default"]
    configs = [TrialConfig("eager", bs) for bs in args.batch_sizes] + [
        TrialConfig("inductor", bs, mode, False) for bs in args.batch_sizes for mode in modes]
    protocol = TrialProtocol(min_seconds=args.min_seconds)
    lines = [f"# trial overhead, {datetime.date.today()}, {_machine(device)}, torch "
             f"{torch.__version__}", "",
             f"{args.model} {args.image_size} px fp32, {len(configs)} trials per way, cold "
             f"caches, --min-seconds {args.min_seconds}; overhead = wall - (compile + warm-up "
             "+ measure)", ""]
    summary = []
    for prestart in (False, True):
        runner = ProcessRunner(timeout_s=args.timeout, prestart=prestart)
        rows = []
        with tempfile.TemporaryDirectory(prefix="tuner-overhead-") as tmp:
            try:
                for i, config in enumerate(configs):
                    r = runner.run(TrialRequest(config, workload, protocol), Path(tmp) / str(i))
                    row = {"trial": i + 1, "config": f"{config.label} bs={config.batch_size}",
                           "status": r.status.value, "wall_s": r.wall_s, "import_s": r.import_s,
                           "quiet_wait_s": r.quiet_wait_s, **{p: getattr(r, p) for p in PHASES}}
                    rows.append(row)
                    print(f"{'prestart' if prestart else 'fresh'} {row}", file=sys.stderr)
            finally:
                runner.close()
        table = overhead_table(pd.DataFrame(rows))
        name = "--prestart" if prestart else "--no-prestart"
        lines += [f"## {name}", "", "```",
                  table[["trial", "config", "wall_s", "import_s", "quiet_wait_s", *PHASES,
                         "overhead_s"]].round(2).to_string(index=False), "```", ""]
        # The first trial of a run has no process started before it, either way.
        later = table[table["trial"] > 1]
        summary.append(f"{name}: overhead per trial {table['overhead_s'].mean():.2f} s (mean of "
                       f"{len(table)}), {later['overhead_s'].mean():.2f} s after the first; "
                       f"cold compile of inductor trials "
                       f"{table[table['config'].str.startswith('inductor')]['compile_s_cold'].mean():.2f} s")
    lines += ["## summary", "", *summary, ""]
    text = "\n".join(lines)
    if args.out:
        Path(args.out).write_text(text)
    return text


def _machine(device: str) -> str:
    from tuner.trial import fingerprint

    fp = fingerprint.collect(device)
    return fp.get("gpu_name") or fp.get("cpu") or device


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", default="studies/h200-resnet18")
    parser.add_argument("--measure", action="store_true", help="run trials both ways")
    parser.add_argument("--device")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 32])
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    if args.measure:
        print(measure(args))
    else:
        from_study(args.study)


if __name__ == "__main__":
    main()
