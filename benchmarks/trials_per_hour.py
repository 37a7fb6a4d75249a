"""Search throughput: trials per hour with one worker per GPU, for GPU sets doing the same work.

    python benchmarks/trials_per_hour.py --gpus 0 --gpus 0,1 [--batch-sizes 1,32] [--out FILE.md]

Every GPU set measures the same fixed list of configs: the whole grid of a small space (resnet18
fp32; eager, and inductor in modes default and reduce-overhead with dynamic false and true; at
each of --batch-sizes: 5 configs a batch size). Each set runs its own fresh study
(`tuner search --gpus SET --confirm 0`, cold caches) with no --budget, so its search ends by
itself once every config of the grid is measured ("every config in the search space is
measured"; each config is measured once, whichever worker takes it). The script checks that
each set measured exactly the grid, once per config, and stops with an error otherwise.

Trials per hour = configs measured / the search command's wall time, start to exit (the
workers' start-up and the last trial's tail included). Per set it also gives the mean of each
phase the rows record (launch, import, build, eager reference, compile, quiet wait, warm-up,
measurement, stream, replay, the rest of the trial process, the search's own time between
trials, wall), and per config the paired ratio of its wall_s in each set against the first set.
With one worker and two, the output ends with the line
`trials per hour: 1 GPU A, 2 GPUs B, ratio R x`.

`--keep DIR` keeps each set's study folder (and its wall time) in DIR: a set already complete
there is read, not run again, so the sets can be run by separate commands.
`--storage URL` (repeatable; `sqlite`, the default, is the study's own file) runs every set
against that Optuna storage too, e.g. postgresql://user@host/db; the studies made there are
deleted afterwards.

`--fake-runner --fake-delay S` runs the same thing with made-up trials of S seconds (no GPU,
tuner.fake; it allows up to 8 GPU indices on a machine without any): it measures the
tuner's own coordination cost, not the hardware. Its rows' phases are made up, all but
`tuner_overhead_s`; the report gives the rate against the ideal (workers / S) instead.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pandas as pd

from tuner.data import files
from tuner.domain.layout import StudyLayout

REPO = Path(__file__).resolve().parents[1]
BACKENDS, MODES, DYNAMIC = ("eager", "inductor"), ("default", "reduce-overhead"), (False, True)
# The phases a row records (tuner.data.schema), in the order a trial goes through them.
PHASES = ("launch_s", "import_s", "build_s", "eager_reference_s", "compile_s_cold",
          "quiet_wait_s", "warmup_s", "measure_s", "stream_s", "replay_s", "process_s",
          "tuner_overhead_s", "wall_s")
FAKE_PHASES = ("tuner_overhead_s",)  # the only phase a fake row measures


def space_args(batch_sizes: str) -> list[str]:
    return ["--model", "resnet18", "--dtype", "float32", "--backend", ",".join(BACKENDS),
            "--mode", ",".join(MODES), "--dynamic", ",".join(str(d).lower() for d in DYNAMIC),
            "--batch-sizes", batch_sizes, "--inductor-option", "none", "--channels-last", "false"]


def grid(batch_sizes: str) -> list[str]:
    """The fixed list every set measures: the keys of the space's whole grid."""
    from tuner.domain.space import build_space

    space = build_space(device="cuda", batch_sizes=[int(b) for b in batch_sizes.split(",")],
                        backends=list(BACKENDS), modes=list(MODES), dynamic=list(DYNAMIC))
    return [c.key for c in space.configs()]


def search_command(gpus: str, name: str, root: Path, args: argparse.Namespace) -> list[str]:
    # The fake runner lives in the package: `python -m tuner.fake` is the tuner command with it
    # behind.
    tuner = ["tuner.fake", "--fake-delay", str(args.fake_delay)] if args.fake_runner \
        else ["tuner"]
    cmd = [sys.executable, "-m", *tuner, "search", *space_args(args.batch_sizes),
           "--image-size", str(args.image_size), "--gpus", gpus, "--name", name,
           "--studies-dir", str(root), "--timeout", f"{args.timeout}s", "--confirm", "0",
           "--quiet"]
    if args.budget:  # a safety net only: a set it cuts short is not the same work
        cmd += ["--budget", f"{args.budget}s"]
    return cmd


def storage_label(storage: str) -> str:
    if storage == "sqlite":
        return "sqlite"
    from tuner.study.redact import redact

    return redact(storage)


def run_set(gpus: str, storage: str, args: argparse.Namespace, root: Path) -> dict:
    """Run one GPU set's search to the end of the grid (or read it from --keep) and its rows."""
    tag = "tph-" + gpus.replace(",", "-") + ("" if storage == "sqlite" else "-pg")
    record = root / f"{tag}.json"
    setup = {"batch_sizes": args.batch_sizes, "image_size": args.image_size,
             "timeout": args.timeout, "budget": args.budget, "storage": storage_label(storage),
             "fake_delay": args.fake_delay if args.fake_runner else None}
    if record.exists():
        done = json.loads(record.read_text())
        if done.get("setup") != setup:
            raise SystemExit(f"--keep {root}: {record.name} was run with {done.get('setup')}, "
                             f"not {setup}: give another folder")
        print(f"--gpus {gpus} ({storage_label(storage)}): read from {record}", file=sys.stderr)
    else:
        # A study name of its own on a shared server; a sqlite study of an interrupted run is
        # started again cold (the same name would resume it).
        name = tag if storage == "sqlite" else f"{tag}-{uuid.uuid4().hex[:8]}"
        shutil.rmtree(root / name, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k != "TUNER_STORAGE"}
        if storage != "sqlite":
            env["TUNER_STORAGE"] = storage  # never in argv, where `ps` shows it
        if args.fake_runner:  # tuner.fake and its fleet workers import this checkout
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO),
                                                              env.get("PYTHONPATH")]))
        url = storage if storage != "sqlite" else StudyLayout(root / name).sqlite_url
        began, t = time.time(), time.monotonic()
        try:
            returncode, stderr = launch(search_command(gpus, name, root, args), env)
            wall = time.monotonic() - t
            first_start, last_end = _trial_span(url, name) if returncode == 0 else (0, 0)
        finally:
            if storage != "sqlite":
                _delete_studies(storage, name)
        if returncode != 0:
            raise SystemExit(f"--gpus {gpus}: tuner search exited {returncode}: "
                             f"{stderr.strip()[-2000:]}")
        done = {"gpus": gpus, "name": name, "setup": setup, "wall_s": wall,
                "startup_s": first_start - began,
                "search_s": last_end - first_start, "winddown_s": began + wall - last_end}
        record.write_text(json.dumps(done) + "\n")
    df, _ = files.read(root / done["name"])
    df = df[df["status"] != "interrupted"]
    wall = float(done["wall_s"])
    return {"gpus": gpus, "storage": storage, "workers": len(gpus.split(",")), "rows": df,
            "configs": len(df), "ok": int((df["status"] == "ok").sum()), "wall_s": wall,
            "trials_per_hour": len(df) / wall * 3600, "startup_s": done["startup_s"],
            "search_s": done["search_s"], "winddown_s": done["winddown_s"],
            "search_per_hour": len(df) / done["search_s"] * 3600 if done["search_s"] > 0
            else float("nan")}


def launch(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the search command to its end: its exit code and stderr."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return proc.returncode, proc.stderr


def _trial_span(url: str, name: str) -> tuple[float, float]:
    """When the study's first trial started and its last one ended (epoch seconds), from the
    Optuna storage: the search proper, without the command's start-up and wind-down."""
    import optuna
    from optuna.trial import TrialState

    from tuner.study.storage import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url)  # with the installed PostgreSQL driver named
    starts, ends = [], []
    for study in optuna.get_all_study_names(storage=storage):
        if study == name or study.startswith(name + ":"):
            for t in optuna.load_study(study_name=study, storage=storage).get_trials(
                    deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
                if t.datetime_start and t.datetime_complete:  # naive local times, as time.time()
                    starts.append(t.datetime_start.timestamp())
                    ends.append(t.datetime_complete.timestamp())
    if hasattr(storage, "engine"):
        storage.engine.dispose()
    return (min(starts), max(ends)) if starts else (float("nan"), float("nan"))


def _delete_studies(storage: str, name: str) -> None:
    """The study and its batch sizes' studies (``NAME:bsN``), off the server."""
    import optuna

    from tuner.study.storage import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    server = make_storage(storage)
    for study in optuna.get_all_study_names(storage=server):
        if study == name or study.startswith(name + ":"):
            optuna.delete_study(study_name=study, storage=server)
    server.engine.dispose()


def check_same_work(sets: list[dict], keys: list[str]) -> None:
    """Every set measured the fixed list, each config once; else a one-line error."""
    for s in sets:
        measured = list(s["rows"]["config_key"])
        twice = sorted({k for k in measured if measured.count(k) > 1})
        missing, extra = sorted(set(keys) - set(measured)), sorted(set(measured) - set(keys))
        if twice or missing or extra:
            raise SystemExit(f"--gpus {s['gpus']} ({storage_label(s['storage'])}) did not measure "
                             f"the fixed list of {len(keys)} configs: missing {missing}, "
                             f"measured twice {twice}, not in the list {extra}")


def gpus_text(workers: int) -> str:
    return f"{workers} GPU" + ("" if workers == 1 else "s")


def summary_line(sets: list[dict]) -> str:
    """``trials per hour: 1 GPU A, 2 GPUs B, ratio R x`` (the last set against the first);
    ``trials per hour: 1 GPU A`` alone for one set (a machine with one GPU)."""
    rates = ", ".join(f"{gpus_text(s['workers'])} {s['trials_per_hour']:.0f}" for s in sets)
    if len(sets) == 1:
        return f"trials per hour: {rates}"
    return (f"trials per hour: {rates}, ratio "
            f"{sets[-1]['trials_per_hour'] / sets[0]['trials_per_hour']:.2f} x")


def header(sets: list[dict], args: argparse.Namespace) -> str:
    import torch

    today = datetime.date.today()
    if args.fake_runner:
        return (f"# trials per hour, {today}, fake runner (made-up trials of {args.fake_delay:g} s,"
                f" no GPU), {machine()}, torch {torch.__version__}")
    rows = pd.concat([s["rows"] for s in sets])
    gpu = ", ".join(sorted(rows["fp_gpu_name"].dropna().astype(str).unique())) or "GPU unknown"
    version = ", ".join(sorted(rows["fp_torch"].dropna().astype(str).unique())) or "unknown"
    return f"# trials per hour, {today}, {gpu}, torch {version}"


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def section(sets: list[dict], args: argparse.Namespace) -> list[str]:
    """The tables of one storage's sets: rate, phases per set, and wall_s per config."""
    base = sets[0]["trials_per_hour"]
    cols = ("| --gpus | workers | configs | ok | wall s | trials/hour | vs first set | start-up s "
            "| first to last trial s | wind-down s | trials/hour, first to last trial |")
    if args.fake_runner:
        cols += " ideal trials/hour | of ideal | worker-s per trial beyond the delay |"
    lines = [cols, "|" + "---|" * (cols.count("|") - 1)]
    for s in sets:
        line = (f"| {s['gpus']} | {s['workers']} | {s['configs']} | {s['ok']} | "
                f"{s['wall_s']:.1f} | {s['trials_per_hour']:.0f} | "
                f"{s['trials_per_hour'] / base:.2f}x | {s['startup_s']:.1f} | "
                f"{s['search_s']:.1f} | {s['winddown_s']:.1f} | {s['search_per_hour']:.0f} |")
        if args.fake_runner:  # the search proper: start-up and wind-down are paid once a set
            beyond = s["workers"] * s["search_s"] / s["configs"] - args.fake_delay
            if args.fake_delay > 0:
                ideal = s["workers"] / args.fake_delay * 3600
                line += f" {ideal:.0f} | {s['search_per_hour'] / ideal:.0%} | {beyond:.2f} |"
            else:
                line += f" - | - | {beyond:.2f} |"
        lines.append(line)

    phases = FAKE_PHASES if args.fake_runner else PHASES
    names = [s["gpus"] for s in sets]
    lines += ["", "Mean per phase, seconds a trial (over the rows that record it; "
              "tuner_overhead_s: the search's own time before a trial, first trial of each "
              "worker excluded)" + (": the fake rows' other phases are made up" if
                                    args.fake_runner else ""), "",
              "| phase | " + " | ".join(f"--gpus {n}" for n in names) + " | last / first |",
              "|---|" + "---|" * (len(sets) + 1)]
    for phase in phases:
        means = [pd.to_numeric(s["rows"][phase], errors="coerce").mean()
                 if phase in s["rows"] else float("nan") for s in sets]
        cells = ["-" if pd.isna(m) else f"{m:.3f}" for m in means]
        ratio = "-" if pd.isna(means[0]) or pd.isna(means[-1]) or not means[0] \
            else f"{means[-1] / means[0]:.2f}x"
        lines.append(f"| {phase} | " + " | ".join(cells) + f" | {ratio} |")

    if args.fake_runner:
        return lines + ["", "Per config wall_s: not shown, the fake's is made up."]
    walls = pd.concat([s["rows"].set_index("config_key")["wall_s"].rename(s["gpus"])
                       for s in sets], axis=1)
    walls = walls.apply(pd.to_numeric, errors="coerce")
    lines += ["", "Per config, the same config's wall_s in each set, and its ratio to the first "
              "set's", "",
              "| config | " + " | ".join([f"--gpus {n} s" for n in names]
                                        + [f"{n} / {names[0]}" for n in names[1:]]) + " |",
              "|---|" + "---|" * (2 * len(sets) - 1)]
    for key, row in walls.iterrows():
        lines.append(f"| {str(key).replace('|', '&#124;')} | " + " | ".join(
            [f"{row[n]:.2f}" for n in names]
            + [f"{row[n] / row[names[0]]:.2f}" for n in names[1:]]) + " |")
    for n in names[1:]:
        ratios = (walls[n] / walls[names[0]]).dropna()
        if len(ratios):
            lines.append(f"\nmedian wall_s ratio, --gpus {n} / --gpus {names[0]}, same config: "
                         f"{statistics.median(ratios):.2f} ({len(ratios)} configs)")
    return lines


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", action="append", required=True,
                        help="a GPU set, as tuner search --gpus takes it; give several")
    parser.add_argument("--batch-sizes", default="1,32",
                        help="the grid's batch sizes (5 configs each); default 1,32")
    parser.add_argument("--budget", type=float,
                        help="seconds, per set: a safety net; a set it cuts short is an error")
    parser.add_argument("--timeout", type=float, default=300, help="per trial, seconds")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--storage", action="append",
                        help="sqlite (default: the study's own file) or an Optuna storage URL; "
                             "repeat to run every set on each")
    parser.add_argument("--keep", type=Path,
                        help="keep the sets' studies here; a set finished there is reused")
    parser.add_argument("--out", type=Path, help="also write the report here (markdown)")
    parser.add_argument("--fake-runner", action="store_true")
    parser.add_argument("--fake-delay", type=float, default=1.0)
    args = parser.parse_args(argv)
    storages = args.storage or ["sqlite"]
    keys = grid(args.batch_sizes)

    by_storage: list[list[dict]] = []
    with tempfile.TemporaryDirectory(prefix="tuner-tph-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for storage in storages:
            sets = []
            for gpus in args.gpus:
                sets.append(run_set(gpus, storage, args, root))
                s = sets[-1]
                print(f"--gpus {gpus} ({storage_label(storage)}): {s['configs']} configs in "
                      f"{s['wall_s']:.1f} s, {s['trials_per_hour']:.0f} trials/hour",
                      file=sys.stderr)
            check_same_work(sets, keys)
            by_storage.append(sets)

    lines = [header([s for sets in by_storage for s in sets], args), "",
             f"resnet18 {args.image_size} px fp32: every set measures the same {len(keys)} "
             f"configs, the whole grid of eager and inductor (modes default and reduce-overhead, "
             f"dynamic false and true) at batch sizes {args.batch_sizes}. Each set is "
             "a fresh study searched until every config is measured ("
             + ("no --budget" if not args.budget else f"--budget {args.budget:g} s, not reached")
             + "), cold caches, one worker per GPU. Trials per hour = configs / the search command's wall time "
             "(worker start-up and the last trial's tail included); start-up = the command's start "
             "to its first trial's, wind-down = its last trial's end to the command's exit (from "
             "the Optuna storage's trial times).", ""]
    if args.fake_runner:
        lines += [f"Fake runner: each trial sleeps {args.fake_delay:g} s. Ideal trials/hour = "
                  f"workers x 3600 / {args.fake_delay:g}. Worker-s per trial beyond the delay = "
                  "workers x (first to last trial) / configs - delay: what the tuner itself "
                  "costs a trial once the workers run (storage, claims, sampler, Parquet files, "
                  "workers idle at the end); the rate against the ideal is over the same span.",
                  ""]
    for storage, sets in zip(storages, by_storage):
        if len(storages) > 1:
            lines += [f"## storage: {storage_label(storage)}", ""]
        lines += section(sets, args) + [""]
        if len(storages) > 1:
            lines += [f"{storage_label(storage)}: {summary_line(sets)}", ""]
    if len(storages) > 1:
        lines.append(f"Last line: {storage_label(storages[0])}.")
    lines.append(summary_line(by_storage[0]))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return text


if __name__ == "__main__":
    main()
