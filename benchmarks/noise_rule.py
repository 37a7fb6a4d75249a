"""When are two finalists "within noise"? Overlapping intervals against a two-sample test.

    python benchmarks/noise_rule.py STUDY_OR_PARQUET...

For every pair of finalists at one batch size, over the p50s of their fresh processes
(``latency_ms_p50_repeats``), three readings:

* ``overlap``: the tuner's rule until 2026-12-02: their 95 % intervals (t-intervals on the log
  p50s, :func:`tuner.data.noise.interval`) overlap, so neither is called faster;
* ``welch``: a Welch t-test on the log p50s at 95 % (:func:`tuner.data.noise.faster_beyond_noise`,
  the rule since): it says one is faster;
* ``disjoint``: every process of one was faster than every process of the other.

It prints each pair and counts the pairs where the intervals overlap while the Welch test says
one is faster. It only reads the files.

    python benchmarks/noise_rule.py --simulate

How often the rule since 2026-12-07 (:func:`tuner.data.noise.verdict`: Welch's test, or every
process faster by more than twice the larger spread) calls A faster than B where both have the
same typical p50: log p50s drawn from normal distributions of equal mean, with two or three
processes a config, equal spreads or A steady (spread 0) against a noisy B. The Welch test
alone would be 2.5 %.
"""

from __future__ import annotations

import itertools
import math
import random
import sys

from tuner.data import files
from tuner.data.derive import listed
from tuner.data.noise import FASTER, faster_beyond_noise, interval, verdict


def intervals_overlap(a: list[float], b: list[float]) -> bool:
    (a_low, a_high), (b_low, b_high) = interval(a), interval(b)  # type: ignore[misc]
    return a_low <= b_high and b_low <= a_high


def main(paths: list[str]) -> None:
    pairs = flipped = 0
    print(f"{'study':<32} {'bs':>3}  {'config A':<40} {'config B':<40} {'n':>5}  "
          f"{'overlap':<7} {'welch':<5} disjoint")
    for path in paths:
        df, meta = files.read(path)
        name = str(meta.get("study") or path)
        done = df[df["latency_ms_p50_repeats"].map(lambda v: listed(v) >= 2)]
        for bs, group in done.groupby("batch_size"):
            for (_, a), (_, b) in itertools.combinations(group.iterrows(), 2):
                pa_, pb = list(a["latency_ms_p50_repeats"]), list(b["latency_ms_p50_repeats"])
                overlap = intervals_overlap(pa_, pb)
                welch = faster_beyond_noise(pa_, pb) or faster_beyond_noise(pb, pa_)
                disjoint = max(pa_) < min(pb) or max(pb) < min(pa_)
                pairs += 1
                flipped += overlap and welch
                print(f"{name[:32]:<32} {bs:>3}  {a['label'][:40]:<40} {b['label'][:40]:<40} "
                      f"{len(pa_)},{len(pb):<3}  {overlap!s:<7} {welch!s:<5} {disjoint}")
    print(f"\n{pairs} pairs; intervals overlap but one is faster by Welch: {flipped}")


def false_faster(n_a: int, n_b: int, sd_a: float, sd_b: float, draws: int,
                 seed: int = 0) -> float:
    """The share of ``draws`` in which :func:`verdict` calls A faster than B, both of the same
    typical p50 (log p50s normal, mean 0, standard deviations ``sd_a`` and ``sd_b``)."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(draws):
        a = [math.exp(rng.gauss(0, sd_a)) for _ in range(n_a)]
        b = [math.exp(rng.gauss(0, sd_b)) for _ in range(n_b)]
        hits += verdict(a, b).outcome == FASTER
    return hits / draws


def simulate(draws: int = 100_000) -> None:
    print(f"{'processes':<10} {'spreads':<22} A called faster ({draws:,} draws)")
    for n in (2, 3):
        for sd_a, what in ((0.1, "equal"), (0.0, "A steady, B noisy")):
            print(f"{n} and {n:<4} {what:<22} {false_faster(n, n, sd_a, 0.1, draws):.2%}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--simulate"]:
        simulate()
    else:
        main(sys.argv[1:])
