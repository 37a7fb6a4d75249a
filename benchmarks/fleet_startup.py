"""Where a fleet's start-up goes: from `tuner search --gpus 0` to its first trial.

    python benchmarks/fleet_startup.py [--runs 3] [--steps N] [--tuner-path DIR] [--out FILE.md]

Each run is a fresh one-trial study (resnet18 224 px fp32, eager, batch size 1, `--gpus 0
--trials 1 --confirm 0`). The script stamps each line the command writes on stderr as it
arrives, and reads off, in seconds from the command's start:

- parent checked: the fleet's first line (the parent has checked the GPUs, the model and the
  options, and is about to create the study and start the workers);
- worker joined: the worker's first line (it has imported its modules and opened the study);
- first trial claimed: the worker's "running" line (asked, claimed; its process is started);
- first trial done: the worker's line for that trial's result;
- exit: the command's end (the Parquet files written).

The first trial's record adds what its own process spent: import_s (what was left of its
import of torch when the trial was handed to it), build_s, process_s. Then the time each module
takes to import in a fresh process on this machine (each with what it imports itself).

`--tuner-path DIR` puts another checkout's tree first on PYTHONPATH, to time older code in the
same call. `--fake-runner` runs the fake trials of tuner.fake (no GPU; for a dry run).
These are the trials-per-hour benchmark's start-up (trials_per_hour.py's `start-up s`), taken
apart.

`--steps N` also times, N times, what lies between "parent checked" and "worker joined", step
by step, each side in a fresh process with its modules imported first: the parent's
`Fleet.start` (open the storage and make the study, queue the baselines, the first export) and
a worker's join after the go (`join_spec`, `Search`, the first look at the study's state),
after what it imports while it waits (`import_ahead`, where the code has it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = ("torch", "torchvision", "optuna", "pandas", "pyarrow", "tuner.cli.fleet_worker",
           "tuner.cli.measure", "tuner.study.search", "tuner.study.export")
MARKS = ("parent checked", "worker joined", "first trial claimed", "first trial done", "exit")


def environment(tuner_path: str | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [p for p in (tuner_path, str(REPO), env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("TUNER_STORAGE", None)
    return env


# Each side of the go, as Fleet.start and run_worker do it; prints its steps' seconds as JSON.
PARENT_STEPS = """
import json, sys, time
from pathlib import Path
from tuner.domain.records import TrialProtocol
from tuner.domain.space import build_space
from tuner.domain.workload import Workload
from tuner.study.export import export_study
from tuner.study.search import Search
from tuner.study.spec import StudySpec
root, name = Path(sys.argv[1]), sys.argv[2]
space = build_space(device="cuda", batch_sizes=[1], backends=["eager"], modes=None,
                    dynamic=[False], dtypes=None, channels_last=None, cudnn_benchmark=None,
                    options=None)
spec = StudySpec(name=name, workload=Workload(model="resnet18", device="cuda"), space=space,
                 protocol=TrialProtocol(), root=root, storage=None, n_trials=1, budget_s=None,
                 seed=0, confirm_repeats="0", sampler="tpe", limits=None)
steps, t = {}, time.perf_counter()
search = Search(spec); steps["parent: open the storage, make the study"] = time.perf_counter() - t
t = time.perf_counter(); search.prepare(); steps["parent: queue the baselines"] = time.perf_counter() - t
t = time.perf_counter(); export_study(search.fronts, spec); steps["parent: first export"] = time.perf_counter() - t
print(json.dumps(steps))
"""
WORKER_STEPS = """
import json, sys, time
from pathlib import Path
import tuner.cli.measure
from tuner.study import storage
t = time.perf_counter()
if hasattr(storage, "import_ahead"):  # older code has none
    storage.import_ahead()
steps = {"worker: import_ahead, before the go": time.perf_counter() - t}
t = time.perf_counter()
import tuner.study.export, tuner.study.search
from tuner.study.search import Search
from tuner.study.storage import join_spec
steps["worker: imports after the go"] = time.perf_counter() - t
t = time.perf_counter()
spec = join_spec(sys.argv[2], None, Path(sys.argv[1]), "--study", n_trials=1, budget_s=None, seed=1)
steps["worker: join_spec (open the storage, read the study)"] = time.perf_counter() - t
t = time.perf_counter(); search = Search(spec); steps["worker: Search(spec)"] = time.perf_counter() - t
t = time.perf_counter(); search.claims.state(); steps["worker: the study's state"] = time.perf_counter() - t
print(json.dumps(steps))
"""


def step_times(root: Path, name: str, tuner_path: str | None) -> dict[str, float]:
    """The seconds of each step between the parent's checks and the worker's first line."""
    steps: dict[str, float] = {}
    for code in (PARENT_STEPS, WORKER_STEPS):
        out = subprocess.run([sys.executable, "-c", code, str(root), name], capture_output=True,
                             text=True, env=environment(tuner_path), cwd=root)
        if out.returncode != 0:
            raise SystemExit(f"steps {name}: exit {out.returncode}:\n{out.stderr[-2000:]}")
        steps.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return steps


def one_run(root: Path, name: str, args: argparse.Namespace) -> dict:
    """Run one fresh one-trial study; the seconds from the command's start to each mark."""
    tuner = ["tuner.fake", "--fake-delay", "1"] if args.fake_runner else ["tuner"]
    cmd = [sys.executable, "-m", *tuner, "search", "--model", "resnet18", "--backend", "eager",
           "--batch-sizes", "1", "--gpus", "0", "--trials", "1", "--confirm", "0",
           "--name", name, "--studies-dir", str(root), "--timeout", "300s"]
    lines: queue.Queue = queue.Queue()
    began = time.monotonic()
    # Run from elsewhere: `python -m` puts the working folder first on sys.path.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=environment(args.tuner_path), cwd=root)

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put((time.monotonic() - began, line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait()
    ended = time.monotonic() - began
    reader.join(5)
    stamped = []
    while not lines.empty():
        stamped.append(lines.get())
    if code != 0:
        raise SystemExit(f"run {name}: exit {code}:\n" + "\n".join(t for _, t in stamped[-20:]))
    marks: dict = {**marks_of(stamped), "exit": ended}
    from tuner.data import files

    df, _ = files.read(root / name)
    row = df.iloc[0]
    for phase in ("import_s", "build_s", "process_s"):
        value = row.get(phase)
        marks[phase] = float(value) if value is not None and value == value else float("nan")
    marks["lines"] = stamped
    return marks


def marks_of(stamped: list[tuple[float, str]]) -> dict[str, float]:
    """When each mark's line came, from the command's (seconds, stderr line) pairs."""
    marks: dict[str, float] = {}
    for at, text in stamped:
        if "parent checked" not in marks and "one worker per GPU" in text:
            marks["parent checked"] = at
        elif "worker joined" not in marks and text.startswith("gpu0 study"):
            marks["worker joined"] = at
        elif "first trial claimed" not in marks and text.startswith("gpu0   running"):
            marks["first trial claimed"] = at
        elif "first trial claimed" in marks and "first trial done" not in marks \
                and text.startswith("gpu0 ") and "running" not in text:
            marks["first trial done"] = at
    return marks


def import_seconds(module: str, tuner_path: str | None) -> float:
    code = ("import time; t = time.perf_counter(); import " + module
            + "; print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=environment(tuner_path), check=True, cwd=tempfile.gettempdir())
    return float(out.stdout.strip())


def commit(code: str) -> str:
    """The checkout's commit, and whether its tuner/ differs from it (a run of uncommitted code)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", code, *args], capture_output=True,
                              text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    return head + (" with uncommitted changes to tuner/" if git("status", "--porcelain", "tuner")
                   else "")


def describe() -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else \
        f"no GPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    return f"{datetime.date.today().isoformat()}, {gpu}, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tuner-path", help="another checkout's root, first on PYTHONPATH")
    parser.add_argument("--label", help="what --tuner-path holds (e.g. its commit), for the file")
    parser.add_argument("--fake-runner", action="store_true")
    parser.add_argument("--no-imports", action="store_true", help="skip the modules' import times")
    parser.add_argument("--steps", type=int, default=0,
                        help="times the steps between the parent's checks and the worker's "
                             "first line, this many times")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="fleet-startup-"))
    try:
        runs = []
        for i in range(args.runs):
            runs.append(one_run(root, f"startup-{i}", args))
            print(f"run {i + 1}/{args.runs}: first trial claimed at "
                  f"{runs[-1].get('first trial claimed', float('nan')):.2f} s", file=sys.stderr)
        steps = [step_times(root, f"steps-{i}", args.tuner_path) for i in range(args.steps)]
        imports = {} if args.no_imports else {
            m: [import_seconds(m, args.tuner_path) for _ in range(2)] for m in MODULES}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    code = args.tuner_path or str(REPO)
    head = args.label or commit(code)
    out = [f"# fleet start-up, {describe()}", "",
           f"Code: {code} ({head}). `tuner search --gpus 0 --trials 1 --confirm 0`, resnet18 "
           "224 px fp32 eager bs 1, a fresh study each run"
           + (" (fake runner: made-up trials of 1 s)" if args.fake_runner else "")
           + ". Seconds from the command's start, as its stderr lines arrived.", "",
           "| run | " + " | ".join(MARKS) + " | trial import_s | build_s | process_s |",
           "|---" * (len(MARKS) + 4) + "|"]
    cols = (*MARKS, "import_s", "build_s", "process_s")
    for i, r in enumerate(runs, 1):
        out.append(f"| {i} | " + " | ".join(f"{r.get(c, float('nan')):.2f}" for c in cols) + " |")
    out.append("| median | " + " | ".join(
        f"{statistics.median(r.get(c, float('nan')) for r in runs):.2f}" for c in cols) + " |")
    if imports:
        out += ["", "Import in a fresh process, seconds (two tries each; each with what it "
                "imports)", "", "| module | first | second |", "|---|---|---|"]
        out += [f"| {m} | {a:.2f} | {b:.2f} |" for m, (a, b) in imports.items()]
    if steps:
        out += ["", f"Between the parent's checks and the worker's first line, step by step "
                f"(each side in a fresh process, its modules imported first; {len(steps)} "
                "times), seconds", "", "| step | " + " | ".join(
                    str(i + 1) for i in range(len(steps))) + " | median |",
                "|---" * (len(steps) + 2) + "|"]
        for step in steps[0]:
            values = [s[step] for s in steps]
            out.append(f"| {step} | " + " | ".join(f"{v:.3f}" for v in values)
                       + f" | {statistics.median(values):.3f} |")
    out += ["", "The last run's stderr, stamped:", "", "```"]
    out += [f"{at:7.2f}  {text}" for at, text in runs[-1]["lines"]] + ["```", ""]
    med = statistics.median(r.get("first trial claimed", float("nan")) for r in runs)
    out.append(f"first trial claimed, median: {med:.2f} s")
    text = "\n".join(out)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
