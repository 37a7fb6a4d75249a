"""``tuner plot``: the plots of a study, per batch size, as PNG files in a folder or stacked in
one file. The Pareto front, as latency against memory and against warm-up (compile included),
and the parameter importances (:mod:`tuner.data.importance`) as bars, one panel per objective."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data.importance import IMPORTANCE_OBJECTIVES, BatchImportance
from tuner.data.rows import NAME
from tuner.data.select import GIB, LATENCY, eligible, left_out_counts, pareto
from tuner.domain.config import EAGER
from tuner.domain.records import Status
from tuner.errors import UserError
from tuner.render.plot_numbers import Mark, Numbered, add_key, key_columns, key_height_in
from tuner.words import plural

FRONT, OTHER, BASELINE = "#1f77b4", "#9a9a9a", "#d62728"
# (column, axis label, scale) of each panel of the front's figure, against latency.
_PANELS = (("peak_memory_bytes", "memory while serving (GiB), lower is better", GIB),
           ("time_to_steady_s", "warm-up: compile + settle (s), lower is better", 1.0))
_FRONT_IN = (13.0, 5.6)  # the front's figure, inches, without its key
_KEY_FONT = 8.0
_OTHERS = "other verified configs (not numbered)"
DPI = 150


# --out names one file where it ends in one of these; any other path is a folder.
FILE_SUFFIXES = (".png", ".svg", ".pdf")
_OTHER_IMAGES = (".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps", ".ps", ".gif", ".bmp")


@dataclass(frozen=True)
class _Drawing:
    """One figure: the file it gets in a folder, its size in inches, and what draws it into
    a figure (its own, or one panel of a file that holds them all)."""

    file_name: str
    size: tuple[float, float]
    # draws into a figure; returns per panel the points to number once the figure is laid out
    draw: Callable[[Any], list[Numbered]]


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
        return [save(_figure(drawings), out)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write plots to {out}: {exc.strerror or exc}") from exc
    return [save(_figure([d]), out / d.file_name) for d in drawings]


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
    """One figure of ``drawings``, one below the other, its points numbered."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(max(d.size[0] for d in drawings), sum(d.size[1] for d in drawings)),
                 layout="constrained")
    if len(drawings) == 1:
        numbered = drawings[0].draw(fig)
    else:
        panels = fig.subfigures(len(drawings), 1, height_ratios=[d.size[1] for d in drawings],
                                squeeze=False)[:, 0]
        numbered = [n for panel, drawing in zip(panels, drawings) for n in drawing.draw(panel)]
    fig.draw_without_rendering()  # the layout, on which the numbers are placed
    for panel in numbered:
        panel.place()
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
    # The numbered points carry their trial number; the key below the panels names their configs.
    keyed = rows[x.notna() & (rows["trial_number"].isin(front) | (rows["backend"] == EAGER))]
    entries = [*_key(keyed), _OTHERS]  # the key's lines, at most
    columns = key_columns(entries, _FRONT_IN[0], _KEY_FONT)
    size = (_FRONT_IN[0], _FRONT_IN[1] + key_height_in(entries, columns, _KEY_FONT))
    return _Drawing(file_name, size, lambda fig: _draw_front(
        fig, name, batch_size, rows, front, failed, columns))


def _key(keyed: pd.DataFrame) -> list[str]:
    """The key's lines, by trial number: ``#5  default +freezing``, each config by its name
    (:func:`tuner.domain.naming.config_name`, the column the readers add)."""
    return [f"#{r['trial_number']}  {r[NAME]}"
            for _, r in keyed.sort_values("trial_number").iterrows()]


def _draw_front(fig: Any, name: str, batch_size: int, rows: pd.DataFrame, front: set[int],
                failed: int, columns: int) -> list[Numbered]:
    x = pd.to_numeric(rows[LATENCY], errors="coerce")
    on_front = rows["trial_number"].isin(front)
    is_eager = rows["backend"] == EAGER
    kinds = ((~on_front & ~is_eager, dict(facecolors="none", edgecolors=OTHER, s=30)),
             (on_front & ~is_eager, dict(color=FRONT, s=42)),
             (is_eager & on_front, dict(color=BASELINE, marker="*", s=150)),
             (is_eager & ~on_front, dict(facecolors="none", edgecolors=BASELINE, marker="*",
                                         s=150)))
    numbered = []
    for ax, (column, label, unit) in zip(fig.subplots(1, len(_PANELS)), _PANELS):
        y = pd.to_numeric(rows[column], errors="coerce") / unit
        shown = x.notna() & y.notna()
        for mask, style in kinds:
            if (shown & mask).any():
                ax.scatter(x[shown & mask], y[shown & mask], zorder=3, **style)
        if _spread(x[shown]) > 20:
            ax.set_xscale("log")
        if _spread(y[shown]) > 20:
            ax.set_yscale("log")
        ax.margins(x=0.08, y=0.1)  # room for the numbers of the outer points
        ax.set_xlabel("median latency per call (ms), lower is better")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        labelled = shown & (on_front | is_eager)
        numbered.append(Numbered(
            ax, [Mark(x[i], y[i], f"#{rows.at[i, 'trial_number']}", "black",
                      12.0 if is_eager[i] else 7.0) for i in rows.index[labelled].sort_values()],
            [(x[i], y[i]) for i in rows.index[shown & ~labelled]]))
    keyed = rows[x.notna() & (on_front | is_eager)].sort_values("trial_number")
    handles = [_handle(next(style for mask, style in kinds if mask[i])) for i in keyed.index]
    entries = _key(keyed)
    if (x.notna() & ~on_front & ~is_eager).any():
        handles.append(_handle(kinds[0][1]))
        entries.append(_OTHERS)
    add_key(fig, entries, "numbered points: trial number, config; filled: Pareto-optimal, "
            "star: eager (no compile)", columns, _KEY_FONT, handles)
    lost = f", {failed} failed (not shown)" if failed else ""
    fig.suptitle(f"{name}, batch size {batch_size}: {plural(len(rows), 'verified row')}{lost}; "
                 "Pareto-optimal over latency, memory and warm-up together", fontsize=11)
    return numbered


def _handle(style: dict[str, Any]) -> Any:
    """A legend's marker drawn as the scatter ``style`` draws the points."""
    from matplotlib.lines import Line2D

    hollow = style.get("facecolors") == "none"
    colour = style.get("edgecolors") if hollow else style.get("color")
    return Line2D([], [], linestyle="none", marker=style.get("marker", "o"),
                  markersize=11 if style.get("marker") == "*" else 7, color=colour,
                  markerfacecolor="none" if hollow else colour)


def _importance(name: str, b: BatchImportance, file_name: str) -> _Drawing:
    """One bar chart per objective: each parameter's importance, most important on top."""
    objectives = [o for o in IMPORTANCE_OBJECTIVES if o in b.importances]
    return _Drawing(file_name, (4.5 * len(objectives), 1.2 + 0.45 * len(b.parameters)),
                    lambda fig: _draw_importance(fig, name, b, objectives))


def _draw_importance(fig: Any, name: str, b: BatchImportance,
                     objectives: list[str]) -> list[Numbered]:
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
    return []


def _spread(values: pd.Series) -> float:
    """Largest over smallest positive value: above 20, the axis is drawn in log scale."""
    positive = values[values > 0]
    return float(positive.max() / positive.min()) if len(positive) >= 2 else 1.0


def save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` in the format its extension names; a one-line error where
    that fails."""
    try:
        fig.savefig(path, dpi=DPI, format=path.suffix[1:].lower() or None)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"cannot write plot {path}: {exc}") from exc
    return path
