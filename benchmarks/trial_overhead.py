"""Where a trial's wall time goes, from a study's own Parquet file.

    python benchmarks/trial_overhead.py studies/h200-resnet18

wall_s is what the search process waited for the trial; the worker records its import, build,
cold compile, warm-up and steady-state measuring times. What is left is the tuner's own
overhead per trial (process start, fingerprint, eager reference, correctness, writing the record).
"""

from __future__ import annotations

import sys

from tuner import results


def main(path: str) -> None:
    df, meta = results.read(path)
    ok = df[df["status"] == "ok"].copy()
    ok["other_s"] = ok["wall_s"] - ok[["import_s", "build_s", "compile_s_cold", "warmup_s",
                                       "measure_s"]].sum(axis=1)
    cols = ["label", "batch_size", "wall_s", "import_s", "build_s", "compile_s_cold", "warmup_s",
            "measure_s", "other_s"]
    print(f"study {meta.get('study')}: {', '.join(fp.get('gpu_name') or fp.get('cpu') or '?' for fp in meta.get('fingerprints', []))}")
    print(ok[cols].round(2).to_string(index=False))
    useful = ok[["compile_s_cold", "warmup_s", "measure_s"]].sum(axis=1)
    print(f"\nper trial (mean of {len(ok)}): wall {ok['wall_s'].mean():.1f} s, "
          f"compile+warm-up+measure {useful.mean():.1f} s, "
          f"import+build {(ok['import_s'] + ok['build_s']).mean():.1f} s, "
          f"other {ok['other_s'].mean():.1f} s")
    print(f"tuner overhead per trial (wall minus compile+warm-up+measure): "
          f"{(ok['wall_s'] - useful).mean():.1f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "studies/h200-resnet18")
