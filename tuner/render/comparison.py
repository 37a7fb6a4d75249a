"""``tuner compare`` for people: tables, transfer sentences, and the plot of the fronts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

from tuner.data.comparison import Best, Comparison, Point, StudyRef, Transfer
from tuner.data.select import GIB
from tuner.errors import UserError
from tuner.render.text import cell, describe_fingerprint


def render(c: Comparison) -> str:
    """The text of ``tuner compare``."""
    lines = [f"comparing {len(c.studies)} studies (ratios are against study A)"]
    for s in c.studies:
        w = s.workload
        lines.append(f"  {s.tag}  {s.name}: {w.get('model')} {s.ran('dtype')} on "
                     f"{w.get('device')}, measured on {where(s)}")
    lines.append("(median ms, median p99: per request, a finalist's median over its processes, "
                 "any other config's own: trials.parquet's latency_ms_p50_median, "
                 "latency_ms_p99_median)")
    lines += [f"note: {note}" for note in c.confounders]
    for bs in c.batch_sizes:
        lines += ["", f"batch size {bs}: best config per objective", _table(c, bs)]
        lines += [f"  ({why})" for why in c.absent.get(bs, [])]
        moves = [t for t in c.transfers if t.batch_size == bs]
        if moves:
            lines.append("transfer of each study's fastest config to the others:")
            lines += [f"  {_transfer_sentence(t)}" for t in moves]
    return "\n".join(lines)


def where(study: StudyRef) -> str:
    """The machines a study was measured on, in one line."""
    return "; ".join(describe_fingerprint(fp) for fp in study.fingerprints) or "unknown machine"


def _table(c: Comparison, bs: int) -> str:
    rows = [b for b in c.best if b.batch_size == bs]
    if not rows:
        return "  (no study has a verified config at this batch size)"
    # The shape schedule's whole time, where a study replayed one (the traffic objective).
    traffic = any(b.schedule_total_s is not None for b in rows)
    headers = ["objective", "study", "config", "median ms", "median p99", "items/s", "memory",
               "compile s", *(["traffic s"] if traffic else []), "vs own eager"]
    body = [[b.objective, b.study, b.label,
             _with_ratio(b.latency_ms_p50_median, "{:.3f}", b.latency_vs_a),
             _with_ratio(b.latency_ms_p99_median, "{:.3f}", b.p99_vs_a),
             _with_ratio(b.throughput_per_s, "{:,.0f}", b.throughput_vs_a),
             _with_ratio(b.peak_memory_bytes, "bytes", b.memory_vs_a),
             _compile_cell(b),
             *([_with_ratio(b.schedule_total_s, "{:.3f}", b.schedule_vs_a)] if traffic else []),
             cell(b.speedup_vs_eager, "{:.2f}x")] for b in rows]
    return _grid(headers, body)


def plot(comparison: Comparison, path: str | Path) -> Path:
    """Write a PNG (or the format ``path``'s extension names, as matplotlib does: .svg, .pdf):
    per batch size, each study's Pareto front, latency vs memory, every point labelled with
    its config and every front with its study, so no legend is needed. Returns the path
    written: a path without an extension gets .png, as matplotlib would add it."""
    from tuner.render.plots import need_matplotlib

    need_matplotlib("tuner compare --plot")
    from matplotlib.figure import Figure

    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    sizes = [bs for bs in comparison.batch_sizes
             if any(comparison.fronts[s.tag].get(bs) for s in comparison.studies)]
    if not sizes:
        raise UserError("nothing to plot: no study has a verified config")
    memory = _memory_label(comparison.studies)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]
    colour = {s.tag: colours[i % len(colours)] for i, s in enumerate(comparison.studies)}
    fig = Figure(figsize=(6.5 * len(sizes), 5.5 + 0.3 * len(comparison.studies)),
                 layout="constrained")
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    for ax, bs in zip(axes, sizes):
        fronts = {s.tag: [p for p in comparison.fronts[s.tag].get(bs, []) if p.peak_memory_bytes]
                  for s in comparison.studies}
        every = [p for points in fronts.values() for p in points]
        if not every:
            continue
        log_x = max(p.latency_ms_p50_median for p in every) / max(
            min(p.latency_ms_p50_median for p in every), 1e-9) > 20
        place = _Labeller(every, log_x)
        for s in comparison.studies:
            points, c = fronts[s.tag], colour[s.tag]
            if not points:
                continue
            ax.scatter([p.latency_ms_p50_median for p in points],
                       [_memory(p) / GIB for p in points], color=c, s=36, zorder=3)
            stair = _front_2d(points)
            ax.step([p.latency_ms_p50_median for p in stair], [_memory(p) / GIB for p in stair],
                    where="post", color=c, alpha=0.6, zorder=2)
            first = stair[0]
            dx, ha = place.side(first)
            ax.annotate(f"{s.tag}: {s.name}", (first.latency_ms_p50_median, _memory(first) / GIB),
                        fontsize=9, fontweight="bold", color=c, xytext=(dx, -13),
                        textcoords="offset points", ha=ha)
            for p in points:
                lift = place(p)
                dx, ha = place.side(p)
                ax.annotate(p.label, (p.latency_ms_p50_median, _memory(p) / GIB), fontsize=7,
                            color=c, xytext=(dx, lift), textcoords="offset points", ha=ha,
                            arrowprops=dict(arrowstyle="-", color=c, lw=0.5, alpha=0.5)
                            if lift > 3 else None)
        if log_x:
            ax.set_xscale("log")
        ax.set_title(f"batch size {bs}")
        ax.set_xlabel("median latency per call (ms), lower is better")
        ax.set_ylabel(memory)
        ax.grid(True, alpha=0.3)
    # One line per study, so long GPU and torch names are never cut off at the figure's edge.
    title = "\n".join(["Pareto fronts (latency, memory, warm-up) per batch size"] + [
        f"{s.tag} = {s.name}: {where(s).split(', host')[0]}" for s in comparison.studies])
    fig.suptitle(title, fontsize=10)
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot write plot {path}: {exc}") from exc
    return path


def _memory_label(studies: list[StudyRef]) -> str:
    """The memory axis's title; where the studies measured different kinds of memory, it says
    so rather than calling them one quantity."""
    kinds = {s.memory_kind for s in studies} - {None}
    if len(kinds) < 2:
        return "memory while serving (GiB), lower is better"
    each = ", ".join(f"{s.tag} {s.memory_kind}" for s in studies if s.memory_kind)
    return f"memory while serving (GiB), lower is better\nnot one quantity: {each}"


def _transfer_sentence(t: Transfer) -> str:
    head = f"{t.source}'s {t.label} on {t.target}:"
    if not t.target_measured_batch_size:
        theirs = f"{t.target} did not measure batch size {t.batch_size}"
    elif t.target_best_latency_ms is None:
        theirs = f"{t.target} has no verified config at batch size {t.batch_size}"
    else:
        theirs = f"{t.target}'s best is {t.target_best_label} ({t.target_best_latency_ms:.3f} ms)"
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
                f"{t.target_best_label} ({t.target_best_latency_ms:.3f} ms), by median only: "
                f"{t.target} did not measure it faster than eager beyond noise")
    return (f"{head} {where}, {t.target_latency_ms:.3f} ms, {t.slowdown_vs_target_best:.2f}x "
            f"slower than {t.target}'s best, {t.target_best_label} "
            f"({t.target_best_latency_ms:.3f} ms)")


class _Labeller:
    """Vertical offsets (points) that stack the labels of points close to each other."""

    def __init__(self, points: list[Point], log_x: bool) -> None:
        self.log_x = log_x
        xs = [self._x(p) for p in points]
        ys = [p.peak_memory_bytes or 0.0 for p in points]
        self.x_min = min(xs)
        self.x_span = (max(xs) - min(xs)) or 1.0
        self.y_span = (max(ys) - min(ys)) or 1.0
        self.placed: list[tuple[float, float]] = []

    def side(self, p: Point) -> tuple[float, str]:
        """Offset and alignment of a label: to the right of its point, or to the left in the
        right part of the panel, where a label written rightwards runs past the panel's edge."""
        right = (self._x(p) - self.x_min) / self.x_span > 0.6
        return (-4.0, "right") if right else (4.0, "left")

    def _x(self, p: Point) -> float:
        return math.log10(p.latency_ms_p50_median) if self.log_x else p.latency_ms_p50_median

    def __call__(self, p: Point) -> float:
        x, y = self._x(p) / self.x_span, (p.peak_memory_bytes or 0.0) / self.y_span
        near = sum(abs(x - px) < 0.2 and abs(y - py) < 0.04 for px, py in self.placed)
        self.placed.append((x, y))
        return 3 + 9 * near


def _memory(p: Point) -> float:
    """The peak memory of a plotted point: the plot keeps only points that have one."""
    return cast(float, p.peak_memory_bytes)


def _front_2d(points: list[Point]) -> list[Point]:
    """The latency/memory non-dominated points, by latency: the staircase drawn per study."""
    out: list[Point] = []
    for p in sorted(points, key=lambda p: (p.latency_ms_p50_median, _memory(p))):
        if not out or _memory(p) < _memory(out[-1]):
            out.append(p)
    return out


def _compile_cell(b: Best) -> str:
    # Eager compiles nothing: its first call is only a slow call, not a compile time.
    if not b.compiled:
        return "-"
    return _with_ratio(b.compile_s_cold, "{:.1f}", b.compile_vs_a)


def _with_ratio(value: float | None, fmt: str, ratio: float | None) -> str:
    text = cell(value, fmt)
    # Two significant digits below 0.1: a CPU against a GPU is 0.0035x, not 0.00x.
    return text if ratio is None else f"{text} ({ratio:{'.2f' if ratio >= 0.1 else '#.2g'}}x)"


def _grid(headers: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    text = [headers] + body
    return "\n".join("  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in text)
