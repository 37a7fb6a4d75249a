"""The search's own time per trial as a study grows: what an overnight study pays by morning.

    python benchmarks/study_growth.py --trials 600 --out benchmarks/results/study_growth.md

Runs ``tuner search`` with the fake runner (tuner/fake/runner.py: every trial is made up and takes
no time), so what is left of each trial is the tuner's own work between trials: the claims read
from the storage, the sampler, the Parquet files rewritten after every trial, the caches
pruned. That is each row's ``tuner_overhead_s`` (the search's time since the previous trial
ended). The space: resnet18 on the CPU, batch sizes 1, 8, 16 and 32, eager and 160 inductor
configs each (dynamic and five inductor options), 644 configs in all (`--large`: seven options,
2,564 configs), searched in a fresh
study. The table gives the mean, median and max of ``tuner_overhead_s`` per block of
``--block`` trials, in the order they ran, and the trials asked a trial measured (the sampler's
proposals of configs already measured are asked, then pruned: near the end of a space most
are); the last line, the first block's mean and the last one's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

SPACE = ["--model", "resnet18", "--device", "cpu", "--batch-sizes", "1,8,16,32",
         "--backend", "eager,inductor", "--mode", "default", "--dynamic", "false,true",
         "--inductor-option", "max_fusion_size=8,16,32,64,128",
         "--inductor-option", "epilogue_fusion=false,true",
         "--inductor-option", "aggressive_fusion=false,true",
         "--inductor-option", "pattern_matcher=false,true",
         "--inductor-option", "split_reductions=false,true"]
# --large: two more options, four times the configs (2,564), so that a long run does not
# exhaust the space (where the sampler mostly proposes measured configs)
LARGE = ["--inductor-option", "freezing=false,true", "--inductor-option", "shape_padding=false,true"]


def blocks(overhead: pd.Series, size: int, numbers: pd.Series | None = None) -> pd.DataFrame:
    """Mean, median and max of ``overhead`` (in trial order) per block of ``size`` trials;
    given the trials' ``numbers`` (the storage's ids, which every trial asked takes, pruned
    duplicates and queued ones too), also the trials asked per trial measured: 1 where the
    sampler's first proposal was new, more where it proposed configs already measured."""
    values = overhead.reset_index(drop=True)
    asked = None if numbers is None else numbers.reset_index(drop=True).diff()
    rows = []
    for start in range(0, len(values), size):
        row = {"trials": f"{start + 1}-{min(start + size, len(values))}",
               "mean s": values[start:start + size].mean(),
               "median s": values[start:start + size].median(),
               "max s": values[start:start + size].max()}
        if asked is not None:
            row["asked a trial"] = asked[start:start + size].mean()
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--large", action="store_true",
                        help="a space four times larger (2,564 configs)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    space = SPACE + LARGE if args.large else SPACE

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="tuner-growth-") as tmp:
        cmd = [sys.executable, "-m", "tuner.fake", "--fake-delay", "0", "search", *space,
               "--studies-dir", tmp, "--name", "growth", "--trials", str(args.trials),
               "--confirm", "0", "--quiet"]
        print(" ".join(cmd[2:]), file=sys.stderr)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"tuner search exited {proc.returncode}: {proc.stderr[-2000:]}")
        df = pd.read_parquet(Path(tmp) / "growth" / "trials.parquet")
    ran = df.sort_values("trial_number").dropna(subset=["tuner_overhead_s"])
    table = blocks(ran["tuner_overhead_s"], args.block, ran["trial_number"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                            capture_output=True, text=True).stdout.strip() or "?"
    import torch

    lines = [f"# the search's own time per trial as the study grows, {datetime.date.today()}, "
             f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
             f"torch {torch.__version__}, commit {commit}", "",
             f"`python benchmarks/study_growth.py {' '.join(sys.argv[1:] if argv is None else argv)}`"
             f": the fake runner (trials take no time), 4 batch sizes, "
             f"{2564 if args.large else 644} configs; "
             "`tuner_overhead_s` per block of trials, in seconds (see the script).", "",
             "```", table.to_string(index=False, float_format=lambda v: f"{v:.3f}"), "```", "",
             f"tuner time per trial: first {args.block} trials {table['mean s'].iloc[0]:.3f} s, "
             f"last block {table['mean s'].iloc[-1]:.3f} s"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
