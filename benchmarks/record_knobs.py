"""Record the knob studies of benchmarks/knob_catalogue.py on the GPU, within one call's time.

    python3 benchmarks/record_knobs.py --model resnet50 --batch-sizes 1,16 --design screen \\
        --limit-min 8.5 --out $OUT/knobs.tgz

Run by ``scripts/gpu_landscape.sh`` (its environment variables are these options).
``--design plan`` takes the units of the recording plan (benchmarks/knob_plan.py, the
"Recording" table of benchmarks/results/knobs.md) in their order, named after the GPU this call
got, and goes on to the next unit once one is whole, so that a call's minutes are all spent. It makes the
design's studies (a grid: one landscape; a screen: one small study per candidate; a sweep: one
study of every cheap candidate, one knob at a time), checked against the installed torch, and
runs ``tuner search`` on each that is not whole yet (a sweep: benchmarks/sweep_search.py, which
builds the same search and queues the sweep's configs; it is whole once its bases have their
noise floor too, :func:`whole`), one after another, until
``--limit-min`` minutes are nearly spent: a trial is never started that could run past them.
Studies carried in the repository (``benchmarks/landscapes/NAME``,
``benchmarks/screens/NAME/ARM``, ``benchmarks/sweeps/NAME``, as an earlier call's archive left
them) are resumed.

The archive ``--out`` holds only what the repository keeps, at its paths in the repository:
each study's ``study.db`` and Parquet files, ``design.json`` (torch's settings on this machine,
what was left out), and, once a grid is whole, ``benchmarks/landscapes/NAME.parquet`` for
search_quality.py. Unpack it at the repository root: ``tar -xzf knobs.tgz``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import knob_catalogue as catalogue  # noqa: E402
from benchmarks import knob_plan, knob_sweep  # noqa: E402
from benchmarks.knob_catalogue import StudyPlan, TorchSettings  # noqa: E402
from tuner.cli.options import parse_duration  # noqa: E402
from tuner.data.derive import listed  # noqa: E402
from tuner.data.select import eligible  # noqa: E402
from tuner.errors import UserError  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MIN_SECONDS = 1.0  # steady-state seconds per trial, as the alexnet landscape was measured
CHEAP_TRIAL_S = 90.0  # the longest a cheap trial took on the H100 (coordinate descent: 51 s)
COMPILE_TIMEOUT = "4m"  # a slow arm's compile budget: stored with its study, so fixed
CHEAP_COMPILE_TIMEOUT = "5m"  # the tuner's default
KEEP = ("study.db", "trials.parquet", "pareto.parquet")

# What a search runs: Python's arguments, the tuner's command line (``-m tuner search ...``) or
# a sweep's (``.../sweep_search.py --queue FILE search ...``).
TUNER = ("-m", "tuner")
SWEEP_SEARCH = str(Path(__file__).resolve().with_name("sweep_search.py"))
# A search: those arguments and the seconds it may take; its exit code.
Search = Callable[[Sequence[str], float], int]


def tuner_process(args: Sequence[str], timeout_s: float, log: Path | None = None) -> int:
    """``python ARGS`` in a process, its output appended to ``log`` (default: this
    process's); past ``timeout_s`` it is told to stop after the current trial (SIGINT, as
    Ctrl-C), and killed a minute later."""
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(log.open("a")) if log is not None else None
        process = subprocess.Popen([sys.executable, *args], stdout=output,
                                   stderr=subprocess.STDOUT if output else None)
        return _wait(process, timeout_s)


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    try:
        return process.wait(timeout=max(timeout_s, 1.0))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            return process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


def measured(root: Path, plan: StudyPlan) -> int:
    """How many of the plan's configs the study under ``root`` holds a row for."""
    file = root / plan.path / "trials.parquet"
    if not file.is_file():
        return 0
    keys = set(pd.read_parquet(file, columns=["config_key"])["config_key"])
    return len(plan.keys() & keys)


def whole(root: Path, plan: StudyPlan) -> bool:
    """Whether the study under ``root`` is done: a row for each of the plan's configs, and for
    a sweep each base that finished ok measured in :data:`knob_sweep.NOISE_PROCESSES`
    processes (its noise floor)."""
    if measured(root, plan) < len(plan.keys()):
        return False
    if not plan.queue:
        return True
    df = pd.read_parquet(root / plan.path / "trials.parquet")
    bases = eligible(df)
    bases = bases[bases["config_key"].isin(knob_sweep.base_keys(plan.space))]
    return bool(bases["latency_ms_p50_repeats"].map(listed).ge(
        knob_sweep.NOISE_PROCESSES).all())


def carry(repo: Path, work: Path, plans: Sequence[StudyPlan]) -> None:
    """Copy each study the repository holds (its kept files only) into the work folder, over
    what an earlier call left there: the repository's copy is the one to resume."""
    for plan in plans:
        source, target = repo / plan.path, work / plan.path
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in KEEP:
            if (source / name).is_file():
                shutil.copy2(source / name, target / name)


def search_args(plan: StudyPlan, space_file: Path, model: str, dtype: str, root: Path,
                budget_s: float) -> list[str]:
    """The ``tuner search`` command line of one study (without ``tuner``)."""
    compile_timeout = COMPILE_TIMEOUT if plan.slow else CHEAP_COMPILE_TIMEOUT
    return ["search", "--model", model, "--dtype", dtype, "--device", "cuda",
            "--space", str(space_file), "--name", plan.name, "--studies-dir",
            str(root / plan.folder), "--confirm", "0", "--min-seconds", f"{MIN_SECONDS:g}",
            "--compile-timeout", compile_timeout, "--budget", f"{max(budget_s, 1.0):.0f}s"]


def process_args(plan: StudyPlan, spaces: Path, tuner_args: list[str]) -> list[str]:
    """Python's arguments that run the study's search: ``tuner search``, or for a sweep
    benchmarks/sweep_search.py with its queue (written beside the space file)."""
    if not plan.queue:
        return [*TUNER, *tuner_args]
    queue = spaces / f"{plan.name}.queue.json"
    queue.write_text(json.dumps(knob_sweep.start_from(plan).to_dict(), indent=1) + "\n")
    return [SWEEP_SEARCH, "--queue", str(queue), *tuner_args]


def worst_trial_s(plan: StudyPlan) -> float:
    """The longest one trial of the plan may run: a slow arm's compile budget and its
    measurement, or the slowest cheap trial seen."""
    return parse_duration(COMPILE_TIMEOUT) + CHEAP_TRIAL_S if plan.slow else CHEAP_TRIAL_S


def run_plans(plans: Sequence[StudyPlan], work: Path, model: str, dtype: str,
              deadline: float, search: Search, say: Callable[[str], None],
              clock: Callable[[], float] = time.monotonic) -> None:
    """Search each plan that is not whole, in order, while its worst trial fits before the
    deadline; stop at the first that does not (the next call starts there)."""
    spaces = work / "spaces"
    spaces.mkdir(parents=True, exist_ok=True)
    for plan in plans:
        total = len(plan.keys())
        if whole(work, plan):
            continue
        left = deadline - clock()
        if left < worst_trial_s(plan):
            say(f"stopped before {plan.path}: {left / 60:.1f} min left, and one of its trials "
                f"may take {worst_trial_s(plan) / 60:.1f}")
            return
        space_file = spaces / f"{plan.name}.toml"
        space_file.write_text(plan.toml())
        before = measured(work, plan)
        code = search(process_args(plan, spaces, search_args(
            plan, space_file, model, dtype, work, left - worst_trial_s(plan))), left)
        say(f"{plan.path}: {measured(work, plan)} of {total} configs measured "
            f"({measured(work, plan) - before} now; tuner search exit {code})")


def archive(work: Path, designs: Sequence[tuple[Sequence[StudyPlan], str]], out: Path
            ) -> list[str]:
    """Write the archive of the kept files (see the module's docstring) of each design (its
    plans and its folder); their paths."""
    kept = [f"{folder}/{catalogue.DESIGN_FILE}" for _, folder in designs]
    for plan in (plan for plans, _ in designs for plan in plans):
        kept += [f"{plan.path}/{name}" for name in KEEP if (work / plan.path / name).is_file()]
        whole = measured(work, plan) >= len(plan.keys())
        if plan.folder == catalogue.LANDSCAPES and whole:
            shutil.copy2(work / plan.path / "trials.parquet", work / f"{plan.path}.parquet")
            kept.append(f"{plan.path}.parquet")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        for path in kept:
            tar.add(work / path, arcname=path)
    return kept


def design(args: argparse.Namespace, settings: TorchSettings, gpu: str
           ) -> tuple[list[StudyPlan], list[str], str]:
    """The plans, the lines of what was left out, and the folder of the design file."""
    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    if not sizes:
        raise UserError(f"--batch-sizes {args.batch_sizes!r}: give e.g. 1,16")
    name = args.name or catalogue.default_name(args.model, sizes, gpu)
    if args.design == "grid":
        knobs = [k for k in (args.knobs or "").split(",") if k.strip()] or None
        plans, said = catalogue.grid(args.model, sizes, name, settings, knobs)
        return plans, said, f"{catalogue.LANDSCAPES}/{name}"
    if args.design == "sweep":
        plans, said = knob_sweep.sweep(args.model, sizes, name, settings)
        return plans, said, f"{knob_sweep.SWEEPS}/{name}"
    plans, said = catalogue.screen(args.model, sizes, name, settings, args.arms)
    return plans, said, f"{catalogue.SCREENS}/{name}"


def write_design(work: Path, design_dir: str, args: argparse.Namespace,
                 settings: TorchSettings, plans: Sequence[StudyPlan], said: Sequence[str]) -> None:
    names = {o for c in catalogue.CATALOGUE for o in c.options}
    data = {"design": args.design, "model": args.model, "dtype": args.dtype,
            "settings": settings.to_dict(names), "left_out": list(said),
            "studies": {plan.name: plan.candidate for plan in plans}}
    if any(plan.queue for plan in plans):  # a sweep: what it measures, of its union's configs
        data["planned"] = {plan.name: [c.key for c in plan.configs()] for plan in plans}
    (work / design_dir).mkdir(parents=True, exist_ok=True)
    (work / design_dir / catalogue.DESIGN_FILE).write_text(json.dumps(data, indent=1) + "\n")


def main(argv: Sequence[str] | None = None, search: Search | None = None,
         settings: TorchSettings | None = None, gpu: str | None = None,
         units: Sequence[knob_plan.Unit] = knob_plan.PLAN) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-sizes", default="16")
    parser.add_argument("--design", choices=("grid", "screen", "sweep", "plan"),
                        default="screen", help="plan: the recording plan's units in order "
                        "(benchmarks/knob_plan.py); --model, --batch-sizes, --name, --knobs "
                        "and --arms are then the units'")
    parser.add_argument("--name", default="", help="default MODEL-bf16-bsB1-B2-GPU")
    parser.add_argument("--knobs", default="", help="grid: candidate names (default: the "
                        "model kind's five, knob_catalogue.GRID_KNOBS)")
    parser.add_argument("--arms", default="cheap", help="screen: cheap, slow, all or names")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--limit-min", type=float, default=8.5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/knobs-work"))
    parser.add_argument("--repo", type=Path, default=REPO, help="where carried studies are")
    parser.add_argument("--out", type=Path, default=Path("knobs.tgz"))
    parser.add_argument("--log", type=Path, help="the searches' output (default: stdout)")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.limit_min * 60 - 20  # the archive's seconds
    if args.design == "plan":
        calls = [argparse.Namespace(**{**vars(args), "design": u.design, "model": u.model,
                                       "batch_sizes": ",".join(map(str, u.batch_sizes)),
                                       "arms": u.arms, "name": "", "knobs": ""})
                 for u in units]
    else:
        calls = [args]
    search = search or functools.partial(tuner_process, log=args.log)
    designs: list[tuple[list[StudyPlan], str]] = []
    try:
        settings, gpu = settings or TorchSettings.installed(), gpu or _gpu()
        planned = [design(one, settings, gpu) for one in calls]
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    for one, (plans, said, design_dir) in zip(calls, planned, strict=True):
        carry(args.repo, args.work, plans)
        if len(calls) > 1 and all(whole(args.work, p) for p in plans):
            continue  # a unit an earlier call finished: the plan's next
        for line in said:
            print(line)
        write_design(args.work, design_dir, one, settings, plans, said)
        run_plans(plans, args.work, one.model, args.dtype, deadline, search,
                  lambda text: print(text, flush=True))
        designs.append((plans, design_dir))
        if not _report(args.work, plans, design_dir):
            break  # the next call goes on from here
    if not designs:
        print("every unit of the plan is whole")
    archive(args.work, designs, args.out)
    return 0


def _report(work: Path, plans: Sequence[StudyPlan], design_dir: str) -> bool:
    """Print how far the design is; whether it is whole."""
    left = [f"{p.name} {measured(work, p)}/{len(p.keys())}"
            + ("" if measured(work, p) < len(p.keys()) else ", its bases' noise floor")
            for p in plans if not whole(work, p)]
    print(f"{design_dir}: " + ("every config measured" if not left else
                               "not whole yet, run the same command again: " + ", ".join(left)),
          flush=True)
    return not left


def _gpu() -> str:
    import torch

    return catalogue.gpu_short(torch.cuda.get_device_name() if torch.cuda.is_available() else None)


if __name__ == "__main__":
    sys.exit(main())
