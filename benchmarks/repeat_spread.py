"""The same config measured in several fresh processes: spread, interval, rank, warm starts.

    python benchmarks/repeat_spread.py studies/h200-resnet18

Reads a study whose finalists were measured again (`tuner search --confirm N` or
`tuner confirm`) and prints, per finalist: the p50 of every process, their spread
((max - min) / median), the 95 % interval and rank within noise, and the first-call times
cold, warm (second process, same cache) and from saved artifacts. The last line is the spread
of the same config across processes (the goal: 2 % or less on the GPU).
"""

from __future__ import annotations

import statistics
import sys

from tuner.data import files


def main(path: str) -> None:
    df, meta = files.read(path)
    done = df[df["latency_ms_p50_repeats"].map(lambda v: v is not None and len(v) >= 2)]
    fps = ", ".join(fp.get("gpu_name") or fp.get("cpu") or "?" for fp in meta.get("fingerprints") or [])
    print(f"study {meta.get('study')}: {fps}; torch "
          f"{', '.join(sorted(set(df['fp_torch'].dropna())))}")
    if done.empty:
        sys.exit("no finalist was measured again: run `tuner confirm` on the study first")
    print(f"{'batch':>5}  {'config':<36} {'p50 ms per process':<34} {'spread':>7} "
          f"{'95% interval ms':>19} {'rank':>4} {'cold s':>7} {'warm s':>7} {'artifacts s':>11}")
    for _, r in done.sort_values(["batch_size", "latency_ms_p50"]).iterrows():
        p50s = " ".join(f"{v:.3f}" for v in r["latency_ms_p50_repeats"])
        print(f"{r['batch_size']:>5}  {r['label']:<36} {p50s:<34} "
              f"{_num(r['latency_spread_pct'], '{:.1f}%'):>7} "
              f"{_num(r['latency_ms_p50_ci_low'], '{:.3f}')}-{_num(r['latency_ms_p50_ci_high'], '{:.3f}'):<9} "
              f"{_num(r['rank_within_noise'], '{:.0f}'):>4} {_num(r['compile_s_cold'], '{:.1f}'):>7} "
              f"{_num(r['compile_s_warm'], '{:.1f}'):>7} {_num(r['compile_s_artifacts'], '{:.1f}'):>11}")
    spreads = done["latency_spread_pct"].dropna()
    print(f"\nspread of the same config across processes: median {statistics.median(spreads):.1f} %, "
          f"max {spreads.max():.1f} % over {len(spreads)} finalists")


def _num(value, fmt: str) -> str:
    try:
        return "-" if value is None or value != value else fmt.format(value)
    except (TypeError, ValueError):
        return "-"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "studies/h200-resnet18")
