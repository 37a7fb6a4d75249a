"""Search throughput: trials per hour with one worker per GPU, for several GPU sets.

    python benchmarks/trials_per_hour.py --gpus 0 --gpus 0,1 --budget 240 [--out FILE.md]

Each GPU set runs its own fresh study (`tuner search --gpus SET --budget B`, same model and
search space, cold caches) in a temporary folder. Trials per hour = trials finished (any status
but interrupted) / the search command's wall time, start to exit, trials in flight at the end of
the budget included. The space is large enough (49 configs by default) that no set runs out of
configs before its budget. Different sets measure different configs (each worker samples with
its own seed), so the mean trial wall time is printed beside the rate.

`--fake-runner --fake-delay S` runs the same thing with made-up trials of S seconds (no GPU):
it checks the benchmark and the fleet, not the hardware.
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tuner.data import files

SPACE = ["--model", "resnet18", "--dtype", "float32", "--backend", "eager,inductor",
         "--mode", "default,reduce-overhead", "--dynamic", "false,true,none",
         "--batch-sizes", "1,2,4,8,16,32,64"]


def run_set(gpus: str, args: argparse.Namespace, root: Path) -> dict:
    name = "tph-" + gpus.replace(",", "-")
    # The fake runner lives with the tests: tests.fake_tuner is the tuner command with it behind.
    tuner = ["tests.fake_tuner", "--fake-delay", str(args.fake_delay)] if args.fake_runner \
        else ["tuner"]
    cmd = [sys.executable, "-m", *tuner, "search", *SPACE, "--image-size",
           str(args.image_size), "--gpus", gpus, "--name", name, "--studies-dir", str(root),
           "--budget", f"{args.budget}s", "--timeout", f"{args.timeout}s", "--confirm", "0",
           "--quiet"]
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    if proc.returncode != 0:
        raise SystemExit(f"--gpus {gpus}: tuner search exited {proc.returncode}: "
                         f"{proc.stderr.strip()[-2000:]}")
    df, _ = files.read(root / name)
    done = df[df["status"] != "interrupted"]
    return {"gpus": gpus, "workers": len(gpus.split(",")), "trials": len(done),
            "ok": int((done["status"] == "ok").sum()), "wall_s": wall,
            "trials_per_hour": len(done) / wall * 3600,
            "mean_trial_wall_s": float(done["wall_s"].mean())}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", action="append", required=True,
                        help="a GPU set, as tuner search --gpus takes it; give several")
    parser.add_argument("--budget", type=float, default=240, help="seconds, per set")
    parser.add_argument("--timeout", type=float, default=300, help="per trial, seconds")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--out", type=Path, help="also write the table here (markdown)")
    parser.add_argument("--fake-runner", action="store_true")
    parser.add_argument("--fake-delay", type=float, default=1.0)
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory(prefix="tuner-tph-") as tmp:
        for gpus in args.gpus:
            rows.append(run_set(gpus, args, Path(tmp)))
            print(rows[-1], file=sys.stderr)
    import torch

    base = rows[0]["trials_per_hour"]
    where = "fake runner" if args.fake_runner else (
        torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")
    lines = [f"# trials per hour, {datetime.date.today()}, {where}, torch {torch.__version__}",
             "", f"resnet18 {args.image_size} px fp32, 49-config space, budget {args.budget:.0f} s "
             "per set, cold caches, one worker per GPU", "",
             "| --gpus | trials | ok | wall s | trials/hour | vs first set | mean trial wall s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['gpus']} | {r['trials']} | {r['ok']} | {r['wall_s']:.0f} | "
                     f"{r['trials_per_hour']:.0f} | {r['trials_per_hour'] / base:.2f}x | "
                     f"{r['mean_trial_wall_s']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
