"""Human-readable views of a study: the Pareto table per batch size and a plain verdict."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from tuner.fingerprint import describe
from tuner.records import Status

# (column, header, format) of the Pareto table.
_TABLE = [
    ("label", "config", "{}"),
    ("latency_ms_p50", "p50 ms", "{:.3f}"),
    ("latency_ms_p90", "p90 ms", "{:.3f}"),
    ("speedup_vs_eager", "vs eager", "{:.2f}x"),
    ("throughput_per_s", "items/s", "{:,.0f}"),
    ("compile_s_cold", "compile s", "{:.1f}"),
    ("time_to_steady_s", "warm-up s", "{:.1f}"),
    ("peak_memory_bytes", "memory", "bytes"),
]


def fmt_bytes(n: Any) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    return f"{n / 2**30:.2f} GiB"


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt == "bytes":
        return fmt_bytes(value)
    return fmt.format(value)


def notes(row: pd.Series) -> str:
    out = []
    if row.get("noisy") is True:
        out.append("noisy")
    for column, word in (("graph_breaks", "graph breaks"), ("recompiles", "recompiles"),
                         ("cudagraph_skips", "cudagraph skips"),
                         ("eager_fallback_frames", "frames fell back to eager")):
        value = row.get(column)
        if value is not None and not pd.isna(value) and value > 0:
            out.append(f"{int(value)} {word}")
    if isinstance(row.get("correctness_note"), str) and row["correctness_note"]:
        out.append(row["correctness_note"])
    return "; ".join(out)


def table(rows: pd.DataFrame) -> str:
    """Fixed-width text table of some rows (one batch size, typically)."""
    headers = [h for _, h, _ in _TABLE] + ["notes"]
    body = [[_cell(r.get(c), f) for c, _, f in _TABLE] + [notes(r)] for _, r in rows.iterrows()]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                       enumerate(zip(headers, widths))).rstrip()]
    for b in body:
        lines.append("  ".join(c.ljust(w) if i in (0, len(b) - 1) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(b, widths))).rstrip())
    return "\n".join(lines)


def verdicts(trials: pd.DataFrame) -> dict[int, str]:
    """Per batch size, one plain sentence: does compiling pay, and after how many calls."""
    out: dict[int, str] = {}
    ok = trials[(trials["status"] == Status.OK.value) & (trials["correct"] != False)]  # noqa: E712
    for bs, group in ok.groupby("batch_size"):
        eager = group[group["backend"] == "eager"]
        compiled = group[group["backend"] != "eager"]
        if eager.empty or compiled.empty:
            continue
        e = eager["latency_ms_p50"].min()
        best = compiled.loc[compiled["latency_ms_p50"].idxmin()]
        if best["latency_ms_p50"] >= e:
            out[int(bs)] = (f"compiling does not pay at batch size {bs}: eager ({e:.3f} ms) is "
                            f"faster than the best compiled config, {best['label']} "
                            f"({best['latency_ms_p50']:.3f} ms), and that one costs "
                            f"{best['time_to_steady_s']:.1f} s to warm up. Use eager.")
        else:
            calls = best["break_even_calls"]
            payback = f"; its {best['time_to_steady_s']:.1f} s warm-up pays back after " \
                      f"{calls:,.0f} calls" if not pd.isna(calls) else ""
            out[int(bs)] = (f"batch size {bs}: {best['label']} is {e / best['latency_ms_p50']:.2f}x "
                            f"faster than eager ({best['latency_ms_p50']:.3f} vs {e:.3f} ms)"
                            f"{payback}.")
    return out


def failures(trials: pd.DataFrame) -> list[str]:
    bad = trials[trials["status"] != Status.OK.value]
    return [f"{r['label']} bs={r['batch_size']}: {r['status']}: {str(r['message'])[:160]}"
            for _, r in bad.iterrows()]


def render(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any]) -> str:
    """The whole text report of ``tuner show`` and the end of ``tuner search``."""
    lines = []
    workload = meta.get("workload") or {}
    lines.append(f"study {meta.get('study')}: {workload.get('model')} {workload.get('dtype')} "
                 f"on {workload.get('device')}, {len(trials)} trials")
    for fp in meta.get("fingerprints") or []:
        lines.append(f"measured on {describe(fp)}")
    sentences = verdicts(trials)
    for bs, group in pareto.groupby("batch_size"):
        lines.append("")
        lines.append(f"batch size {bs}: Pareto-optimal configs (latency, memory, warm-up)")
        lines.append(table(group))
        if int(bs) in sentences:
            lines.append(sentences[int(bs)])
    failed = failures(trials)
    if failed:
        lines.append("")
        lines.append(f"{len(failed)} trials failed (kept in trials.parquet):")
        lines += [f"  {f}" for f in failed]
    return "\n".join(lines)


def as_json(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    keep = ["batch_size", "label", "backend", "mode", "dynamic", "latency_ms_p50",
            "latency_ms_p90", "latency_ms_p99", "speedup_vs_eager", "throughput_per_s",
            "compile_s_cold", "time_to_steady_s", "peak_memory_bytes", "memory_kind",
            "peak_vram_bytes", "break_even_calls", "noisy", "graph_breaks", "recompiles",
            "correct", "trial_number"]
    rows = pareto[keep].astype(object).where(pareto[keep].notna(), None).to_dict("records")
    return {"study": meta.get("study"), "workload": meta.get("workload"),
            "fingerprints": meta.get("fingerprints"), "trials": len(trials),
            "failed": int((trials["status"] != Status.OK.value).sum()),
            "pareto": rows, "verdicts": {str(k): v for k, v in verdicts(trials).items()}}
