"""``tuner compare`` for people: tables and transfer sentences (the plot of the fronts:
:mod:`tuner.render.comparison_plot`)."""

from __future__ import annotations

from tuner.data.comparison import Best, Comparison, StudyRef, Transfer
from tuner.data.noise import SAME, UNDECIDED, WITHIN
from tuner.render.plain import PLAIN
from tuner.render.plain import cell as plain_cell
from tuner.render.table import Column, grid, terminal_width, wrap
from tuner.render.text import cell, describe_fingerprint


def render(c: Comparison, width: int | None = None) -> str:
    """The text of ``tuner compare``, within ``width`` characters (None:
    :func:`tuner.render.table.terminal_width`) where its figures allow."""
    width = terminal_width() if width is None else width
    lines: list[str] = []

    def say(*texts: str) -> None:
        lines.extend(wrap(text, width) for text in texts)

    say(f"comparing {len(c.studies)} studies (ratios are against study A)")
    for s in c.studies:
        w = s.workload
        say(f"  {s.tag}  {s.name}: {w.get('model')} {s.ran('dtype')} on "
            f"{w.get('device')}, measured on {where(s)}")
    say("(median ms, median p99: per request, a finalist's median over its processes, "
        "any other config's own: trials.parquet's latency_ms_p50_median, "
        "latency_ms_p99_median)",
        f"(vs own plain: against the study's best plain mode at that batch size, {PLAIN}; "
        "beyond or within noise by its fresh processes' p50s)")
    say(*(f"note: {note}" for note in c.confounders))
    for bs in c.batch_sizes:
        say("", f"batch size {bs}: best config per objective")
        lines.append(_table(c, bs, width))
        say(*(f"  ({why})" for why in c.absent.get(bs, [])))
        moves = [t for t in c.transfers if t.batch_size == bs]
        if moves:
            say("transfer of each study's fastest config to the others:",
                *(f"  {_transfer_sentence(t)}" for t in moves),
                *(f"  {_knobs_sentence(t)}" for t in moves
                  if t.source < t.target and (t.knobs_shared or t.knobs_differ)))
    return "\n".join(lines)


def where(study: StudyRef) -> str:
    """The machines a study was measured on, in one line."""
    return "; ".join(describe_fingerprint(fp) for fp in study.fingerprints) or "unknown machine"


def _table(c: Comparison, bs: int, width: int) -> str:
    rows = [b for b in c.best if b.batch_size == bs]
    if not rows:
        return "  (no study has a verified config at this batch size)"
    # The shape schedule's whole time, where a study replayed one (the traffic objective).
    traffic = any(b.schedule_total_s is not None for b in rows)
    headers = ["objective", "study", "config", "median ms", "median p99", "items/s", "memory",
               "compile s", *(["traffic s"] if traffic else []), "vs own eager", "vs own plain"]
    body = [[b.objective, b.study, b.name or b.label,
             _with_ratio(b.latency_ms_p50_median, "{:.3f}", b.latency_vs_a),
             _with_ratio(b.latency_ms_p99_median, "{:.3f}", b.p99_vs_a),
             _with_ratio(b.throughput_per_s, "{:,.0f}", b.throughput_vs_a),
             _with_ratio(b.peak_memory_bytes, "bytes", b.memory_vs_a),
             _compile_cell(b),
             *([_with_ratio(b.schedule_total_s, "{:.3f}", b.schedule_vs_a)] if traffic else []),
             cell(b.speedup_vs_eager, "{:.2f}x"), plain_cell(b.vs_plain)] for b in rows]
    # the plain verdict is words, which wrap ("1.07x" over "within noise") where need be
    return grid([Column(h, text=i < 3 or h == "vs own plain") for i, h in enumerate(headers)],
                body, width)


def _transfer_sentence(t: Transfer) -> str:
    head = f"{t.source}'s {t.name or t.label} on {t.target}:"
    if not t.target_measured_batch_size:
        theirs = f"{t.target} did not measure batch size {t.batch_size}"
    elif t.target_best_latency_ms is None:
        theirs = f"{t.target} has no verified config at batch size {t.batch_size}"
    else:
        theirs = (f"{t.target}'s best is {t.target_best_name or t.target_best_label} "
                  f"({t.target_best_latency_ms:.3f} ms)")
    if t.outcome == "not_measured":
        return f"{head} {theirs}" if not t.target_measured_batch_size else (
            f"{head} not measured there; {theirs}")
    if t.outcome == "failed":
        return f"{head} did not pass there ({t.detail}); {theirs}"
    if t.outcome == "not_run":
        return f"{head} not run there: {t.detail}; {theirs}"
    where = f"{'on' if t.outcome == 'on_front' else 'NOT on'} {t.target}'s Pareto front"
    if t.slowdown_vs_target_best is None or t.slowdown_vs_target_best == 1.0:
        return f"{head} {where}, {t.target_latency_ms:.3f} ms, the fastest there"
    if t.slowdown_vs_target_best < 1.0:  # the best there is noise-aware (select.best)
        return (f"{head} {where}, {t.target_latency_ms:.3f} ms, below {t.target}'s best, "
                f"{t.target_best_name or t.target_best_label} "
                f"({t.target_best_latency_ms:.3f} ms), by median only: "
                f"{t.target} did not measure it faster than eager beyond noise"
                f"{_verdict_words(t)}")
    return (f"{head} {where}, {t.target_latency_ms:.3f} ms, {t.slowdown_vs_target_best:.2f}x "
            f"slower than {t.target}'s best, {t.target_best_name or t.target_best_label} "
            f"({t.target_best_latency_ms:.3f} ms){_verdict_words(t)}")


def _verdict_words(t: Transfer) -> str:
    """The noise rule's verdict of a transferred config against the best there, as the end of
    its sentence."""
    if t.verdict in (None, SAME):
        return ""
    if t.verdict == UNDECIDED:
        there = t.processes_there or 1
        counts = f"it ran in {there} process{'es' if there > 1 else ''} there, the best in " \
                 f"{t.best_processes or 1}"
        more = f", {t.verdict_processes} each would decide" if t.verdict_processes else ""
        return f"; undecided by noise ({counts}{more})"
    if t.verdict == WITHIN:
        return "; within noise of it"
    return f"; {t.verdict} beyond noise"


def _knobs_sentence(t: Transfer) -> str:
    """Which knob values the fastest configs of two studies share, and which they differ in."""
    head = f"{t.source}'s and {t.target}'s fastest"
    shared = ", ".join(f"{name}={_knob(value)}" for name, value in t.knobs_shared.items())
    if not t.knobs_differ:
        return f"{head} are the same config: {shared}"
    differ = ", ".join(f"{name} ({', '.join(f'{tag} {_knob(v)}' for tag, v in values.items())})"
                       for name, values in t.knobs_differ.items())
    return f"{head} share {shared or 'no knob value'}; differ in {differ}"


def _knob(value: object) -> str:
    return "-" if value is None else str(value)


def _compile_cell(b: Best) -> str:
    # Eager compiles nothing: its first call is only a slow call, not a compile time.
    if not b.compiled:
        return "-"
    return _with_ratio(b.compile_s_cold, "{:.1f}", b.compile_vs_a)


def _with_ratio(value: float | None, fmt: str, ratio: float | None) -> str:
    text = cell(value, fmt)
    # Two significant digits below 0.1: a CPU against a GPU is 0.0035x, not 0.00x.
    return text if ratio is None else f"{text} ({ratio:{'.2f' if ratio >= 0.1 else '#.2g'}}x)"
