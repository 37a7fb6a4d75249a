"""``tuner show`` for people and scripts: the Pareto table per batch size, a plain verdict, the
shape-schedule replay and the failures."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from tuner.data import schema
from tuner.data.derive import baseline_of, listed, ran_eager, ran_eager_only
from tuner.data.noise import INTERFERENCE_CORES, SLOW_CORE_RATIO, p99_of_few_calls
from tuner.data.select import (
    LATENCY,
    best,
    comparable,
    eligible,
    failed_again,
    left_out_counts,
    not_run,
    throughput_picks_off_front,
    why_left_out,
)
from tuner.render.text import cell, describe_fingerprint, is_list
from tuner.domain.layout import DB_FILE
from tuner.domain.records import SCHEDULE_REPEATS, Status
from tuner.domain.workload import Workload, shape_label
from tuner.words import plural

# (column, header, format) of the Pareto table.
_TABLE = [
    ("label", "config", "{}"),
    ("latency_ms_p50", "p50 ms", "{:.3f}"),
    ("latency_ms_p90", "p90 ms", "{:.3f}"),
    ("latency_ms_p99", "p99 ms", "{:.3f}"),
    ("stream_ms_p50", "stream ms", "{:.3f}"),
    ("speedup_vs_eager", "vs eager", "{:.2f}x"),
    ("throughput_per_s", "items/s", "{:,.0f}"),
    ("achieved_tflops", "TFLOP/s", "{:.3g}"),
    ("fraction_of_peak", "of peak", "{:.1%}"),
    ("compile_s_cold", "compile s", "{:.1f}"),
    ("time_to_steady_s", "warm-up s", "{:.1f}"),
    ("peak_memory_bytes", "memory", "bytes"),
]

# Finalists measured again in fresh processes (tuner.study.finalists): shown after the column named,
# when a row of the table has them.
_CONFIRMED = {
    "latency_ms_p99": [("p50_median_ms", "median ms", "{:.3f}"),
                       ("p99_median_ms", "median p99", "{:.3f}"),
                       ("rank_within_noise", "rank", "{:.0f}"),
                       ("p50_ci_ms", "p50 95% CI ms", "{}"),
                       ("latency_spread_pct", "spread", "{:.1f}%")],
    "stream_ms_p50": [("stream_median_ms", "median stream", "{:.3f}")],
    "compile_s_cold": [("compile_s_warm", "warm s", "{:.1f}"),
                       ("compile_s_artifacts", "artifacts s", "{:.1f}")],
}


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
        out.append(f"host busy: other processes used {busy:.1f} CPU cores while it measured")
    steal = row.get("host_steal_cores")
    if steal is not None and not pd.isna(steal) and steal >= INTERFERENCE_CORES:
        out.append(f"VM starved: the hypervisor took {steal:.1f} CPU cores (steal) while it "
                   "measured")
    slowdown = row.get("host_core_slowdown")
    if slowdown is not None and not pd.isna(slowdown) and slowdown >= SLOW_CORE_RATIO:
        out.append(f"slow host core: a fixed loop took {slowdown:.1f}x as long as on this "
                   "machine's fast cores, so a launch-bound latency reads slow")
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


def table(rows: pd.DataFrame, every_trial: bool = False) -> str:
    """Fixed-width text table of some rows (one batch size, typically). ``every_trial``
    (``tuner show --all``): the rows no view compares say why, first in their notes."""
    rows, columns = _with_confirmed(rows)
    headers = [h for _, h, _ in columns] + ["notes"]
    why: dict[Any, str] = {}
    if every_trial:
        left = rows[~rows.index.isin(eligible(rows).index)]
        why = dict(zip(left.index, why_left_out(left)))
    body = [[_table_cell(r, c, f) for c, _, f in columns]
            + ["; ".join(filter(None, (f"left out: {why[i]}" if i in why else "", notes(r))))]
            for i, r in rows.iterrows()]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(headers)]
    # config and notes are text, left-aligned under their headers; the figures are right-aligned
    lines = ["  ".join(h.ljust(w) if i in (0, len(headers) - 1) else h.rjust(w) for i, (h, w) in
                       enumerate(zip(headers, widths))).rstrip()]
    for b in body:
        lines.append("  ".join(c.ljust(w) if i in (0, len(b) - 1) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(b, widths))).rstrip())
    return "\n".join(lines)


def _table_cell(row: pd.Series, column: str, fmt: str) -> str:
    # Eager compiles nothing: its first call is no compile time.
    if column == "compile_s_cold" and row.get("backend") == "eager":
        return "-"
    return cell(row.get(column), fmt)


def _with_confirmed(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[str, str, str]]]:
    """The table's columns, with those of re-measured finalists where any row has them."""
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
    columns = []
    for column in _TABLE:
        columns.append(column)
        columns += [extra for extra in _CONFIRMED.get(column[0], [])
                    if extra[0] in rows and rows[extra[0]].notna().any()]
    return rows, columns


def _again(rows: pd.DataFrame, column: str) -> pd.Series:
    """The rows whose ``column`` two processes or more kept (records made before the
    re-measurements kept the stream time and the p99 have only the search trial's)."""
    if f"{column}_repeats" not in rows:
        return pd.Series(False, index=rows.index)
    return rows[f"{column}_repeats"].map(lambda v: listed(v) > 1)


def _noise_note(rows: pd.DataFrame, confirm: str | None = None) -> str | None:
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
        f"{median} rank: latency beyond noise (a Welch t-test at 95% over those p50s, pair by "
        "pair). 1 = no config "
        "is faster beyond noise; otherwise one below the lowest-ranked config that is, and "
        "never above a config faster on average. Configs of equal rank are within noise of "
        "each other, so neither is faster.")


def _flag(value: Any) -> bool:
    """A boolean cell that is set and true (None, NaN and False are not)."""
    return value is not None and not pd.isna(value) and bool(value)


def confirm_command(folder: Path | None = None, storage: str | None = None) -> str:
    """``tuner confirm`` for the study in ``folder`` (STUDY where the caller does not know it),
    to paste as it is. ``storage``: where the study lives, as its files say it (the study
    folder's study.db, or a URL without its password): any other than study.db is given with
    --storage, as URL where its password was taken out of the files."""
    command = "tuner confirm " + ("STUDY" if folder is None else shlex.quote(str(folder)))
    if storage is None or storage == DB_FILE:
        return command
    return f"{command} --storage {'URL' if '***' in storage else shlex.quote(storage)}"


def verdicts(trials: pd.DataFrame, folder: Path | None = None,
             storage: str | None = None) -> dict[int, str]:
    """Per batch size, one plain sentence: does compiling pay, and after how many calls.
    ``folder`` and ``storage``: the study's, named in the ``tuner confirm`` command a sentence
    suggests (:func:`confirm_command`).

    The rules are the ones ``recommend`` and ``compare`` apply (:mod:`tuner.data.select`): only
    eligible rows count (those the front is chosen from, so a config said to pay is on the
    table), a compiled config within noise of eager is no faster than it, and eager is that of
    the compiled config's precision, as its ``vs eager`` is (:func:`baseline_of`).
    """
    out: dict[int, str] = {}
    confirm = confirm_command(folder, storage)
    ok = comparable(trials)
    for bs, group in ok.groupby("batch_size"):
        eager = group[group["backend"] == "eager"]
        compiled = group[group["backend"] != "eager"]
        if compiled.empty:  # eager alone: say so, and why no compiled config counts
            e = float(best(eager, "latency")[LATENCY])
            tried = trials[(trials["batch_size"] == bs) & (trials["backend"] != "eager")]
            out[int(bs)] = (f"batch size {bs}: only eager has been measured ({e:.3f} ms), "
                            "nothing compiled to compare it with yet." if tried.empty else
                            f"compiling did not work at batch size {bs}: no compiled config "
                            f"finished and matched eager ({left_out_counts(tried)}). Use eager "
                            f"({e:.3f} ms).")
            continue
        if eager.empty:
            continue
        top = best(compiled, "latency")
        t = float(top[LATENCY])
        # Another precision is another model's accuracy, never the baseline.
        baseline = baseline_of(compiled)[top.name]
        same = pd.Series([key == baseline for key in baseline_of(eager)], index=eager.index)
        if not same.any():
            continue
        fastest_eager = best(eager[same], "latency")
        e = float(fastest_eager[LATENCY])
        # Where eager ran in several precisions, the sentence names the one it compares with.
        eager_name = "eager" if same.all() else fastest_eager["label"]
        eager = eager[same]
        winner = best(pd.concat([compiled, eager]), "latency")
        if winner["backend"] != "eager":  # the fastest compiled one may be within noise of eager
            top, t = winner, float(winner[LATENCY])
        warmup = f"{top['time_to_steady_s']:.1f} s"
        if winner["backend"] == "eager" and t < e:
            # More processes sharpen the test: say how many would be the next step.
            done = max(listed(r.get("latency_ms_p50_repeats")) for r in (top, fastest_eager)) - 1
            out[int(bs)] = (f"compiling does not measurably pay at batch size {bs}: the best "
                            f"compiled config, {top['label']} ({t:.3f} ms), "
                            f"and {eager_name} ({e:.3f} ms) are within noise of each other (a t-test "
                            "over their fresh processes' p50s does not separate them at 95%), "
                            f"and it costs {warmup} to "
                            f"warm up; `{confirm} --repeats {max(5, done + 3)}` measures "
                            "both again in more processes, which may tell them apart. Use eager.")
        elif winner["backend"] == "eager":
            out[int(bs)] = (f"compiling does not pay at batch size {bs}: {eager_name} ({e:.3f} ms) is "
                            f"faster than the best compiled config, {top['label']} "
                            f"({t:.3f} ms), and that one costs {warmup} to "
                            "warm up. Use eager.")
        else:
            calls = top["break_even_calls"]
            payback = f"; its {warmup} warm-up pays back after {calls:,.0f} calls" \
                if not pd.isna(calls) else ""
            unconfirmed = pd.isna(top.get("latency_ms_p50_ci_low")) and pd.isna(
                fastest_eager.get("latency_ms_p50_ci_low"))
            caution = (" Both rows are flagged noisy and were measured once each: "
                       f"`{confirm}` measures them again before you rely on this."
                       if unconfirmed and _flag(top.get("noisy"))
                       and _flag(fastest_eager.get("noisy")) else "")
            out[int(bs)] = (f"batch size {bs}: {top['label']} is "
                            f"{e / t:.2f}x faster than {eager_name} "
                            f"({t:.3f} vs {e:.3f} ms){payback}.{caution}")
    # Configs that ran eager under a compiled label are named, never counted as compiled.
    done = trials[(trials["status"] == Status.OK.value) & ran_eager_only(trials)]
    for bs, group in done.groupby("batch_size"):
        labels = ", ".join(sorted(set(group["label"])))
        note = (f"{labels} produced no compiled graph (every call ran eager), so "
                f"{'it is' if len(group) == 1 else 'they are'} not counted as compiled.")
        out[int(bs)] = f"{out[int(bs)]} {note}" if int(bs) in out else f"batch size {bs}: {note}"
    return out


def slow_core(trials: pd.DataFrame, listed: int = 5) -> str | None:
    """One sentence on the trials measured on a slow host core (``host_core_slowdown``): a
    launch-bound config among them reads slow, so it may be missing from a front."""
    if "host_core_slowdown" not in trials:
        return None
    slowdown = pd.to_numeric(trials["host_core_slowdown"], errors="coerce")
    slow = trials[(trials["status"] == Status.OK.value) & (slowdown >= SLOW_CORE_RATIO)]
    if slow.empty:
        return None
    names = [f"{r['label']} bs={r['batch_size']}" for _, r in slow.head(listed).iterrows()]
    more = f" and {len(slow) - listed} more" if len(slow) > listed else ""
    return (f"{len(slow)} of {len(trials)} trials were measured on a slow host core (a fixed "
            f"loop took {SLOW_CORE_RATIO}x as long or more as on this machine's fast cores): "
            f"{', '.join(names)}{more}. A launch-bound config among them reads slow and may be "
            "missing from a front above; `tuner show --all` flags them. Finalists, and those "
            "that would be on a front had their core been fast, are measured again by "
            "--confirm and `tuner confirm`.")


def failures(trials: pd.DataFrame) -> list[str]:
    bad = trials[trials["status"] != Status.OK.value]
    return [f"{r['label']} bs={r['batch_size']}: {r['status']}: {str(r['message'])[:160]}"
            for _, r in bad.iterrows()]


NO_TRIALS = "no trials recorded yet: `tuner search` with the study's options adds them"


def _one_value(trials: pd.DataFrame, column: str) -> str | None:
    """What every row says in ``column`` (a file whose metadata lacks the workload), where
    they agree."""
    values = trials[column].dropna().unique() if column in trials else []
    return str(values[0]) if len(values) == 1 else None


def render(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any],
           every_trial: bool = False, folder: Path | None = None) -> str:
    """The whole text report of ``tuner show`` and the end of ``tuner search``; with
    ``every_trial``, ``pareto`` holds every trial (``tuner show --all``). ``folder``: the
    study's folder, named in the commands the report suggests."""
    lines = []
    workload = meta.get("workload") or {}
    # The precision of the rows: the study's, or every one it searched.
    dtypes = ",".join(str(d) for d in dict.fromkeys(trials["dtype"].dropna())) \
        if "dtype" in trials and trials["dtype"].notna().any() else workload.get("dtype")
    model, device = (workload.get(key) or _one_value(trials, key) for key in ("model", "device"))
    what = " ".join(str(w) for w in (model, dtypes, device and f"on {device}") if w)
    lines.append(f"study {meta.get('study')}: {what + ', ' if what else ''}"
                 f"{plural(len(trials), 'trial')}")
    for fp in meta.get("fingerprints") or []:
        lines.append(f"measured on {describe_fingerprint(fp)}")
    if trials.empty:
        lines.append(NO_TRIALS)
    sentences = verdicts(trials, folder, meta.get("storage"))
    off_front = throughput_off_front(trials, pareto, folder)
    for bs, group in pareto.groupby("batch_size"):
        lines.append("")
        lines.append(f"batch size {bs}: every trial" if every_trial else
                     f"batch size {bs}: Pareto-optimal configs (latency, memory, warm-up)")
        lines.append("(p50, p90, p99: what one request waits, each call then synchronize; stream: "
                     "per call back to back, what a busy server pays)")
        lines.append(table(group, every_trial))
        if note := _noise_note(group, None if every_trial else
                               confirm_command(folder, meta.get("storage"))):
            lines.append(note)
        if int(bs) in sentences:
            lines.append(sentences[int(bs)])
        if not every_trial and int(bs) in off_front:
            lines.append(off_front[int(bs)])
    if not every_trial:
        for _, sentence in sorted(unranked(trials, pareto).items()):
            lines.append("")
            lines.append(sentence)
    replay = schedule_rows(trials)
    if replay:
        schedule = Workload.from_dict(workload).shape_schedule if workload else ()
        shapes = ",".join(shape_label(s) for s in schedule)
        lines.append("")
        lines.append(f"shape schedule {shapes} replayed after each trial's steady state "
                     f"(replay s: all {SCHEDULE_REPEATS} replays, every "
                     "step synchronised; ms: each shape once warm, its compiles and CUDA-graph "
                     "recordings counted apart):")
        lines.append(schedule_table(replay))
    if slow := slow_core(trials):
        lines.append("")
        lines.append(slow)
    failed = failures(trials)
    if failed:
        # A config skipped without a trial (its mode compiled past the budget) is no failed trial.
        bad = trials[trials["status"] != Status.OK.value]
        skipped = int(not_run(bad).sum())
        what = " and ".join(part for part in (
            plural(len(failed) - skipped, "trial") + " failed" if len(failed) > skipped else "",
            plural(skipped, "config") + f" {'was' if skipped == 1 else 'were'} not run"
            if skipped else "") if part)
        lines.append("")
        lines.append(f"{what} (kept in trials.parquet):")
        lines += [f"  {f}" for f in failed]
    if dropped := left_out(trials):
        lines.append("")
        lines.append(f"{plural(len(dropped), 'finalist')} left out of the "
                     "fronts and recommendations: a re-measurement in a fresh process failed")
        lines += [f"  {d}" for d in dropped]
    return "\n".join(lines)


def unranked(trials: pd.DataFrame, pareto: pd.DataFrame) -> dict[int, str]:
    """Per batch size with trials but no row on a front, one sentence on why: how many trials
    are left out for each reason and, where they finished but could not be checked, what the
    check said (an eager output of NaN alone, say), so that a report never ends without a
    word on a batch size it measured."""
    out: dict[int, str] = {}
    ranked = set(pareto["batch_size"]) if "batch_size" in pareto else set()
    for bs, group in trials.groupby("batch_size"):
        if bs in ranked:
            continue
        sentence = (f"batch size {bs}: no config to rank or recommend: none finished, matched "
                    f"eager and measured a latency ({left_out_counts(group)})")
        unchecked = group[(group["status"] == Status.OK.value) & group["correct"].isna()]
        said = [str(n) for n in dict.fromkeys(unchecked.get("correctness_note", pd.Series()))
                if isinstance(n, str) and n]
        if said:
            sentence += (f". {len(unchecked)} could not be checked against eager: "
                         f"{'; '.join(said)}")
        out[int(bs)] = sentence + ". `tuner show --all` lists every trial."
    return out


def throughput_off_front(trials: pd.DataFrame, pareto: pd.DataFrame,
                         folder: Path | None = None) -> dict[int, str]:
    """Per batch size where the config ``tuner recommend --objective throughput`` chooses (the
    most items per second back to back) is not on the front, which ranks what one request waits:
    one sentence naming it, so that a recommendation never names a config show did not list."""
    out: dict[int, str] = {}
    study = "STUDY" if folder is None else shlex.quote(str(folder))
    for _, top in throughput_picks_off_front(trials, pareto).iterrows():
        bs = int(top["batch_size"])
        out[bs] = (f"batch size {bs}: the most items/s back to back is {top['label']} "
                   f"(trial {int(top['trial_number'])}, {top['throughput_per_s']:,.0f} "
                   f"items/s, {top[LATENCY]:.3f} ms p50 per request): it is not on this front, "
                   "which ranks what one request waits, but it is what a server busy "
                   f"with calls back to back wants (`tuner recommend {study} "
                   f"--batch-size {bs} --objective throughput`).")
    return out


def left_out(trials: pd.DataFrame) -> list[str]:
    """Finalists whose trial was fine but a re-measurement failed (tuner.data.select.eligible
    leaves them out), each in a line."""
    rows = trials[(trials["status"] == Status.OK.value) & failed_again(trials)]
    return [f"{r['label']} bs={r['batch_size']} (trial {r['trial_number']}): "
            f"{plural(int(r['repeats_failed']), 're-measurement')} failed"
            for _, r in rows.iterrows()]


def schedule_rows(trials: pd.DataFrame) -> list[dict[str, Any]]:
    """Per ok trial that replayed the shape schedule: recompiles, time spent recompiling, the
    whole replay and the median latency of each distinct shape."""
    if "schedule_total_s" not in trials:
        return []
    done = trials[(trials["status"] == Status.OK.value) & trials["schedule_total_s"].notna()]
    rows = []
    for _, r in done.sort_values(["batch_size", "schedule_total_s"]).iterrows():
        labels = r.get("schedule_shapes")
        if not is_list(labels) or len(labels) == 0:
            labels = r["schedule_batch_sizes"]
        rows.append({
            "batch_size": int(r["batch_size"]), "label": r["label"],
            "trial_number": int(r["trial_number"]),
            "recompiles": None if pd.isna(r["schedule_recompiles"]) else int(r["schedule_recompiles"]),
            "recompile_s": None if pd.isna(r["schedule_recompile_s"]) else float(r["schedule_recompile_s"]),
            "replay_s": float(r["schedule_total_s"]),
            "latency_ms": {str(k): float(v) for k, v in zip(labels, r["schedule_latency_ms"])},
            "warmup_s": {str(k): float(v) for k, v in zip(labels, _listed(r, "schedule_warmup_s"))},
        })
    return rows


def _listed(row: pd.Series, column: str) -> list[Any]:
    value = row.get(column)
    return list(value) if is_list(value) else []


def schedule_table(rows: list[dict[str, Any]]) -> str:
    shapes = list(dict.fromkeys(k for r in rows for k in r["latency_ms"]))
    head = (f"{'batch':>5}  {'config':<40} {'recompiles':>10} {'recompile s':>11} "
            f"{'replay s':>8}  " + " ".join(f"{s + ' ms':>10}" for s in shapes))
    out = [head]
    for r in rows:
        cells = " ".join(f"{cell(r['latency_ms'].get(s), '{:.3f}'):>10}" for s in shapes)
        out.append(f"{r['batch_size']:>5}  {r['label']:<40} {cell(r['recompiles'], '{:d}'):>10} "
                   f"{cell(r['recompile_s'], '{:.1f}'):>11} {r['replay_s']:>8.1f}  {cells}")
    return "\n".join(out)


# Counts, bytes and ranks are integers in the Parquet; a column with an empty cell reads back
# as floats, and JSON says them as the Parquet does.
_INTEGERS = {f.name for f in schema.SCHEMA if pa.types.is_integer(f.type)}


def _plain(column: str, value: Any) -> Any:
    """A JSON value of a cell: a list as a list, an integer column's number as an int."""
    if is_list(value) and hasattr(value, "tolist"):
        return value.tolist()
    if column in _INTEGERS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def as_json(trials: pd.DataFrame, pareto: pd.DataFrame, meta: dict[str, Any],
            folder: Path | None = None) -> dict[str, Any]:
    keep = ["batch_size", "label", "backend", "mode", "dynamic", "latency_ms_p50",
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
    rows = [{k: _plain(k, v) for k, v in row.items()} for row in rows]
    sentences = verdicts(trials, folder, meta.get("storage"))
    # What the text says beside the tables: a batch size with no row on a front and why (none
    # with --all, whose rows are every trial), each failed trial, each finalist a
    # re-measurement left out, the trials on a slow core.
    return {"study": meta.get("study"), "workload": meta.get("workload"),
            "fingerprints": meta.get("fingerprints"), "trials": len(trials),
            "failed": int((trials["status"] != Status.OK.value).sum()),
            "pareto": rows, "verdicts": {str(k): v for k, v in sentences.items()},
            "unranked": {str(k): v for k, v in sorted(unranked(trials, pareto).items())},
            "throughput_off_front": {str(k): v for k, v in sorted(
                throughput_off_front(trials, pareto, folder).items())},
            "failures": failures(trials), "left_out": left_out(trials),
            "slow_core": slow_core(trials), "shape_schedule": schedule_rows(trials)}
