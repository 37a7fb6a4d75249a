"""The whole report of ``tuner show`` and the end of ``tuner search``, as text for people and as
JSON for scripts: the header, the table of trials per batch size with its verdict, the sentences
beside the fronts, the shape-schedule replay and what went wrong."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data import schema
from tuner.data.json_contract import document
from tuner.data.rows import NAME
from tuner.data.select import not_run
from tuner.domain.records import SCHEDULE_REPEATS, Status
from tuner.domain.workload import Workload, shape_label
from tuner.render.plain import line as plain_line
from tuner.render.study.failures import failures, left_out, slow_core
from tuner.render.study.off_front import throughput_off_front, unranked
from tuner.render.study.schedule import schedule_rows, schedule_table
from tuner.render.study.trial_table import COLUMNS, TableColumn, columns_of, noise_note, table
from tuner.render.study.verdicts import confirm_command, verdicts, vs_plain
from tuner.render.table import terminal_width, wrap
from tuner.render.text import describe_fingerprint
from tuner.words import plural

NO_TRIALS = "no trials recorded yet: `tuner search` with the study's options adds them"


def _one_value(trials: pd.DataFrame, column: str) -> str | None:
    """What every row says in ``column`` (a file whose metadata lacks the workload), where
    they agree."""
    values = trials[column].dropna().unique() if column in trials else []
    return str(values[0]) if len(values) == 1 else None


def render(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any],
           every_trial: bool = False, folder: Path | None = None, width: int | None = None,
           columns: Sequence[TableColumn] | None = None) -> str:
    """The whole text report of ``tuner show`` and the end of ``tuner search``; with
    ``every_trial``, ``pareto`` holds every trial (``tuner show --all``). ``folder``: the
    study's folder, named in the commands the report suggests. ``width``: what the report
    fits (None: :func:`tuner.render.table.terminal_width`); ``columns``: the tables' (None:
    the default view, :func:`tuner.render.study.trial_table.columns_of`), where every column
    shown, the tables are as wide as they need."""
    width = terminal_width() if width is None else width
    shown = columns_of() if columns is None else columns
    tables = None if len(shown) == len(COLUMNS) else width  # --wide: tables as wide as need be
    lines: list[str] = []

    def say(*texts: str) -> None:
        lines.extend(wrap(text, width) for text in texts)

    workload = meta.get("workload") or {}
    # The precision of the rows: the study's, or every one it searched.
    dtypes = ",".join(str(d) for d in dict.fromkeys(trials["dtype"].dropna())) \
        if "dtype" in trials and trials["dtype"].notna().any() else workload.get("dtype")
    model, device = (workload.get(key) or _one_value(trials, key) for key in ("model", "device"))
    what = " ".join(str(w) for w in (model, dtypes, device and f"on {device}") if w)
    say(f"study {meta.get('study')}: {what + ', ' if what else ''}"
        f"{plural(len(trials), 'trial')}")
    say(*(f"measured on {describe_fingerprint(fp)}" for fp in meta.get("fingerprints") or []))
    if trials.empty:
        say(NO_TRIALS)
    sentences = verdicts(trials, folder, meta.get("storage"))
    gains = vs_plain(trials, meta)
    off_front = throughput_off_front(trials, pareto, folder)
    for bs, group in pareto.groupby("batch_size"):
        say("", f"batch size {bs}: every trial" if every_trial else
            f"batch size {bs}: Pareto-optimal configs (latency, memory, warm-up)")
        if legend := _legend(shown):
            say(legend)
        lines.append(table(group, every_trial, tables, shown))
        if note := noise_note(group, None if every_trial else
                               confirm_command(folder, meta.get("storage"))):
            say(note)
        if int(bs) in sentences:
            say(sentences[int(bs)])
        if int(bs) in gains:
            say(plain_line(gains[int(bs)]))
        if not every_trial and int(bs) in off_front:
            say(off_front[int(bs)])
    if not every_trial:
        for _, sentence in sorted(unranked(trials, pareto).items()):
            say("", sentence)
    replay = schedule_rows(trials)
    if replay:
        schedule = Workload.from_dict(workload).shape_schedule if workload else ()
        shapes = ",".join(shape_label(s) for s in schedule)
        say("", f"shape schedule {shapes} replayed after each trial's steady state "
            f"(replay s: all {SCHEDULE_REPEATS} replays, every "
            "step synchronised; ms: each shape once warm, its compiles and CUDA-graph "
            "recordings counted apart):")
        lines.append(schedule_table(replay, tables))
    if slow := slow_core(trials):
        say("", slow)
    failed = failures(trials)
    if failed:
        # A config skipped without a trial (its mode compiled past the budget) is no failed trial.
        bad = trials[trials["status"] != Status.OK.value]
        skipped = int(not_run(bad).sum())
        what = " and ".join(part for part in (
            plural(len(failed) - skipped, "trial") + " failed" if len(failed) > skipped else "",
            plural(skipped, "config") + f" {'was' if skipped == 1 else 'were'} not run"
            if skipped else "") if part)
        say("", f"{what} (kept in trials.parquet):", *(f"  {f}" for f in failed))
    if dropped := left_out(trials):
        say("", f"{plural(len(dropped), 'finalist')} left out of the "
            "fronts and recommendations: a re-measurement in a fresh process failed",
            *(f"  {d}" for d in dropped))
    return "\n".join(lines)


def _legend(columns: Sequence[TableColumn]) -> str:
    """What the latencies of the table's columns are: per request or back to back."""
    keys = {c.key for c in columns}
    request = [c.header.split()[0] for c in columns if c.key in ("p50", "p90", "p99")]
    parts = ([f"{', '.join(request)}: what one request waits, each call then synchronize"]
             if request else []) + (["stream: per call back to back, what a busy server pays"]
                                    if "stream" in keys else [])
    return f"({'; '.join(parts)})" if parts else ""


def as_json(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any],
            folder: Path | None = None) -> dict[str, Any]:
    keep = ["batch_size", "label", NAME, "backend", "mode", "dynamic", "latency_ms_p50",
            "latency_ms_p90", "latency_ms_p99", "speedup_vs_eager", "throughput_per_s",
            "compile_s_cold", "time_to_steady_s", "peak_memory_bytes", "memory_kind",
            "peak_vram_bytes", "break_even_calls", "noisy", "graph_breaks", "recompiles",
            "correct", "trial_number", "ran_compiled", "recompile_limit_hits",
            "eager_fallback_frames", "flops_per_call", "achieved_tflops", "fraction_of_peak",
            "latency_ms_p50_median", "latency_ms_p90_median", "latency_ms_p99_median",
            "stream_ms_p50_median", "rank_within_noise",
            "latency_ms_p50_ci_low",
            "latency_ms_p50_ci_high", "latency_spread_pct", "latency_ms_p50_repeats", "repeats_failed", "compile_s_warm",
            "compile_s_artifacts", "artifacts_file", "host_loop_ms", "host_core_slowdown",
            "gpu_time_ms",
            # the rest of the table's columns and of what its notes are made from
            "stream_ms_p50", "status", "message", "dtype", "channels_last", "cudnn_benchmark",
            "cache_start", "measure_calls", "host_other_cpu_cores", "host_steal_cores",
            "cudagraph_skips", "correctness_note",
            *(c for c in pareto.columns if schema.is_option_column(c))]
    rows = pareto[keep].astype(object).where(pareto[keep].notna(), None).to_dict("records")
    sentences = verdicts(trials, folder, meta.get("storage"))
    # What the text says beside the tables: a batch size with no row on a front and why (none
    # with --all, whose rows are every trial), each failed trial, each finalist a
    # re-measurement left out, the trials on a slow core.
    return document({
        "study": study_name(meta, folder), "workload": meta.get("workload"),
        "fingerprints": meta.get("fingerprints"), "trials": len(trials),
        "failed": int((trials["status"] != Status.OK.value).sum()),
        "pareto": rows, "verdicts": _by_batch_size(sentences),
        "vs_plain": [g.to_dict() for _, g in sorted(vs_plain(trials, meta).items())],
        "unranked": _by_batch_size(unranked(trials, pareto)),
        "throughput_off_front": _by_batch_size(throughput_off_front(trials, pareto, folder)),
        "failures": failures(trials), "left_out": left_out(trials),
        "slow_core": slow_core(trials),
        "shape_schedule": [_shapes_listed(r) for r in schedule_rows(trials)]})


def study_name(meta: dict[str, Any], folder: Path | None) -> str | None:
    """The study's name: its files', else its folder's (a trials.parquet without metadata)."""
    return str(meta.get("study") or "") or (folder.name if folder is not None else None)


def _shapes_listed(row: dict[str, Any]) -> dict[str, Any]:
    """A replay's row with its per-shape figures as a list (``shapes``), not keyed by shape:
    a shape of a file without shape labels is its batch size."""
    out = {k: v for k, v in row.items() if k not in ("latency_ms", "warmup_s")}
    out["shapes"] = [{"shape": shape, "latency_ms": ms, "warmup_s": row["warmup_s"].get(shape)}
                     for shape, ms in row["latency_ms"].items()]
    return out


def _by_batch_size(texts: dict[int, str]) -> list[dict[str, Any]]:
    return [{"batch_size": int(bs), "text": text} for bs, text in sorted(texts.items())]
