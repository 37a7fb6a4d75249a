"""What ``tuner search --start-from`` buys on a second GPU: trials until within 2 % of the best.

    python benchmarks/start_from.py [WITH WITHOUT ...] [--out FILE.md]

A pair is two studies of the same command on the same GPU: one made with ``--start-from`` a study
of another GPU (its folder named ``...-from-<gpu>``, as ``scripts/gpu_study.sh`` names it) and
one made without. Without arguments, every ``studies/*-from-*`` folder is paired with the folder
of the same name without ``-from-<gpu>``.

For each study, its trials in the order they ran (``trial_number``; rows of configs skipped
without a trial are not trials), and per batch size the best per-request latency
(``latency_ms_p50`` of a trial that finished ok and matched eager, :func:`tuner.data.select.eligible`).
Counted: the trials until, at every batch size, one of them was within 2 % of the best, the
baselines the tuner queues first included, and their wall time (``wall_s``). Two bests: the
study's own (what the issue asks: how soon a search settles), and the best either study of the
pair measured on that GPU (a study that never found it says "not reached").

Replayed on the knob landscapes (``benchmarks/landscapes/*.parquet``, issue 53): where the
same grid was recorded on two GPUs (names that differ only in their last part, the GPU), the
search over one GPU's grid is replayed (:func:`benchmarks.search_quality.search_order`, the
tuner's default sampler, ``--seeds`` seeds) with ``--start-from`` the other GPU's grid and
without, each direction counted as one landscape: the median over the seeds of the trials until
a config within 2 % of that grid's best, at every batch size.

The report (``--out``, default ``benchmarks/results/start-from.md``) has one row per study and
per replayed landscape, and ends with a line of exactly this form (the medians over the
pairs and replayed landscapes, own bests):
``start-from: within 2 % of the best after A trials with --start-from, B without (median over
landscapes)``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import re
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.replay import Landscape  # noqa: E402
from benchmarks.search_quality import reached as landscape_reached  # noqa: E402
from benchmarks.search_quality import search_order  # noqa: E402
from tuner.data.select import eligible, not_run  # noqa: E402
from tuner.study.start_from import read_start_from  # noqa: E402
from tuner.study.start_plan import StartFrom  # noqa: E402
from tuner.study.storage.attrs import STARTED_FROM_ATTR  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "studies"
REPORT = REPO / "benchmarks" / "results" / "start-from.md"
LANDSCAPES = REPO / "benchmarks" / "landscapes"
SEEDS = 20
TARGET = 0.02
FROM = re.compile(r"-from-[a-z0-9]+$")


@dataclasses.dataclass(frozen=True)
class Reached:
    """When a study first held, at every batch size, a trial within the target of a best."""

    trials: int | None  # trials until then, that one included; None: never
    wall_s: float | None  # their wall seconds


@dataclasses.dataclass(frozen=True)
class StudyRun:
    """One study of a pair, as this benchmark reads it."""

    path: Path
    trials: int  # trials run (skipped configs left out)
    started_from: int  # of them, configs taken from the other study
    best_ms: Mapping[int, float]  # its own best p50 per batch size
    own: Reached  # within the target of its own best
    known: Reached  # within the target of the pair's best
    queued: int = 0  # configs of the other study still waiting in its queue (study.db)

    @property
    def complete(self) -> bool:
        """Whether every config taken from the other study was measured (or skipped): until
        then its counts say nothing of what --start-from buys."""
        return self.queued == 0


def trials_in_order(path: Path) -> pd.DataFrame:
    """A study's trials, in the order they ran, skipped configs left out."""
    df = pd.read_parquet(path / "trials.parquet")
    return df[~not_run(df)].sort_values("trial_number").reset_index(drop=True)


def best_ms(trials: pd.DataFrame) -> dict[int, float]:
    """Per batch size, the lowest p50 of the eligible trials."""
    ok = eligible(trials)
    latency = pd.to_numeric(ok["latency_ms_p50"])
    return {int(bs): float(ms) for bs, ms in latency.groupby(ok["batch_size"]).min().items()}


def reached(trials: pd.DataFrame, best: Mapping[int, float], target: float = TARGET) -> Reached:
    """The trials (and their wall time) until every batch size of ``best`` had an eligible
    trial within ``target`` of it."""
    ok_index = set(eligible(trials).index)
    found: set[int] = set()
    wall = 0.0
    for count, (index, row) in enumerate(trials.iterrows(), 1):
        wall += float(row["wall_s"]) if pd.notna(row["wall_s"]) else 0.0
        bs = int(row["batch_size"])
        if index in ok_index and bs in best and float(row["latency_ms_p50"]) <= best[bs] * (1 + target):
            found.add(bs)
        if found >= set(best):
            return Reached(count, wall)
    return Reached(None, None)


def still_queued(path: Path) -> int:
    """The configs taken from another study (``--start-from``) that wait unmeasured in the
    study's queue: a search stopped by its budget before it reached them. 0 without a study.db
    (the Parquet files hold only what ran)."""
    db = path / "study.db"
    if not db.is_file():
        return 0
    import optuna  # only here: the rest of the benchmark reads Parquet

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{db}"
    waiting = optuna.trial.TrialState.WAITING
    return sum(STARTED_FROM_ATTR in t.user_attrs
               for name in optuna.get_all_study_names(url)
               for t in optuna.load_study(study_name=name, storage=url).get_trials(
                   deepcopy=False, states=(waiting,)))


def counterpart(path: Path) -> Path:
    """The study made without ``--start-from``: the name without ``-from-<gpu>``."""
    return path.with_name(FROM.sub("", path.name))


def measure_pair(with_path: Path, without_path: Path) -> tuple[StudyRun, StudyRun]:
    frames = {p: trials_in_order(p) for p in (with_path, without_path)}
    bests = {p: best_ms(df) for p, df in frames.items()}
    sizes = set(bests[with_path]) & set(bests[without_path])
    if not sizes:
        raise SystemExit(f"{with_path} and {without_path} share no batch size with a best")
    known = {bs: min(b[bs] for b in bests.values()) for bs in sizes}

    def run(path: Path) -> StudyRun:
        df, own = frames[path], {bs: bests[path][bs] for bs in sizes}
        taken = df["started_from"].notna() if "started_from" in df else pd.Series(False, df.index)
        return StudyRun(path, len(df), int(taken.sum()), own, reached(df, own),
                        reached(df, known), still_queued(path))

    return run(with_path), run(without_path)


@dataclasses.dataclass(frozen=True)
class Replay:
    """One GPU's grid searched again (replayed), with ``--start-from`` the same grid of another
    GPU and without: the median over the seeds of the trials until within the target of the
    grid's best at every batch size."""

    target: str  # the landscape searched
    source: str  # the one started from
    with_trials: float
    without_trials: float
    seeds: int
    taken: int  # configs --start-from put first (the baselines left out)


def landscape_pairs(root: Path = LANDSCAPES) -> list[tuple[Path, Path]]:
    """(searched, started from): the landscapes of one design on two GPUs, both ways."""
    by_design: dict[str, list[Path]] = {}
    for path in sorted(root.glob("*.parquet")):
        by_design.setdefault(path.stem.rpartition("-")[0], []).append(path)
    return [(a, b) for paths in by_design.values() for a in paths for b in paths if a != b]


def replay(target: Path, source: Path, seeds: Sequence[int]) -> Replay:
    grid = Landscape.read(target)
    # what `tuner search --start-from SOURCE` would measure first here ("replay": a study that
    # is not SOURCE)
    plan = read_start_from([str(source)], source.parent, "replay", grid.workload, grid.space())
    counts: dict[StartFrom | None, list[int]] = {plan: [], None: []}
    for seed in seeds:
        for start, trials in counts.items():
            with tempfile.TemporaryDirectory(prefix="start-from-") as root:
                order = search_order(grid, None, seed, Path(root), start_from=start)
            trials.append(landscape_reached(grid, order).trials)
    return Replay(grid.name, source.stem, statistics.median(counts[plan]),
                  statistics.median(counts[None]), len(seeds), len(plan.configs))


def summary_line(pairs: Sequence[tuple[StudyRun, StudyRun]],
                 replays: Sequence[Replay] = ()) -> str:
    """The issue's line, over the pairs whose --start-from study measured what it took and the
    replayed landscapes."""
    done = [pair for pair in pairs if pair[0].complete]
    if not done and not replays:
        return (f"start-from: no pair yet: {len(pairs)} --start-from "
                f"{'study has' if len(pairs) == 1 else 'studies have'} configs of the other "
                "study still queued (run the same command again: it resumes)")
    with_ = [w.own.trials for w, _ in done if w.own.trials is not None]
    without = [o.own.trials for _, o in done if o.own.trials is not None]
    with_ += [r.with_trials for r in replays]
    without += [r.without_trials for r in replays]
    return (f"start-from: within {TARGET * 100:g} % of the best after "
            f"{statistics.median(with_):g} trials with --start-from, "
            f"{statistics.median(without):g} without (median over landscapes)")


def report(pairs: Sequence[tuple[StudyRun, StudyRun]], command: str,
           replays: Sequence[Replay] = ()) -> str:
    lines = [
        "# --start-from on a second GPU", "",
        f"Written by `{command}` on {datetime.date.today()}, from the committed studies named "
        "below (their GPU, torch and date are in each study's `fp_*` columns and in `tuner show`). "
        "Each pair is the same command on the same GPU, with and without `--start-from` the study "
        "of the other GPU (`scripts/gpu_study.sh`, `START_FROM`). Trials: in the order they ran, "
        "the baselines included, skipped configs not counted, until every batch size had a trial "
        f"whose p50 was within {TARGET * 100:g} % of the best (own: the study's own best; pair: the "
        "best either study measured there). Wall: those trials' `wall_s`. A pair counts once its "
        "`--start-from` study has measured every config it took from the other study (none still "
        "queued); until then its row says how many wait.", "",
        "| study | GPU | torch | trials | started from | batch sizes: own best p50 ms | own: trials (wall s) | pair: trials (wall s) |",
        "|---|---|---|---|---|---|---|---|"]
    for pair in pairs:
        for run in pair:
            lines.append(_row(run))
    lines += ["", "## Replayed on the knob landscapes", ""]
    if not replays:
        lines.append("None yet: no grid of `benchmarks/landscapes/` was recorded on two GPUs.")
    else:
        lines += [f"Each grid searched again from its recording (the tuner's default sampler, "
                  f"median over {replays[0].seeds} seeds), with `--start-from` the same grid "
                  "of the other GPU and without; trials until a config within "
                  f"{TARGET * 100:g} % of that grid's best at every batch size.", "",
                  "| landscape searched | started from | configs put first | trials with | "
                  "trials without |", "|---|---|---:|---:|---:|"]
        lines += [f"| `{r.target}` | `{r.source}` | {r.taken} | {r.with_trials:g} | "
                  f"{r.without_trials:g} |" for r in replays]
    lines += ["", summary_line(pairs, replays)]
    return "\n".join(lines) + "\n"


def _row(run: StudyRun) -> str:
    df = pd.read_parquet(run.path / "trials.parquet", columns=["fp_gpu_name", "fp_torch"])
    gpu, torch = df["fp_gpu_name"].dropna().iloc[0], df["fp_torch"].dropna().iloc[0]
    best = ", ".join(f"{bs}: {ms:.3f}" for bs, ms in sorted(run.best_ms.items()))

    def cell(r: Reached) -> str:
        return "not reached" if r.trials is None else f"{r.trials} ({r.wall_s:.0f})"

    name = run.path.relative_to(REPO) if run.path.is_relative_to(REPO) else run.path
    taken = f"{run.started_from}" + (f", {run.queued} still queued" if run.queued else "")
    return (f"| `{name}` | {gpu} | {torch} | {run.trials} | {taken} | {best} | "
            f"{cell(run.own)} | {cell(run.known)} |")


def discover(root: Path = STUDIES) -> list[tuple[Path, Path]]:
    pairs = []
    for path in sorted(root.glob("*-from-*")):
        if (path / "trials.parquet").is_file() and (counterpart(path) / "trials.parquet").is_file():
            pairs.append((path, counterpart(path)))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("studies", nargs="*", type=Path, help="WITH WITHOUT, pair by pair")
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--landscapes", type=Path, default=LANDSCAPES,
                        help="the grids replayed where two GPUs have one")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--studies-dir", type=Path, default=STUDIES,
                        help="where the pairs are found when none are given")
    args = parser.parse_args(argv)
    if len(args.studies) % 2:
        parser.error("give the studies in pairs: WITH WITHOUT")
    given = [(args.studies[i].resolve(), args.studies[i + 1].resolve())
             for i in range(0, len(args.studies), 2)]
    paths = given or discover(args.studies_dir)
    grids = landscape_pairs(args.landscapes)
    if not paths and not grids:
        parser.error(f"no *-from-* folder with its counterpart under {args.studies_dir}, and no "
                     f"grid recorded on two GPUs under {args.landscapes}")
    pairs = [measure_pair(w, o) for w, o in paths]
    replays = [replay(target, source, range(args.seeds)) for target, source in grids]
    command = "python benchmarks/start_from.py" + "".join(
        f" {p}" for p in (argv if argv is not None else sys.argv[1:]))
    args.out.write_text(report(pairs, command, replays))
    print(summary_line(pairs, replays))
    return 0


if __name__ == "__main__":
    sys.exit(main())
