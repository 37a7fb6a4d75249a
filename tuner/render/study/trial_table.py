"""The table of trials under each batch size of ``tuner show``: one row a config, its notes,
the columns of finalists measured again, and what their medians and ranks mean."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from tuner.data.derive import listed, ran_eager
from tuner.data.noise import INTERFERENCE_CORES, SLOW_CORE_RATIO, p99_of_few_calls
from tuner.data.rows import NAME
from tuner.data.select import LATENCY, eligible, why_left_out
from tuner.errors import UserError
from tuner.render.table import Column, grid, wrap
from tuner.render.text import cell, is_list
from tuner.words import plural


@dataclasses.dataclass(frozen=True)
class TableColumn:
    """A column of the table of trials: what ``--columns`` calls it, the frame's column, its
    header and format; ``shown``: in the default view (the rest with ``--wide``); ``again``: a
    column of finalists measured again in fresh processes, there only where a row has it."""

    key: str
    column: str
    header: str
    fmt: str
    shown: bool = False
    again: bool = False


# In table order. The default view answers "which config, how fast, how sure, at what cost":
# the p50 (and where measured again, the median of the processes, the rank and the p50's
# interval), the speedup over eager, the warm-up and the memory (docs/cli.md says why).
COLUMNS = (
    TableColumn("p50", "latency_ms_p50", "p50 ms", "{:.3f}", shown=True),
    TableColumn("p90", "latency_ms_p90", "p90 ms", "{:.3f}"),
    TableColumn("p99", "latency_ms_p99", "p99 ms", "{:.3f}"),
    TableColumn("median", "p50_median_ms", "median ms", "{:.3f}", shown=True, again=True),
    TableColumn("median-p99", "p99_median_ms", "median p99", "{:.3f}", again=True),
    TableColumn("rank", "rank_within_noise", "rank", "{:.0f}", shown=True, again=True),
    TableColumn("ci", "p50_ci_ms", "p50 95% CI ms", "{}", shown=True, again=True),
    TableColumn("spread", "latency_spread_pct", "spread", "{:.1f}%", again=True),
    TableColumn("stream", "stream_ms_p50", "stream ms", "{:.3f}"),
    TableColumn("median-stream", "stream_median_ms", "median stream", "{:.3f}", again=True),
    TableColumn("vs-eager", "speedup_vs_eager", "vs eager", "{:.2f}x", shown=True),
    TableColumn("items", "throughput_per_s", "items/s", "{:,.0f}"),
    TableColumn("tflops", "achieved_tflops", "TFLOP/s", "{:.3g}"),
    TableColumn("of-peak", "fraction_of_peak", "of peak", "{:.1%}"),
    TableColumn("compile", "compile_s_cold", "compile s", "{:.1f}"),
    TableColumn("warm", "compile_s_warm", "warm s", "{:.1f}", again=True),
    TableColumn("artifacts", "compile_s_artifacts", "artifacts s", "{:.1f}", again=True),
    TableColumn("warm-up", "time_to_steady_s", "warm-up s", "{:.1f}", shown=True),
    TableColumn("memory", "peak_memory_bytes", "memory", "bytes", shown=True),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
# A note this long or shorter stands in the notes column; a longer one is a numbered footnote
# under the table, so that a row keeps to its line.
SHORT_NOTE = 20


def columns_of(keys: Sequence[str] | None = None, wide: bool = False) -> tuple[TableColumn, ...]:
    """The table's columns: those named by ``keys`` (``--columns``, in table order), every one
    with ``wide``, else the default view's. An unknown name is a one-line error."""
    if keys is not None:
        unknown = [k for k in keys if k not in COLUMN_KEYS]
        if unknown:
            raise UserError(f"unknown column {unknown[0]!r} in --columns: choose from "
                            f"{', '.join(COLUMN_KEYS)} (config and notes are always shown)",
                            about="--columns")
        return tuple(c for c in COLUMNS if c.key in keys)
    return COLUMNS if wide else tuple(c for c in COLUMNS if c.shown)


# Short notes that stand in the notes column of each row they concern, said in full once under
# the table (a footnote per row repeated the same sentence for every config of a busy run).
HOST_BUSY, VM_STARVED = "host busy", "VM starved"
LEGENDS = {HOST_BUSY: f"{HOST_BUSY} N cores: other processes used N CPU cores while it measured "
                      "(a launch-bound latency may read slow)",
           VM_STARVED: f"{VM_STARVED} N cores: the hypervisor took N CPU cores (steal) while it "
                       "measured"}

_CACHE_START_NOTES = {"warm": "compile s from a warm cache",
                      "artifacts": "compile s from saved artifacts"}


def notes(row: pd.Series) -> str:
    out = []
    if ran_eager(row.get("ran_compiled")):
        out.append("RAN EAGER: no compiled graph, not a compiled result")
    if row.get("noisy") is True:
        out.append("noisy")
    if p99_of_few_calls(calls := row.get("measure_calls")):
        out.append(f"p99 of {int(calls)} calls: about the slowest one")
    started = _CACHE_START_NOTES.get(row.get("cache_start"))  # compile s is not a cold compile
    if started:
        out.append(started)
    busy = row.get("host_other_cpu_cores")
    if busy is not None and not pd.isna(busy) and busy >= INTERFERENCE_CORES:
        out.append(f"{HOST_BUSY} {busy:.1f} cores")
    steal = row.get("host_steal_cores")
    if steal is not None and not pd.isna(steal) and steal >= INTERFERENCE_CORES:
        out.append(f"{VM_STARVED} {steal:.1f} cores")
    slowdown = row.get("host_core_slowdown")
    if slowdown is not None and not pd.isna(slowdown) and slowdown >= SLOW_CORE_RATIO:
        out.append(f"slow host core: a fixed loop took {slowdown:.1f}x as long as on this "
                   "machine's fast cores, so a launch-bound latency reads slow")
    share = row.get("fraction_of_peak")
    if share is not None and not pd.isna(share) and share > 1:
        out.append(f"TFLOP/s above the peak measured on this machine ({share:.0%} of it): the "
                   "peak was under-measured (timed once a run, slower on a busy host)")
    gpu, p50 = row.get("gpu_time_ms"), row.get("latency_ms_p50")
    if gpu is not None and not pd.isna(gpu):  # TUNER_GPU_TIME=1: the rest of a call is the host's
        share = f" ({gpu / p50:.0%} of its p50)" if p50 and not pd.isna(p50) else ""
        out.append(f"GPU busy {gpu:.2f} ms a call{share}")
    for column, word, then in (("graph_breaks", "graph break", ""),
                               ("recompiles", "recompile", ""),
                               ("recompile_limit_hits", "recompile-limit hit", ""),
                               ("cudagraph_skips", "cudagraph skip", ""),
                               ("eager_fallback_frames", "frame", " fell back to eager")):
        value = row.get(column)
        if value is not None and not pd.isna(value) and value > 0:
            out.append(plural(int(value), word) + then)
    if isinstance(row.get("correctness_note"), str) and row["correctness_note"]:
        out.append(row["correctness_note"])
    failed = row.get("repeats_failed")
    if failed is not None and not pd.isna(failed) and failed > 0:
        out.append(f"{plural(int(failed), 're-measurement')} failed")
    return "; ".join(out)


def table(rows: pd.DataFrame, every_trial: bool = False, width: int | None = None,
          columns: Sequence[TableColumn] | None = None) -> str:
    """The table of some rows (one batch size, typically) within ``width`` characters
    (:func:`tuner.render.table.grid`; None: each column as wide as it needs), then the
    footnotes its notes column points to. ``columns``: those to show beside the config and
    the notes (default: :func:`columns_of`'s default view). ``every_trial`` (``tuner show
    --all``): the rows no view compares say why, first in their notes."""
    rows, shown = _with_confirmed(rows, columns_of() if columns is None else columns)
    why: dict[Any, str] = {}
    if every_trial:
        left = rows[~rows.index.isin(eligible(rows).index)]
        why = dict(zip(left.index, why_left_out(left)))
    footnotes: dict[str, int] = {}

    def noted(i: Any, row: pd.Series) -> str:
        said = [f"left out: {why[i]}"] if i in why else []
        said += [n for n in notes(row).split("; ") if n]
        return "; ".join(n if len(n) <= SHORT_NOTE else
                        f"[{footnotes.setdefault(n, len(footnotes) + 1)}]" for n in said)

    body = [[str(r[NAME]), *(_table_cell(r, c.column, c.fmt) for c in shown), noted(i, r)]
            for i, r in rows.iterrows()]
    text = grid([Column("config", text=True), *(Column(c.header) for c in shown),
                 Column("notes", text=True)], body, width)
    legends = [legend for word, legend in LEGENDS.items()
               if any(f"{word} " in row[-1] for row in body)]
    return "\n".join([text, *(wrap(f"[{n}] {note}", width, hang=len(f"[{n}] "))
                              for note, n in footnotes.items()),
                      *(wrap(legend, width, hang=2) for legend in legends)])


def _table_cell(row: pd.Series, column: str, fmt: str) -> str:
    # Eager compiles nothing: its first call is no compile time.
    if column == "compile_s_cold" and row.get("backend") == "eager":
        return "-"
    # No share of a peak is above it: the peak was under-measured (the notes say by how much).
    share = row.get(column)
    if column == "fraction_of_peak" and share is not None and not pd.isna(share) and share > 1:
        return ">100%"
    return cell(share, fmt)


def _with_confirmed(rows: pd.DataFrame, columns: Sequence[TableColumn]
                    ) -> tuple[pd.DataFrame, list[TableColumn]]:
    """The rows with the columns of re-measured finalists, and of ``columns`` those to show:
    a column of re-measured finalists only where a row has it."""
    if "latency_ms_p50_ci_low" in rows:
        low = pd.to_numeric(rows["latency_ms_p50_ci_low"], errors="coerce")
        high = pd.to_numeric(rows["latency_ms_p50_ci_high"], errors="coerce")
        rows = rows.assign(p50_ci_ms=[None if pd.isna(lo) else f"{lo:.3f}-{hi:.3f}"
                                      for lo, hi in zip(low, high)],
                           # only where measured again: elsewhere it is the p50 itself
                           p50_median_ms=pd.to_numeric(rows[LATENCY], errors="coerce")
                           .where(low.notna()))
    if "stream_ms_p50_median" in rows:
        rows = rows.assign(stream_median_ms=pd.to_numeric(
            rows["stream_ms_p50_median"], errors="coerce").where(_again(rows, "stream_ms_p50")))
    if "latency_ms_p99_median" in rows:
        rows = rows.assign(p99_median_ms=pd.to_numeric(
            rows["latency_ms_p99_median"], errors="coerce").where(_again(rows, "latency_ms_p99")))
    return rows, [c for c in columns
                  if not c.again or (c.column in rows and rows[c.column].notna().any())]


def _again(rows: pd.DataFrame, column: str) -> pd.Series:
    """The rows whose ``column`` two processes or more kept (re-measurements made by tuner 0.1.0
    before 2026-12-01, 1427675, kept no stream time, and before 2026-12-02, 268c918, no p99:
    those rows have only the search trial's)."""
    if f"{column}_repeats" not in rows:
        return pd.Series(False, index=rows.index)
    return rows[f"{column}_repeats"].map(lambda v: listed(v) > 1)


def noise_note(rows: pd.DataFrame, confirm: str | None = None) -> str | None:
    """What the medians and ranks of re-measured rows mean; ``confirm`` (a front's table, not
    every trial's): the command that measures again the rows of a front measured only once."""
    if "latency_ms_p50_ci_low" not in rows or rows["latency_ms_p50_ci_low"].isna().all():
        return None
    ranked = "rank_within_noise" in rows and rows["rank_within_noise"].notna().any()
    counts = sorted({len(v) for v in rows["latency_ms_p50_repeats"] if is_list(v)})
    processes = (f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}") \
        if counts else "several"
    stream = ("; median stream: the same back to back, which items/s and TFLOP/s use"
              if _again(rows, "stream_ms_p50").any() else "")
    tail = ("; median p99: the same for the p99, which recommend --max-p99-ms bounds"
            if _again(rows, "latency_ms_p99").any() else "")
    median = (f"median ms: the median p50 of {processes} fresh processes, the figure configs "
              f"are ordered, compared with eager and recommended by{tail}{stream} (p50, p90, "
              "p99 and stream ms are the search trial's own).")
    once = sum(not (is_list(v) and len(v) >= 2) for v in rows["latency_ms_p50_repeats"])
    if confirm is not None and once:
        # A front confirmed in part (a confirm cut short, or rows that joined it afterwards).
        it, its = ("it", "its") if once == 1 else ("them", "their")
        median += (f" {once} of the {len(rows)} configs here {'was' if once == 1 else 'were'} "
                   f"measured in one process (median ms -), ordered by {its} own p50: a gap to "
                   f"{it} may be one process's noise, and `{confirm}` measures {it} again.")
    return median if not ranked else (
        f"{median} rank: latency beyond noise, pair by pair (a Welch t-test at 95% over those "
        "p50s, or every process faster by more than twice the larger spread). 1 = no config "
        "is faster beyond noise; otherwise one below the lowest-ranked config that is, and "
        "never above a config faster on average. Configs of equal rank are within noise of "
        "each other or undecided, so neither is faster beyond noise.")
