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
"""

from __future__ import annotations

import itertools
import sys

from tuner.data import files
from tuner.data.derive import listed
from tuner.data.noise import faster_beyond_noise, interval


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


if __name__ == "__main__":
    main(sys.argv[1:])
