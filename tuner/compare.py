"""Studies side by side: the same model measured on different GPUs (or torch versions, or CPU).

Per batch size, each study's best config per objective with its numbers and their ratios to the
first study's, the speedup over each study's own eager baseline, and transfer: does one study's
fastest config stay on another's Pareto front, and how much slower than that study's own best
is it there. Differences that confound a hardware comparison (torch version, workload, cold vs
warm compile, kind of memory) are named.

Only trials that finished and were verified correct count, as for :func:`tuner.recommend`;
the Pareto front here is computed over those (latency, memory, warm-up within a batch size).
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tuner import results
from tuner.errors import UserError
from tuner.fingerprint import describe
from tuner.recommendation import GIB, OBJECTIVES, eligible, load, rank

_WORKLOAD_KEYS = ("model", "dtype", "image_size", "channels_last", "cudnn_benchmark", "seed")


@dataclasses.dataclass(frozen=True)
class StudyRef:
    tag: str  # A, B, C ... in the order given; ratios are against A
    name: str
    path: str
    workload: dict[str, Any]
    fingerprints: list[dict[str, Any]]
    warm_cache: bool | None
    memory_kind: str | None

    @property
    def where(self) -> str:
        return "; ".join(describe(fp) for fp in self.fingerprints) or "unknown machine"


@dataclasses.dataclass(frozen=True)
class Best:
    """One study's best config for one objective at one batch size; ``*_vs_a`` = this / A's."""

    batch_size: int
    objective: str
    study: str  # tag
    label: str
    config_key: str
    trial_number: int
    latency_ms_p50: float | None
    throughput_per_s: float | None
    peak_memory_bytes: float | None
    compile_s_cold: float | None
    time_to_steady_s: float | None
    speedup_vs_eager: float | None
    latency_vs_a: float | None = None
    throughput_vs_a: float | None = None
    memory_vs_a: float | None = None
    compile_vs_a: float | None = None


@dataclasses.dataclass(frozen=True)
class Transfer:
    """The fastest config of ``source``, looked up in ``target`` at the same batch size."""

    batch_size: int
    source: str
    target: str
    label: str
    config_key: str
    outcome: str  # on_front | off_front | failed | not_measured
    detail: str  # the failure status when failed
    target_latency_ms: float | None
    target_best_label: str | None
    target_best_latency_ms: float | None
    slowdown_vs_target_best: float | None  # target_latency / target best; 1.0 = it is the best


@dataclasses.dataclass(frozen=True)
class Point:
    label: str
    latency_ms_p50: float
    peak_memory_bytes: float | None


@dataclasses.dataclass(frozen=True)
class Comparison:
    studies: list[StudyRef]
    batch_sizes: list[int]
    best: list[Best]
    transfers: list[Transfer]
    confounders: list[str]
    fronts: dict[str, dict[int, list[Point]]]  # tag -> batch size -> Pareto points

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["fronts"] = {tag: {str(bs): [dataclasses.asdict(p) for p in points]
                                for bs, points in by_bs.items()}
                          for tag, by_bs in self.fronts.items()}
        return _clean(data)

    def render(self) -> str:
        """The text of ``tuner compare``."""
        lines = [f"comparing {len(self.studies)} studies (ratios are against study A)"]
        for s in self.studies:
            w = s.workload
            lines.append(f"  {s.tag}  {s.name}: {w.get('model')} {w.get('dtype')} on "
                         f"{w.get('device')}, measured on {s.where}")
        lines += [f"note: {c}" for c in self.confounders]
        for bs in self.batch_sizes:
            lines += ["", f"batch size {bs}: best config per objective", self._table(bs)]
            moves = [t for t in self.transfers if t.batch_size == bs]
            if moves:
                lines.append("transfer of each study's fastest config to the others:")
                lines += [f"  {_transfer_sentence(t)}" for t in moves]
        return "\n".join(lines)

    def _table(self, bs: int) -> str:
        headers = ["objective", "study", "config", "p50 ms", "items/s", "memory", "compile s",
                   "vs own eager"]
        body = []
        for b in (b for b in self.best if b.batch_size == bs):
            body.append([b.objective, b.study, b.label,
                         _with_ratio(b.latency_ms_p50, "{:.3f}", b.latency_vs_a),
                         _with_ratio(b.throughput_per_s, "{:,.0f}", b.throughput_vs_a),
                         _with_ratio(b.peak_memory_bytes, "bytes", b.memory_vs_a),
                         _with_ratio(b.compile_s_cold, "{:.1f}", b.compile_vs_a),
                         _cell(b.speedup_vs_eager, "{:.2f}x")])
        if not body:
            return "  (no study has a verified config at this batch size)"
        return _grid(headers, body)


def compare(paths: Sequence[str | Path]) -> Comparison:
    """Compare two or more studies (folders or Parquet files); A is the first."""
    if len(paths) < 2:
        raise UserError("give at least two studies to compare (folders or trials.parquet files)")
    if len(paths) > len(string.ascii_uppercase):
        raise UserError(f"at most {len(string.ascii_uppercase)} studies at once")
    loaded = []
    for tag, path in zip(string.ascii_uppercase, paths):
        df, meta, file = load(path)
        ok = eligible(df)
        kinds = ok["memory_kind"].dropna().unique()
        protocol = meta.get("protocol") or {}
        ref = StudyRef(tag=tag, name=str(meta.get("study") or file.parent.name), path=str(file),
                       workload=dict(meta.get("workload") or {}),
                       fingerprints=list(meta.get("fingerprints") or results.fingerprints(df)),
                       warm_cache=protocol.get("warm_cache"),
                       memory_kind=str(kinds[0]) if len(kinds) == 1 else None)
        loaded.append((ref, df, ok))

    sizes = sorted({int(b) for _, _, ok in loaded for b in ok["batch_size"].dropna().unique()})
    best: list[Best] = []
    transfers: list[Transfer] = []
    refs = [ref for ref, _, _ in loaded]
    fronts: dict[str, dict[int, list[Point]]] = {ref.tag: {} for ref in refs}
    for bs in sizes:
        at = {ref.tag: ok[ok["batch_size"] == bs] for ref, _, ok in loaded}
        tried = {ref.tag: df[df["batch_size"] == bs] for ref, df, _ in loaded}
        front = {tag: results.pareto(rows) if not rows.empty else rows for tag, rows in at.items()}
        for tag, rows in front.items():
            if not rows.empty:
                fronts[tag][bs] = [Point(str(r["label"]), float(r["latency_ms_p50"]),
                                         _num(r["peak_memory_bytes"])) for _, r in rows.iterrows()]
        for objective in OBJECTIVES:
            first: pd.Series | None = None
            for ref in refs:
                rows = at[ref.tag]
                if rows.empty:
                    continue
                row = rank(rows, objective).iloc[0]
                if ref.tag == "A":
                    first = row
                best.append(_best(bs, objective, ref.tag, row, first))
        for source in refs:
            for target in refs:
                if source.tag != target.tag and not at[source.tag].empty:
                    transfers.append(_transfer(bs, source.tag, target.tag, at, tried, front))
    return Comparison(refs, sizes, best, transfers, confounders(refs), fronts)


def confounders(studies: list[StudyRef]) -> list[str]:
    """Differences other than the hardware that make a comparison unfair, in words."""
    out = []

    def values(get) -> dict[str, Any]:
        return {s.tag: get(s) for s in studies}

    torch = values(lambda s: ", ".join(sorted({str(fp.get("torch")) for fp in s.fingerprints}))
                   or None)
    if len(set(torch.values())) > 1:
        out.append(f"torch differs ({_pairs(torch)}): part of any difference may come from torch, "
                   "not the hardware; compare studies made with the same torch to isolate the GPU")
    for key in _WORKLOAD_KEYS:
        seen = values(lambda s, k=key: s.workload.get(k))
        if len({repr(v) for v in seen.values()}) > 1:
            out.append(f"workload differs, {key}: {_pairs(seen)}: the studies measured "
                       "different things")
    cache = values(lambda s: None if s.warm_cache is None else ("warm" if s.warm_cache else "cold"))
    if len(set(cache.values()) - {None}) > 1:
        out.append(f"compile times were measured with different caches ({_pairs(cache)})")
    kind = values(lambda s: s.memory_kind)
    if len(set(kind.values()) - {None}) > 1:
        out.append(f"memory is not the same quantity ({_pairs(kind)}): cuda_reserved is device "
                   "memory, host_max_rss the process's resident memory")
    for s in studies:
        if len(s.fingerprints) > 1:
            out.append(f"study {s.tag} was measured on {len(s.fingerprints)} different machines")
    return out


def plot(comparison: Comparison, path: str | Path) -> Path:
    """Write a PNG: per batch size, each study's Pareto front, latency vs memory, every point
    labelled with its config and every front with its study, so no legend is needed."""
    from matplotlib.figure import Figure

    path = Path(path)
    sizes = comparison.batch_sizes
    if not sizes:
        raise UserError("nothing to plot: no study has a verified config")
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
        log_x = max(p.latency_ms_p50 for p in every) / max(
            min(p.latency_ms_p50 for p in every), 1e-9) > 20
        place = _Labeller(every, log_x)
        for s in comparison.studies:
            points, c = fronts[s.tag], colour[s.tag]
            if not points:
                continue
            ax.scatter([p.latency_ms_p50 for p in points],
                       [p.peak_memory_bytes / GIB for p in points], color=c, s=36, zorder=3)
            stair = _front_2d(points)
            ax.step([p.latency_ms_p50 for p in stair], [p.peak_memory_bytes / GIB for p in stair],
                    where="post", color=c, alpha=0.6, zorder=2)
            first = stair[0]
            ax.annotate(f"{s.tag}: {s.name}", (first.latency_ms_p50, first.peak_memory_bytes / GIB),
                        fontsize=9, fontweight="bold", color=c, xytext=(4, -13),
                        textcoords="offset points")
            for p in points:
                lift = place(p)
                ax.annotate(p.label, (p.latency_ms_p50, p.peak_memory_bytes / GIB), fontsize=7,
                            color=c, xytext=(4, lift), textcoords="offset points",
                            arrowprops=dict(arrowstyle="-", color=c, lw=0.5, alpha=0.5)
                            if lift > 3 else None)
        if log_x:
            ax.set_xscale("log")
        ax.set_title(f"batch size {bs}")
        ax.set_xlabel("median latency per call (ms), lower is better")
        ax.set_ylabel("memory while serving (GiB), lower is better")
        ax.grid(True, alpha=0.3)
    # One line per study, so long GPU and torch names are never cut off at the figure's edge.
    title = "\n".join(["Pareto fronts (latency, memory, warm-up) per batch size"] + [
        f"{s.tag} = {s.name}: {s.where.split(', host')[0]}" for s in comparison.studies])
    fig.suptitle(title, fontsize=10)
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot write plot {path}: {exc}") from exc
    return path


# -- pieces ------------------------------------------------------------------------------------
def _best(bs: int, objective: str, tag: str, row: pd.Series, first: pd.Series | None) -> Best:
    def ratio(column: str) -> float | None:
        if first is None or tag == "A":
            return None
        a, b = _num(first[column]), _num(row[column])
        return None if a in (None, 0) or b is None else b / a

    return Best(
        batch_size=bs, objective=objective, study=tag, label=str(row["label"]),
        config_key=str(row["config_key"]), trial_number=int(row["trial_number"]),
        latency_ms_p50=_num(row["latency_ms_p50"]), throughput_per_s=_num(row["throughput_per_s"]),
        peak_memory_bytes=_num(row["peak_memory_bytes"]), compile_s_cold=_num(row["compile_s_cold"]),
        time_to_steady_s=_num(row["time_to_steady_s"]), speedup_vs_eager=_num(row["speedup_vs_eager"]),
        latency_vs_a=ratio("latency_ms_p50"), throughput_vs_a=ratio("throughput_per_s"),
        memory_vs_a=ratio("peak_memory_bytes"), compile_vs_a=ratio("compile_s_cold"))


def _transfer(bs: int, source: str, target: str, at: dict[str, pd.DataFrame],
              tried: dict[str, pd.DataFrame], front: dict[str, pd.DataFrame]) -> Transfer:
    mine = rank(at[source], "latency").iloc[0]
    key, label = str(mine["config_key"]), str(mine["label"])
    theirs = at[target]
    best = rank(theirs, "latency").iloc[0] if not theirs.empty else None
    best_label = None if best is None else str(best["label"])
    best_ms = None if best is None else _num(best["latency_ms_p50"])
    same = theirs[theirs["config_key"] == key]
    if same.empty:
        # Not verified on the target: did it fail there, or was it never tried?
        there = tried[target][tried[target]["config_key"] == key]
        if not there.empty:
            status = ", ".join(sorted({str(s) for s in there["status"]}))
            if status == "ok":
                status = ("compiled nothing, ran eager" if results.ran_eager_only(there).all()
                          else "not verified correct")
            return Transfer(bs, source, target, label, key, "failed", status, None,
                            best_label, best_ms, None)
        return Transfer(bs, source, target, label, key, "not_measured", "", None,
                        best_label, best_ms, None)
    latency = float(same["latency_ms_p50"].min())
    on_front = key in set(front[target]["config_key"])
    return Transfer(bs, source, target, label, key, "on_front" if on_front else "off_front",
                    "", latency, best_label, best_ms,
                    latency / best_ms if best_ms else None)


def _transfer_sentence(t: Transfer) -> str:
    head = f"{t.source}'s {t.label} on {t.target}:"
    if t.target_best_latency_ms is None:
        theirs = f"{t.target} has no verified config"
    else:
        theirs = f"{t.target}'s best is {t.target_best_label} ({t.target_best_latency_ms:.3f} ms)"
    if t.outcome == "not_measured":
        return f"{head} not measured there; {theirs}"
    if t.outcome == "failed":
        return f"{head} did not pass there ({t.detail}); {theirs}"
    where = f"{'on' if t.outcome == 'on_front' else 'NOT on'} {t.target}'s Pareto front"
    if t.slowdown_vs_target_best is None or t.slowdown_vs_target_best <= 1.0:
        return f"{head} {where}, {t.target_latency_ms:.3f} ms, the fastest there"
    return (f"{head} {where}, {t.target_latency_ms:.3f} ms, {t.slowdown_vs_target_best:.2f}x "
            f"slower than {t.target}'s best, {t.target_best_label} "
            f"({t.target_best_latency_ms:.3f} ms)")


class _Labeller:
    """Vertical offsets (points) that stack the labels of points close to each other."""

    def __init__(self, points: list[Point], log_x: bool) -> None:
        self.log_x = log_x
        xs = [self._x(p) for p in points]
        ys = [p.peak_memory_bytes or 0.0 for p in points]
        self.x_span = (max(xs) - min(xs)) or 1.0
        self.y_span = (max(ys) - min(ys)) or 1.0
        self.placed: list[tuple[float, float]] = []

    def _x(self, p: Point) -> float:
        return math.log10(p.latency_ms_p50) if self.log_x else p.latency_ms_p50

    def __call__(self, p: Point) -> float:
        x, y = self._x(p) / self.x_span, (p.peak_memory_bytes or 0.0) / self.y_span
        near = sum(abs(x - px) < 0.2 and abs(y - py) < 0.04 for px, py in self.placed)
        self.placed.append((x, y))
        return 3 + 9 * near


def _front_2d(points: list[Point]) -> list[Point]:
    """The latency/memory non-dominated points, by latency: the staircase drawn per study."""
    out: list[Point] = []
    for p in sorted(points, key=lambda p: (p.latency_ms_p50, p.peak_memory_bytes)):
        if not out or p.peak_memory_bytes < out[-1].peak_memory_bytes:
            out.append(p)
    return out


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{tag} {v}" for tag, v in values.items())


def _with_ratio(value: float | None, fmt: str, ratio: float | None) -> str:
    text = _cell(value, fmt)
    return text if ratio is None else f"{text} ({ratio:.2f}x)"


def _cell(value: float | None, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "bytes":
        return f"{value / GIB:.2f} GiB"
    return fmt.format(value)


def _grid(headers: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    text = [headers] + body
    return "\n".join("  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in text)


def _num(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _clean(value: Any) -> Any:
    """NaN → None, numpy scalars → Python, for JSON."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
