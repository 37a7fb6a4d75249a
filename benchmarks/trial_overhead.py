"""The tuner's own time per trial: wall time minus compile, warm-up and measurement.

    python benchmarks/trial_overhead.py STUDY                   # from a study's Parquet file
    python benchmarks/trial_overhead.py --measure --machine cpu --device cpu --model resnet18 \
        --image-size 32 --batch-sizes 1,8 --out benchmarks/results/trial_overhead-cpu.md

overhead = wall_s - (compile_s_cold + warmup_s + measure_s + stream_s): what a trial costs beyond
compiling, warming up and measuring. Each trial's row splits it into the phases the trial records:
launch (process start-up, or the hand-over to a pre-started process), import, build, eager
reference, the wait for the next trial's process (quiet), the shape schedule's replay, the rest
in the trial process (fingerprint, correctness, compile health, memory, record) and the hand-back
(wall - launch - process: the record reaching the search). "between" is the search process's own
time before the trial (tuner_overhead_s: files, sampler), not part of wall_s. The mean is over
the trials after the first of each batch size: a first one has no eager reference kept
(reference_reused) and no model built ahead for it (prebuilt).

--measure runs the same short search twice, each in a fresh temporary study (`tuner search`,
eager and inductor at each batch size): with a fresh process per trial (--no-prestart), then
with the next trial's process pre-started (--prestart). It writes both tables and ends with the
line `overhead per trial: fresh X s, pre-started Y s`. `--ways` picks other ways, in its order:
"no-template" is --prestart with TUNER_TEMPLATE=0 (each pre-started process imports, instead
of being forked from a template); "prewarm" is --prestart with TUNER_PREWARM=1 (the next
trial's process readies the device before its trial: tuner.trial.prewarm), "no-prewarm" with
TUNER_PREWARM=0 (as --prestart was from 2026-11-30, after commit 9067913, until 2026-12-01;
readying is the default again);
"gpu-time" is --prestart with TUNER_GPU_TIME=1 (each CUDA trial also profiles 10 calls for its
gpu_time_ms: what that costs a trial). Where both
fresh and pre-started were measured the report still ends with that line, the other ways on
the line before it; otherwise the last line names the ways measured. With more than one way,
a table puts each config's latency (p50, ms) side by side, way by way: readying the device
ahead must leave what a trial measures as it was.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from tuner.data import files

MEASURED = ["compile_s_cold", "warmup_s", "measure_s", "stream_s"]
# Named phases inside the trial process, besides those measured: "other" is the rest of process_s.
IN_PROCESS = ["import_s", "build_s", "eager_reference_s", "quiet_wait_s", "replay_s",
              *MEASURED]
COLUMNS = {"trial_number": "trial", "label": "config", "batch_size": "bs", "wall_s": "wall",
           "launch_s": "launch", "import_s": "import", "build_s": "build",
           "eager_reference_s": "eager_ref", "compile_s_cold": "compile", "quiet_wait_s": "quiet",
           "warmup_s": "warmup", "measurement_s": "measure", "replay_s": "replay",
           "other_s": "other", "return_s": "return", "overhead_s": "overhead",
           "tuner_overhead_s": "between", "prebuilt": "prebuilt", "prewarmed": "prewarmed",
           "reference_reused": "ref_reused", "latency_ms_p50": "p50_ms", "gpu_time_ms": "gpu_ms"}
# What each way changes in the tuner's environment, beyond --prestart / --no-prestart.
WAY_ENV = {"no-template": {"TUNER_TEMPLATE": "0"}, "prewarm": {"TUNER_PREWARM": "1"},
           "no-prewarm": {"TUNER_PREWARM": "0"}, "gpu-time": {"TUNER_GPU_TIME": "1"}}


def overhead_table(df: pd.DataFrame) -> pd.DataFrame:
    """The ok trials in the order they ran, with overhead_s and its parts; ``first`` marks
    the first trial run at each batch size (among all rows, failures too)."""
    df = df.sort_values("trial_number")
    first = set(df.groupby("batch_size")["trial_number"].min())
    ok = df[df["status"] == "ok"].copy()
    number = ok[sorted({"wall_s", "launch_s", "process_s", *IN_PROCESS})].apply(
        pd.to_numeric, errors="coerce")
    ok["measurement_s"] = number[["measure_s", "stream_s"]].sum(axis=1)
    ok["overhead_s"] = number["wall_s"] - number[MEASURED].sum(axis=1)
    ok["other_s"] = number["process_s"] - number[IN_PROCESS].sum(axis=1)
    ok["return_s"] = number["wall_s"] - number["launch_s"] - number["process_s"]
    ok["first"] = ok["trial_number"].isin(first)
    return ok


def mean_after_first(table: pd.DataFrame, column: str = "overhead_s") -> float | None:
    """The mean of ``column`` over the trials after the first of each batch size."""
    later = pd.to_numeric(table.loc[~table["first"], column], errors="coerce").dropna()
    return float(later.mean()) if len(later) else None


def report(table: pd.DataFrame) -> list[str]:
    """The table of one study, then its means, as Markdown lines."""
    shown = table[[c for c in COLUMNS if c in table]].rename(columns=COLUMNS)
    means = {name: mean_after_first(table, column) for name, column in [
        ("overhead", "overhead_s"), ("launch", "launch_s"), ("import", "import_s"),
        ("build", "build_s"), ("eager reference", "eager_reference_s"), ("quiet", "quiet_wait_s"),
        ("other", "other_s"), ("return", "return_s"), ("between", "tuner_overhead_s")]}
    later = table[~table["first"]]
    return ["```", shown.round(2).to_string(index=False), "```", "",
            f"after the first trial of each batch size ({len(later)} trials), mean s: "
            + ", ".join(f"{name} {_s(value)}" for name, value in means.items()),
            f"pre-built models {_count(later, 'prebuilt')} of {len(later)}, devices readied "
            f"{_count(later, 'prewarmed')} of {len(later)}, eager references reused "
            f"{_count(later, 'reference_reused')} of {len(later)}", *readied_memory(table), ""]


def readied_memory(table: pd.DataFrame) -> list[str]:
    """What the processes readied ahead held on the device beside the trial before theirs,
    as a line (MiB, NVML), where any trial recorded it."""
    held = pd.to_numeric(table.get("prewarm_vram_bytes_nvml", pd.Series(dtype=float)),
                         errors="coerce").dropna() / 2**20
    if held.empty:
        return []
    return [f"GPU memory a readied process held beside the trial before it (NVML): "
            f"{held.min():.0f}-{held.max():.0f} MiB over {len(held)} trials"]


def _count(table: pd.DataFrame, column: str) -> int:
    return int((table[column] == True).sum()) if column in table else 0  # noqa: E712


def latency_by_way(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Each config's p50 latency (ms), one column per way, as Markdown lines."""
    merged = None
    for way, table in tables.items():
        one = table.set_index(["label", "batch_size"])["latency_ms_p50"].rename(way)
        merged = one.to_frame() if merged is None else merged.join(one, how="outer")
    if merged is None:
        return []
    return ["## latency p50 (ms) by way", "", "```", merged.round(4).to_string(), "```", ""]


def last_lines(overhead: dict[str, float | None]) -> list[str]:
    """The report's last line (and the one before it): `overhead per trial: fresh X s,
    pre-started Y s` where both were measured, the other ways before it."""
    def line(ways: list[str]) -> str:
        return ", ".join(f"{way} {_s(overhead[way])} s" for way in ways)

    if "fresh" in overhead and "pre-started" in overhead:
        others = [w for w in overhead if w not in ("fresh", "pre-started")]
        return ([f"overhead per trial, other ways: {line(others)}"] if others else []) + \
            [f"overhead per trial: {line(['fresh', 'pre-started'])}"]
    return [f"overhead per trial: {line(list(overhead))}"]


def from_study(path: str) -> None:
    df, meta = files.read(path)
    machines = ", ".join(fp.get("gpu_name") or fp.get("cpu") or "?"
                         for fp in meta.get("fingerprints", []))
    print(f"study {meta.get('study')}: {machines}")
    print("\n".join(report(overhead_table(df))))


def measure(args: argparse.Namespace) -> str:
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    modes = args.modes or ("default,reduce-overhead" if device.startswith("cuda") else "default")
    space = ["--model", args.model, "--device", device, "--image-size", str(args.image_size),
             "--batch-sizes", args.batch_sizes, "--dtype", args.dtype,
             "--backend", "eager,inductor", "--mode", modes, "--dynamic", args.dynamic,
             "--inductor-option", "none", "--channels-last", "false"]
    lines = [f"# trial overhead, {datetime.date.today()}, {args.machine}: {_machine(device)}, "
             f"torch {torch.__version__}", "",
             f"{'A CPU figure. ' if device == 'cpu' else ''}`tuner search {' '.join(space)} "
             f"--min-seconds {args.min_seconds} --confirm 0`, cold caches, in a fresh study each "
             "way; overhead = wall - (compile + warm-up + measurement), measurement = measure_s "
             "+ stream_s (per request and back to back). Columns in seconds: see "
             "benchmarks/trial_overhead.py.", ""]
    overhead: dict[str, float | None] = {}
    tables: dict[str, pd.DataFrame] = {}
    with tempfile.TemporaryDirectory(prefix="tuner-overhead-") as tmp:
        for way in args.ways.split(","):
            flag = "--no-prestart" if way == "fresh" else "--prestart"
            env = {**os.environ, **WAY_ENV.get(way, {})}
            cmd = [sys.executable, "-m", "tuner", "search", *space, flag, "--name", "overhead",
                   "--studies-dir", str(Path(tmp) / way), "--min-seconds", str(args.min_seconds),
                   "--timeout", f"{args.timeout}s", "--confirm", "0", "--quiet"]
            print(f"{way}: {' '.join(cmd[2:])}", file=sys.stderr)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise SystemExit(f"{way}: tuner search exited {proc.returncode}: "
                                 f"{proc.stderr.strip()[-2000:]}")
            table = overhead_table(files.read(Path(tmp) / way / "overhead")[0])
            overhead[way], tables[way] = mean_after_first(table), table
            lines += [f"## {way} ({flag}{way_settings(env)})", "", *report(table)]
    if len(tables) > 1:
        lines += latency_by_way(tables)
    lines += last_lines(overhead)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    return text


def way_settings(env: dict[str, str]) -> str:
    """The settings a way ran under, for its heading: every variable the ways set, as the
    search saw it, whether the way set it or the caller's environment did (a "pre-started" way
    under TUNER_PREWARM=1 is not the default's)."""
    names = sorted({name for settings in WAY_ENV.values() for name in settings})
    return "".join(f", {name}={env[name]}" for name in names if name in env)


def _s(value: float | None) -> str:
    return "?" if value is None or value != value else f"{value:.2f}"


def _machine(device: str) -> str:
    from tuner.runtime import fingerprint

    fp = fingerprint.collect(device)
    return fp.get("gpu_name") or fp.get("cpu") or device


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", default="studies/h200-resnet18")
    parser.add_argument("--measure", action="store_true",
                        help="run a short search both ways (fresh and pre-started processes)")
    parser.add_argument("--machine", default="cpu",
                        help="what to call this machine in the report (cpu, h200)")
    parser.add_argument("--device")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--modes", help="inductor modes (default: default, and reduce-overhead "
                                        "on CUDA)")
    parser.add_argument("--dynamic", default="false",
                        help="dynamic values, e.g. false,true for more trials per batch size")
    parser.add_argument("--min-seconds", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--ways", default="fresh,pre-started",
                        help="ways to measure, in order: fresh, pre-started, no-template, "
                             "prewarm, no-prewarm, gpu-time")
    parser.add_argument("--out", help="also write the report to this Markdown file, e.g. "
                                      "benchmarks/results/trial_overhead-h200.md")
    args = parser.parse_args(argv)
    unknown = set(args.ways.split(",")) - {"fresh", "pre-started", *WAY_ENV}
    if unknown:
        parser.error(f"unknown way(s) in --ways: {', '.join(sorted(unknown))}")
    if args.measure:
        print(measure(args))
    else:
        from_study(args.study)


if __name__ == "__main__":
    main()
