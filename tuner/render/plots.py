"""``tuner plot``: the plots of a study, per batch size, as PNG files in a folder or stacked in
one file. The Pareto front, as latency against memory and against warm-up (compile included),
and the parameter importances (:mod:`tuner.data.importance`) as bars, one panel per objective."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data.importance import IMPORTANCE_OBJECTIVES, BatchImportance
from tuner.data.select import GIB, LATENCY, eligible, left_out_counts, pareto
from tuner.domain.config import EAGER
from tuner.domain.records import Status
from tuner.errors import UserError
from tuner.words import plural

FRONT, OTHER, BASELINE = "#1f77b4", "#9a9a9a", "#d62728"
# (column, axis label, scale) of each panel of the front's figure, against latency.
_PANELS = (("peak_memory_bytes", "memory while serving (GiB), lower is better", GIB),
           ("time_to_steady_s", "warm-up: compile + settle (s), lower is better", 1.0))


# --out names one file where it ends in one of these; any other path is a folder.
FILE_SUFFIXES = (".png", ".svg", ".pdf")
_OTHER_IMAGES = (".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps", ".ps", ".gif", ".bmp")


@dataclass(frozen=True)
class _Drawing:
    """One figure: the file it gets in a folder, its size in inches, and what draws it into
    a figure (its own, or one panel of a file that holds them all)."""

    file_name: str
    size: tuple[float, float]
    draw: Callable[[Any], None]


def write_plots(trials: pd.DataFrame, meta: dict[str, Any], found: list[BatchImportance],
                out: Path) -> list[Path]:
    """Write the study's plots to ``out``; return the paths written. A folder (made if
    missing) gets ``<study>-pareto-bs<N>.png`` for each batch size with a verified row and
    ``<study>-importance-bs<N>.png`` for each one with importances; a file ending in .png,
    .svg or .pdf (its folder must exist) gets the same figures stacked top to bottom, per
    front of each batch size, then its importances."""
    drawings = _drawings(trials, meta, found)
    need_matplotlib("tuner plot")
    suffix = out.suffix.lower()
    if suffix in _OTHER_IMAGES:
        raise UserError(f"cannot write plots to {out}: tuner plot writes a .png, .svg or .pdf "
                        "file, or a folder of PNG files")
    if suffix in FILE_SUFFIXES:
        if not out.parent.is_dir():
            raise UserError(f"cannot write plot {out}: its folder {out.parent} does not exist")
        return [_save(_figure(drawings), out)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write plots to {out}: {exc.strerror or exc}") from exc
    return [_save(_figure([d]), out / d.file_name) for d in drawings]


def _drawings(trials: pd.DataFrame, meta: dict[str, Any],
              found: list[BatchImportance]) -> list[_Drawing]:
    """The study's figures: the front of each batch size with a verified row, then the
    importances of each one with some."""
    name = str(meta.get("study") or "study")
    # The file names' stem: a study name is a folder name, but the file's metadata is any text
    # (a file someone sent: "../../x" would write outside the folder).
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._-") or "study"
    ok = eligible(trials)
    if ok.empty:
        raise UserError(f"nothing to plot: study {name} has no row that finished and matched eager")
    front = set(pareto(trials)["trial_number"])
    drawings = []
    for bs, rows in ok.groupby("batch_size"):
        failed = int(((trials["batch_size"] == bs) & (trials["status"] != Status.OK.value)).sum())
        drawings.append(_front(name, int(bs), rows, front, failed,
                               f"{stem}-pareto-bs{int(bs)}.png"))
    return drawings + [_importance(name, b, f"{stem}-importance-bs{b.batch_size}.png")
                       for b in found if b.importances]


def _figure(drawings: list[_Drawing]) -> Any:
    """One figure of ``drawings``, one below the other."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(d.size[0] for d in drawings), sum(d.size[1] for d in drawings)),
                 layout="constrained")
    if len(drawings) == 1:
        drawings[0].draw(fig)
        return fig
    panels = fig.subfigures(len(drawings), 1, height_ratios=[d.size[1] for d in drawings],
                            squeeze=False)[:, 0]
    for panel, drawing in zip(panels, drawings):
        drawing.draw(panel)
    return fig


def need_matplotlib(command: str) -> None:
    """Raise a one-line :class:`UserError` naming ``command`` and how to install matplotlib
    where this Python cannot import it (a dependency, but an install can lack it)."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        raise UserError(f"{command} needs matplotlib, which this Python cannot import ({exc}): "
                        "pip install 'matplotlib>=3.7'") from None


def no_fronts(trials: pd.DataFrame) -> dict[int, str]:
    """Per batch size of ``trials`` with no Pareto plot (no eligible row), why not: how its
    rows ended."""
    ok = eligible(trials)
    notes = {}
    for bs, rows in trials[~trials["batch_size"].isin(ok["batch_size"])].groupby("batch_size"):
        notes[int(bs)] = f"no row finished and matched eager ({left_out_counts(rows)})"
    return notes


def front_figure(name: str, batch_size: int, rows: pd.DataFrame, front: set[int],
                 failed: int) -> Any:
    """Latency against memory and against warm-up: every verified row, the Pareto-optimal
    ones (over latency, memory and warm-up together) filled and marked with their trial number,
    eager a red star; a key below the panels names the configs of the numbered points."""
    return _figure([_front(name, batch_size, rows, front, failed, "")])


def _front(name: str, batch_size: int, rows: pd.DataFrame, front: set[int], failed: int,
           file_name: str) -> _Drawing:
    x = pd.to_numeric(rows[LATENCY], errors="coerce")  # as the front is chosen
    # The labelled points carry their trial number; the key below the panels names their configs.
    keyed = rows[x.notna() & (rows["trial_number"].isin(front) | (rows["backend"] == EAGER))]
    columns = max(1, min(3, 180 // (8 + max(map(len, keyed["label"]), default=0))))
    lines = -(-len(keyed) // columns)
    return _Drawing(file_name, (13, 5.5 + 0.15 * lines), lambda fig: _draw_front(
        fig, name, batch_size, rows, front, failed, columns))


def _draw_front(fig: Any, name: str, batch_size: int, rows: pd.DataFrame, front: set[int],
                failed: int, columns: int) -> None:
    from matplotlib.lines import Line2D

    x = pd.to_numeric(rows[LATENCY], errors="coerce")
    on_front = rows["trial_number"].isin(front)
    is_eager = rows["backend"] == EAGER
    keyed = rows[x.notna() & (on_front | is_eager)].sort_values("trial_number")
    axes = fig.subplots(1, len(_PANELS))
    for ax, (column, label, unit) in zip(axes, _PANELS):
        y = pd.to_numeric(rows[column], errors="coerce") / unit
        shown = x.notna() & y.notna()
        for mask, style in ((shown & ~on_front & ~is_eager,
                             dict(facecolors="none", edgecolors=OTHER, s=30, label="other")),
                            (shown & on_front & ~is_eager,
                             dict(color=FRONT, s=42, label="Pareto-optimal")),
                            (shown & is_eager & on_front,
                             dict(color=BASELINE, marker="*", s=150,
                                  label="eager (no compile), Pareto-optimal")),
                            (shown & is_eager & ~on_front,
                             dict(facecolors="none", edgecolors=BASELINE, marker="*", s=150,
                                  label="eager (no compile)"))):
            if mask.any():
                ax.scatter(x[mask], y[mask], zorder=3, **style)
        log_x = _spread(x[shown]) > 20
        if log_x:
            ax.set_xscale("log")
        if _spread(y[shown]) > 20:
            ax.set_yscale("log")
        where = (x[shown].map(math.log10) if log_x else x[shown])
        span = (where.max() - where.min()) or 1.0
        labelled = shown & (on_front | is_eager)
        for i, index in enumerate(rows.index[labelled]):
            # Labels in the right part of a panel are written leftwards, inside the panel.
            right = (where[index] - where.min()) / span > 0.6
            ax.annotate(f"#{rows.at[index, 'trial_number']}", (x[index], y[index]), fontsize=7,
                        xytext=(-5 if right else 5, 3 + 9 * (i % 3)), textcoords="offset points",
                        ha="right" if right else "left")
        ax.set_xlabel("median latency per call (ms), lower is better")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    handles = [Line2D([], [], linestyle="none", marker="*" if backend == EAGER else "o",
                      color=BASELINE if backend == EAGER else FRONT)
               for backend in keyed["backend"]]
    fig.legend(handles, [f"#{r.trial_number}  {r.label}" for r in keyed.itertuples()],
               loc="outside lower center", ncols=columns, fontsize=7, frameon=False,
               title="labelled points: trial number, config", title_fontsize=8)
    lost = f", {failed} failed (not shown)" if failed else ""
    fig.suptitle(f"{name}, batch size {batch_size}: {plural(len(rows), 'verified row')}{lost}; "
                 "Pareto-optimal over latency, memory and warm-up together", fontsize=10)


def _importance(name: str, b: BatchImportance, file_name: str) -> _Drawing:
    """One bar chart per objective: each parameter's importance, most important on top."""
    objectives = [o for o in IMPORTANCE_OBJECTIVES if o in b.importances]
    return _Drawing(file_name, (4.5 * len(objectives), 1.2 + 0.45 * len(b.parameters)),
                    lambda fig: _draw_importance(fig, name, b, objectives))


def _draw_importance(fig: Any, name: str, b: BatchImportance, objectives: list[str]) -> None:
    axes = fig.subplots(1, len(objectives), squeeze=False)[0]
    for ax, objective in zip(axes, objectives):
        shares = sorted(b.importances[objective].items(), key=lambda kv: kv[1])
        ax.barh([p for p, _ in shares], [v for _, v in shares], color=FRONT)
        for i, (_, v) in enumerate(shares):
            ax.annotate(f"{v:.2f}", (v, i), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=8)
        ax.set_xlim(0, 1.12)
        ax.set_title(f"{objective} ({IMPORTANCE_OBJECTIVES[objective]})", fontsize=9)
        ax.set_xlabel("importance (sums to 1)")
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{name}, batch size {b.batch_size}: parameter importance (Optuna PED-ANOVA, "
                 f"{plural(b.rows, 'verified row')})", fontsize=10)


def _spread(values: pd.Series) -> float:
    """Largest over smallest positive value: above 20, the axis is drawn in log scale."""
    positive = values[values > 0]
    return float(positive.max() / positive.min()) if len(positive) >= 2 else 1.0


def _save(fig: Any, path: Path) -> Path:
    try:
        fig.savefig(path, dpi=110, format=path.suffix[1:].lower() or None)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"cannot write plot {path}: {exc}") from exc
    return path
