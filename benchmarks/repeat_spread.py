"""The same config measured in several fresh processes: spread, interval, rank, warm starts.

    python benchmarks/repeat_spread.py studies/h200-resnet18

Reads a study whose finalists were measured again (`tuner search --confirm N` or
`tuner confirm`) and prints, per finalist: the p50 of every process, their median, their spread
((max - min) / median), the 95 % interval and rank within noise, and the first-call times
cold, warm (second process, same cache) and from saved artifacts. A ``!`` marks a search
trial whose own p50 lies outside its finalist's interval. Then the spread of the same config
across processes (the goal: 2 % or less on the GPU), and per batch size which trials leave or
join the Pareto front when it is chosen on the medians (as the tuner does) rather than on each
trial's own p50 (as Optuna was told), whether ordering the finalists by their search trial's p50
or by their median changes the order, and the best compiled config's speedup over eager each way.
Where the processes kept their p99 too: each one's p99, their median (what ``recommend
--max-p99-ms`` bounds), and the spread of the p99 across processes against that of the p50.

    python benchmarks/repeat_spread.py --markdown STUDY... > benchmarks/results/repeat_spread.md
"""

from __future__ import annotations

import datetime
import statistics
import sys

from tuner.data import files
from tuner.data.derive import listed
from tuner.data.noise import spread_pct
from tuner.data.select import LATENCY, eligible, pareto


def main(path: str) -> None:
    df, meta = files.read(path)
    print(f"{path}:")
    done = df[df["latency_ms_p50_repeats"].map(lambda v: listed(v) >= 2)]
    fps = ", ".join(fp.get("gpu_name") or fp.get("cpu") or "?" for fp in meta.get("fingerprints") or [])
    print(f"study {meta.get('study')}: {fps}; torch "
          f"{', '.join(sorted(set(df['fp_torch'].dropna())))}")
    if done.empty:
        print("no finalist was measured again: run `tuner confirm` on the study first")
        return
    print(f"{'batch':>5} {'trial':>5}  {'config':<36} {'p50 ms per process, own first':<42} {'median':>7} "
          f"{'spread':>7} {'95% interval ms':>19} {'rank':>4} {'cold s':>7} {'warm s':>7} "
          f"{'artifacts s':>11}")
    for _, r in done.sort_values(["batch_size", LATENCY]).iterrows():
        own, low, high = (r["latency_ms_p50"], r["latency_ms_p50_ci_low"],
                          r["latency_ms_p50_ci_high"])
        outside = "!" if low == low and high == high and not low <= own <= high else " "
        p50s = outside + " ".join(f"{v:.3f}" for v in r["latency_ms_p50_repeats"])
        print(f"{r['batch_size']:>5} {r['trial_number']:>5}  {r['label'][:36]:<36} {p50s:<42} {r[LATENCY]:>7.3f} "
              f"{_num(r['latency_spread_pct'], '{:.1f}%'):>7} "
              f"{_num(r['latency_ms_p50_ci_low'], '{:.3f}')}-{_num(r['latency_ms_p50_ci_high'], '{:.3f}'):<9} "
              f"{_num(r['rank_within_noise'], '{:.0f}'):>4} {_num(r['compile_s_cold'], '{:.1f}'):>7} "
              f"{_num(r['compile_s_warm'], '{:.1f}'):>7} {_num(r['compile_s_artifacts'], '{:.1f}'):>11}")
    spreads = done["latency_spread_pct"].dropna()
    print(f"\nspread of the same config across processes: median {statistics.median(spreads):.1f} %, "
          f"max {spreads.max():.1f} % over {len(spreads)} finalists")
    outside = sum(1 for _, r in done.iterrows()
                  if not r["latency_ms_p50_ci_low"] <= r["latency_ms_p50"]
                  <= r["latency_ms_p50_ci_high"])
    print(f"search trials whose own p50 lies outside their finalist's 95% interval: {outside} "
          f"of {len(done)}")
    _tails(done)
    told = pareto(df.assign(latency_ms_p50_repeats=None))  # each trial's own p50
    front = pareto(df)
    for bs, group in done.groupby("batch_size"):
        before = set(told[told["batch_size"] == bs]["trial_number"].astype(int))
        after = set(front[front["batch_size"] == bs]["trial_number"].astype(int))
        moved = "; ".join(
            f"trial{'s' if len(trials) > 1 else ''} {', '.join(map(str, sorted(trials)))} "
            f"{what if len(trials) > 1 else what + 's'} it"
            for trials, what in ((before - after, "leave"), (after - before, "join")) if trials)
        print(f"batch size {bs}: Pareto front on own p50s vs on medians: {moved or 'the same'}")
        by_own = [int(n) for n in group.sort_values("latency_ms_p50")["trial_number"]]
        by_median = [int(n) for n in group.sort_values(LATENCY)["trial_number"]]
        order = "same order" if by_own == by_median else (
            f"order changes, trials {', '.join(map(str, by_own))} by own p50, "
            f"{', '.join(map(str, by_median))} by median")
        print(f"batch size {bs}: {order}; {_speedups(df[df['batch_size'] == bs])}")


def _tails(done) -> None:
    """Each finalist's p99 per process (own first) and their median, where its processes kept
    one (re-measurements recorded before the p99 was kept have only the search trial's); then
    how far the p99 moves across processes against the p50."""
    kept = done[done["latency_ms_p99_repeats"].map(lambda v: listed(v) >= 2)]
    if kept.empty:
        print("no finalist's processes kept their p99 (re-measured before it was recorded)")
        return
    print(f"\n{'batch':>5} {'trial':>5}  {'config':<36} {'p99 ms per process, own first':<42} "
          f"{'median':>7} {'spread':>7} {'p99/p50':>7}")
    for _, r in kept.sort_values(["batch_size", LATENCY]).iterrows():
        p99s = " ".join(f"{v:.3f}" for v in r["latency_ms_p99_repeats"])
        print(f"{r['batch_size']:>5} {r['trial_number']:>5}  {r['label'][:36]:<36} {p99s:<42} "
              f"{r['latency_ms_p99_median']:>7.3f} "
              f"{_num(spread_pct(list(r['latency_ms_p99_repeats'])), '{:.1f}%'):>7} "
              f"{r['latency_ms_p99_median'] / r[LATENCY]:>7.2f}")
    tails = [spread_pct(list(v)) for v in kept["latency_ms_p99_repeats"]]
    p50s = kept["latency_spread_pct"].dropna()
    print(f"spread of the p99 across processes: median {statistics.median(tails):.1f} %, max "
          f"{max(tails):.1f} % over {len(tails)} finalists (of the p50, the same finalists: "
          f"median {statistics.median(p50s):.1f} %, max {p50s.max():.1f} %)")


def _speedups(rows) -> str:
    """The best compiled config's speedup over the fastest eager one, on each trial's own p50
    and on the medians (eligible rows of one batch size)."""
    ok = eligible(rows)
    eager, compiled = ok[ok["backend"] == "eager"], ok[ok["backend"] != "eager"]
    if eager.empty or compiled.empty:
        return "no eager and compiled pair"
    own = eager["latency_ms_p50"].min() / compiled["latency_ms_p50"].min()
    median = eager[LATENCY].min() / compiled[LATENCY].min()
    return (f"best compiled vs eager {own:.2f}x on own p50s "
            f"(trial {compiled.loc[compiled['latency_ms_p50'].idxmin(), 'trial_number']}), "
            f"{median:.2f}x on medians (trial {compiled.loc[compiled[LATENCY].idxmin(), 'trial_number']})")


def _num(value, fmt: str) -> str:
    try:
        return "-" if value is None or value != value else fmt.format(value)
    except (TypeError, ValueError):
        return "-"


if __name__ == "__main__":
    args = sys.argv[1:]
    markdown = "--markdown" in args
    paths = [a for a in args if a != "--markdown"] or ["studies/h200-resnet18"]
    if markdown:
        print("# Finalists measured again: each process's p50, and ordering by the median\n")
        print(f"Made {datetime.date.today()} by `python benchmarks/repeat_spread.py --markdown "
              f"{' '.join(paths)}` over those studies (their measurements; this only reads "
              "them).\n\n```")
    for n, path in enumerate(paths):
        if n:
            print()
        main(path)
    if markdown:
        print("```")
