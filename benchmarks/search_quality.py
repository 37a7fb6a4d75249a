"""Search quality: how soon the tuner's sampler finds a config within 2 % of a grid's best.

    python benchmarks/search_quality.py [LANDSCAPE ...] [--seeds 20] [--out FILE.md]

A landscape is a study's ``trials.parquet`` of an exhaustive grid (every config of its search
space measured once; benchmarks/results/search_quality.md says how to record one). Without
arguments, every ``*.parquet`` under ``benchmarks/landscapes/`` is read.

For each landscape and seed, the real search (:class:`tuner.study.search.Search`) runs over the
grid's own space, in a temporary studies folder, with :class:`replay.ReplayRunner` answering
each trial from the recording: twice, with the tuner's default sampler (whatever a new study
gets, ``StudySpec(sampler=None)``) and with random sampling as the control. Each search stops
once it has measured a config whose per-request latency (``latency_ms_p50`` of an ok trial that
matched eager) is within 2 % of the grid's best, at every batch size of the grid. Trials: the
trials run until then, the baselines the tuner queues first included. F: their recorded wall
times over the whole grid's (the GPU time a search spent, as a fraction of measuring the grid).

The report (``--out``, default ``benchmarks/results/search_quality.md``) has a table per landscape,
each ending with ``search quality on NAME: within 2 % of the grid's best after T trials (median
of 20 seeds) = F of the grid's GPU time; random: R trials``, and the report ends with the same
line without ``on NAME``: that of the worst landscape (the highest median F of the default
sampler).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replay import Landscape, LandscapeError, ReplayRunner  # noqa: E402
from tuner.data.select import eligible  # noqa: E402
from tuner.errors import UserError  # noqa: E402
from tuner.study.search import Search  # noqa: E402
from tuner.study.spec import StudySpec  # noqa: E402
from tuner.study.start_plan import StartFrom  # noqa: E402

HERE = Path(__file__).resolve().parent
LANDSCAPES = HERE / "landscapes"
REPORT = HERE / "results" / "search_quality.md"
TARGET = 0.02  # within 2 % of the grid's best per-request latency
SEEDS = 20
# The samplers compared, by StudySpec.sampler: None is whatever a new study gets by default.
DEFAULT, CONTROL = None, "random"


@dataclasses.dataclass(frozen=True)
class Reached:
    """When a search order first held a config within the target of the best."""

    trials: int  # trials run until then, that one included
    gpu_s: float  # their recorded wall seconds
    fraction: float  # of the whole grid's


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One search of one landscape with one sampler and seed."""

    sampler: str | None  # StudySpec.sampler (None: the default)
    seed: int
    reached: Reached
    seconds: float  # how long the replayed search took on this machine


def near_best(landscape: Landscape, target: float = TARGET) -> dict[int, frozenset[str]]:
    """Per batch size, the config keys whose per-request latency is within ``target`` of the
    grid's best there (ok trials that matched eager and ran compiled as asked)."""
    best = landscape.best_latency_ms()
    if not best:
        raise LandscapeError(f"{landscape.path}: no trial finished ok and matched eager, so the "
                             "grid has no best")
    ok = eligible(landscape.trials)
    latency = pd.to_numeric(ok["latency_ms_p50"])
    near: dict[int, frozenset[str]] = {}
    for bs, ms in best.items():
        rows = ok[(ok["batch_size"] == bs) & (latency <= ms * (1 + target))]
        near[bs] = frozenset(rows["config_key"])
    return near


def reached(landscape: Landscape, order: Sequence[str], target: float = TARGET) -> Reached:
    """The trials and GPU time ``order`` (config keys, as the search ran them) took until it had
    measured a config within ``target`` of the best at every batch size."""
    near = near_best(landscape, target)
    found: set[int] = set()
    spent = 0.0
    for count, key in enumerate(order, 1):
        spent += landscape.wall_s(key)
        found |= {bs for bs, keys in near.items() if key in keys}
        if len(found) == len(near):
            return Reached(count, spent, spent / landscape.total_wall_s)
    raise ValueError(f"the {len(order)} trials never came within {target * 100:g} % of the best at "
                     f"batch size(s) {sorted(set(near) - found)}")


def search_order(landscape: Landscape, sampler: str | None, seed: int, root: Path,
                 target: float = TARGET, start_from: StartFrom | None = None) -> list[str]:
    """Run the tuner's search over the grid, replayed, until it has measured a config within
    ``target`` of the best at every batch size; the config keys of its trials, in order.
    ``start_from``: what ``tuner search --start-from`` measures first (benchmarks/start_from.py)."""
    near = near_best(landscape, target)
    runner = ReplayRunner(landscape)
    spec = StudySpec(name="replay", workload=landscape.workload, space=landscape.space(),
                     root=root, seed=seed, sampler=sampler, start_from=start_from)

    def stop_once_reached(_event: object) -> None:
        if all(any(key in keys for key in runner.calls) for keys in near.values()):
            search.stop_after_trial.set()

    search = Search(spec, runner, on_trial=stop_once_reached)
    search.run()
    return list(runner.calls)


def measure(landscape: Landscape, seeds: Sequence[int],
            samplers: Sequence[str | None] = (DEFAULT, CONTROL),
            on_outcome: Callable[[Outcome], None] = lambda outcome: None) -> list[Outcome]:
    """Every sampler at every seed, each in a fresh temporary studies folder."""
    outcomes = []
    for seed in seeds:
        for sampler in samplers:
            with tempfile.TemporaryDirectory(prefix="search-quality-", dir=_fast_tmp()) as root:
                started = time.perf_counter()
                order = search_order(landscape, sampler, seed, Path(root))
                outcome = Outcome(sampler, seed, reached(landscape, order),
                                  time.perf_counter() - started)
            outcomes.append(outcome)
            on_outcome(outcome)
    return outcomes


def summary_line(outcomes: Sequence[Outcome], name: str | None = None) -> str:
    """The report's last line, for one landscape's outcomes; with its ``name``, the line that
    ends the landscape's own section (``search quality on NAME: ...``)."""
    default = [o for o in outcomes if o.sampler == DEFAULT]
    control = [o for o in outcomes if o.sampler == CONTROL]
    trials = statistics.median(o.reached.trials for o in default)
    fraction = statistics.median(o.reached.fraction for o in default)
    random_trials = statistics.median(o.reached.trials for o in control)
    on = f" on {name}" if name else ""
    return (f"search quality{on}: within {TARGET * 100:g} % of the grid's best after {_n(trials)} "
            f"trials (median of {len(default)} seeds) = {fraction:.2f} of the grid's GPU time; "
            f"random: {_n(random_trials)} trials")


def report(results: Sequence[tuple[Landscape, Sequence[Outcome]]], default_name: str) -> str:
    """The markdown report: how it was made, a table per landscape, the summary line of the
    worst landscape last."""
    seconds = [o.seconds for _, outcomes in results for o in outcomes]
    seeds = sum(len({o.seed for o in outcomes}) for _, outcomes in results)
    lines = [
        "# Search quality", "",
        f"Written by `python benchmarks/search_quality.py` on {datetime.date.today()} "
        f"({platform.node()}, {os.cpu_count()} cores). Each search is the tuner's own "
        "(`tuner.study.search.Search`) over the grid's search space, every trial answered from "
        "the recording (`benchmarks/replay.py`). It stops once it has measured a config whose "
        f"per-request latency (`latency_ms_p50`, status ok, matching eager) is within "
        f"{TARGET * 100:.0f} % of the grid's best at every batch size. Trials: those run until "
        "then, the baselines the tuner queues first included. F: their recorded wall time over "
        "the whole grid's. Default sampler: what a new study gets "
        f"(`{default_name}` when this was written); control: `random`, with the same seed. "
        "TPE proposes its first configs at random from a generator seeded alike, so a seed "
        "that reaches the target within them gives both samplers the same count (so do "
        "NSGA-II and NSGA-III, whose first generation is 50 random configs, and GP, whose first "
        "10 are random).", "",
        f"One seed ({len({o.sampler for _, r in results for o in r})} samplers) took "
        f"{sum(seconds) / seeds:.1f} s on average on this "
        f"machine; one search {min(seconds):.1f}-{max(seconds):.1f} s ({len(seconds)} "
        "searches).", ""]
    for landscape, outcomes in results:
        lines += _landscape_section(landscape, outcomes, default_name)
    worst = max(results, key=lambda r: statistics.median(
        o.reached.fraction for o in r[1] if o.sampler == DEFAULT))
    if len(results) > 1:
        lines += [f"The line below is for the worst of the {len(results)} landscapes (the "
                  f"highest median F of the default sampler): `{worst[0].name}`.", ""]
    lines.append(summary_line(worst[1]))
    return "\n".join(lines) + "\n"


def _landscape_section(landscape: Landscape, outcomes: Sequence[Outcome],
                       default_name: str) -> list[str]:
    fp = landscape.fingerprint()
    best = landscape.best_latency_ms()
    near = near_best(landscape)
    by = {(o.sampler, o.seed): o for o in outcomes}
    seeds = sorted({o.seed for o in outcomes})
    lines = [
        f"## {landscape.name}", "",
        f"- recorded on: {fp.get('gpu_name') or fp.get('cpu') or '?'}, torch {fp.get('torch')}, "
        f"{_recorded_on(landscape.path)}",
        f"- workload: {landscape.workload.model}, {landscape.workload.dtype}, "
        f"{len(landscape.trials)} configs, grid GPU time {landscape.total_wall_s:,.0f} s",
        f"- space: {_space_text(landscape)}",
        *(f"- best at batch size {bs}: {ms:.4g} ms ({len(near[bs])} config(s) within "
          f"{TARGET * 100:.0f} %)" for bs, ms in best.items()), "",
        f"| seed | {default_name}: trials | {default_name}: F | random: trials | random: F |",
        "|---:|---:|---:|---:|---:|"]
    for seed in seeds:
        d, r = by[(DEFAULT, seed)].reached, by[(CONTROL, seed)].reached
        lines.append(f"| {seed} | {d.trials} | {d.fraction:.3f} | {r.trials} | {r.fraction:.3f} |")
    med = {s: (statistics.median(by[(s, seed)].reached.trials for seed in seeds),
               statistics.median(by[(s, seed)].reached.fraction for seed in seeds))
           for s in (DEFAULT, CONTROL)}
    lines += [f"| median | {_n(med[DEFAULT][0])} | {med[DEFAULT][1]:.3f} | "
              f"{_n(med[CONTROL][0])} | {med[CONTROL][1]:.3f} |", "",
              summary_line(outcomes, landscape.name), ""]
    kinds = list(dict.fromkeys(o.sampler for o in outcomes))
    if len(kinds) > 2:  # --compare: every sampler over the same seeds
        lines += ["Samplers compared over the same seeds (F: GPU time until within "
                  f"{TARGET * 100:.0f} % of the best, as a fraction of the grid's):", "",
                  "| sampler | median trials | median F | mean F | worst F |",
                  "|---|---:|---:|---:|---:|"]
        for kind in kinds:
            mine = [by[(kind, seed)].reached for seed in seeds]
            fs = [r.fraction for r in mine]
            lines.append(f"| {kind or default_name + ' (default)'} | "
                         f"{_n(statistics.median(r.trials for r in mine))} | "
                         f"{statistics.median(fs):.3f} | {statistics.mean(fs):.3f} | "
                         f"{max(fs):.3f} |")
        lines.append("")
    return lines


def _space_text(landscape: Landscape) -> str:
    space = landscape.space().to_dict()
    return "; ".join(f"{name} {', '.join(map(str, values))}" if isinstance(values, list) else
                     f"{name}: " + "; ".join(f"{k} {', '.join(map(str, v))}"
                                             for k, v in values.items())
                     for name, values in space.items())


def _recorded_on(path: Path) -> str:
    """The landscape's date: the file holds none, so its commit date, else its own date."""
    try:
        committed = subprocess.run(["git", "log", "-1", "--format=%cs", "--", path.name],
                                   cwd=path.parent, capture_output=True, text=True,
                                   timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        committed = ""
    if committed:
        return f"committed {committed} (the file records no date)"
    written = datetime.date.fromtimestamp(path.stat().st_mtime)
    return f"file written {written} (the file records no date)"


def _n(value: float) -> str:
    return f"{value:g}"


def _fast_tmp() -> str | None:
    """Memory-backed temporary space where there is some: the study's SQLite file is written
    after every trial."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def _default_name() -> str:
    from tuner.study.sampler import DEFAULT_SAMPLER

    return DEFAULT_SAMPLER


def landscape_paths(given: Sequence[str]) -> list[Path]:
    if given:
        return [Path(p) for p in given]
    found = sorted(LANDSCAPES.glob("*.parquet"))
    if not found:
        raise UserError(f"no landscape under {LANDSCAPES}: record one "
                        "(benchmarks/results/search_quality.md) or give a trials.parquet")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Replay the tuner's search over recorded exhaustive grids: the trials and GPU\n"
                    "time until a config within 2 % of the grid's best is measured, the default\n"
                    "sampler against random. How to record a landscape:\n"
                    "benchmarks/results/search_quality.md.",
        epilog="example:\n  python benchmarks/search_quality.py "
               "benchmarks/landscapes/h200-resnet50-bf16-bs16.parquet")
    parser.add_argument("landscapes", nargs="*",
                        help="trials.parquet files of exhaustive grids (default: "
                             "benchmarks/landscapes/*.parquet)")
    parser.add_argument("--seeds", type=int, default=SEEDS,
                        help=f"seeds 0..N-1 for each sampler (default {SEEDS})")
    parser.add_argument("--compare", default="",
                        help="more samplers to run over the same seeds, e.g. nsga2,nsga3,gp "
                             "(a table per landscape; the last line stays default vs random)")
    parser.add_argument("--out", type=Path, default=REPORT,
                        help="the markdown report (default benchmarks/results/search_quality.md)")
    args = parser.parse_args(argv)
    try:
        if args.seeds < 1:
            raise UserError(f"--seeds {args.seeds}: give at least 1")
        landscapes = [Landscape.read(path) for path in landscape_paths(args.landscapes)]
        default_name = _default_name()
        from tuner.study.sampler import check_sampler

        extra = [check_sampler(k) for k in args.compare.split(",") if k]
        samplers = [DEFAULT, CONTROL, *(k for k in extra if k not in (default_name, CONTROL))]
        results = []
        for landscape in landscapes:
            def say(o: Outcome, name: str = landscape.name) -> None:
                print(f"{name}: {o.sampler or default_name} seed {o.seed}: "
                      f"{o.reached.trials} trials, F {o.reached.fraction:.3f} "
                      f"({o.seconds:.1f} s)", file=sys.stderr)
            results.append((landscape, measure(landscape, range(args.seeds), samplers,
                                               on_outcome=say)))
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    text = report(results, default_name)
    args.out.write_text(text)
    print(text.rstrip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
