"""When are two finalists "within noise"? The tuner's rule against a two-sample test.

    python benchmarks/noise_rule.py STUDY_OR_PARQUET...

For every pair of finalists at one batch size, over the p50s of their fresh processes
(``latency_ms_p50_repeats``), three readings:

* ``overlap``: the tuner's rule (:func:`tuner.data.noise.within_noise`): their 95 % intervals
  (t-intervals on the log p50s) overlap, so neither is called faster;
* ``welch``: a Welch t-test on the log p50s at 95 % (the interval of the difference of the
  means; Welch-Satterthwaite degrees of freedom, rounded down): it says one is faster;
* ``disjoint``: every process of one was faster than every process of the other.

It prints each pair and counts the pairs where the tuner's rule says "within noise" while the
Welch test says one is faster. It only reads the files.
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys

from tuner.data import files
from tuner.data.derive import listed
from tuner.data.noise import t975, within_noise


def welch_differs(a: list[float], b: list[float]) -> bool:
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    if va + vb == 0:
        return statistics.fmean(la) != statistics.fmean(lb)
    dof = (va + vb) ** 2 / (va ** 2 / (len(la) - 1) + vb ** 2 / (len(lb) - 1))
    return abs(statistics.fmean(la) - statistics.fmean(lb)) > t975(max(1, int(dof))) * math.sqrt(
        va + vb)


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
                overlap, welch = within_noise(a, b), welch_differs(pa_, pb)
                disjoint = max(pa_) < min(pb) or max(pb) < min(pa_)
                pairs += 1
                flipped += overlap and welch
                print(f"{name[:32]:<32} {bs:>3}  {a['label'][:40]:<40} {b['label'][:40]:<40} "
                      f"{len(pa_)},{len(pb):<3}  {overlap!s:<7} {welch!s:<5} {disjoint}")
    print(f"\n{pairs} pairs; within noise by the tuner's rule but one faster by Welch: {flipped}")


if __name__ == "__main__":
    main(sys.argv[1:])
