"""Which torch.compile knobs move latency, model by model: the candidates of
benchmarks/knob_catalogue.py as the recorded grids and screens measured them.

    python benchmarks/knobs.py [--root benchmarks] [--out benchmarks/results/knobs.md]

Reads every study under ``benchmarks/landscapes/*/`` (grids: every config of its space measured),
``benchmarks/sweeps/*/`` (sweeps: every cheap candidate once, one knob at a time, in one study)
and ``benchmarks/screens/*/*/`` (screens: one small study per candidate), as
``benchmarks/record_knobs.py`` records them (``scripts/gpu_landscape.sh`` on the GPU).

A knob's effect is the ratio of a config with it to the same config without it: everything else
equal, the knob at torch's own value (the settings recorded in the study's ``design.json``, or
this torch's for a study without one). In a grid, every pair of configs that differ only in the
knob is one ratio, and the cell gives their median; in a screen, the knob alone on its base
mode against that base, measured in the same arm; in a sweep, the knob alone (its held options
too) on reduce-overhead against that base at the same batch size, in the same study. Both for
the per-request p50
(``latency_ms_p50``) and for the cold compile (``compile_s_cold``). Only configs that finished
ok and matched eager count (``tuner.data.select.eligible``); a failed config with the knob is
shown by its status.

The report ends with ``knobs: K of N candidates move p50 by at least 2 % on at least one
model`` (N: the catalogue's candidates measured so far; moved: a cell's ratio at most 0.98 or
at least 1.02), and gives, per whole grid, ``gain over the best plain mode on NAME: latency X
%, cold compile Y x``: the grid's best config against the best of inductor's modes default,
reduce-overhead and max-autotune with torch's settings at the same batch size (the grid's own
rows; a mode the grid lacks from a screen of the same model, GPU and batch size, the median of
its rows there).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import platform
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

if __package__ in (None, ""):  # run as a script: the repository root holds `benchmarks`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import knob_plan  # noqa: E402
from benchmarks.knob_catalogue import CATALOGUE, TorchSettings  # noqa: E402
from benchmarks.knob_effects import (  # noqa: E402
    Effect,
    Study,
    effects,
    load_studies,
)
from tuner.data.derive import listed  # noqa: E402
from tuner.data.plain import PLAIN_MODES  # noqa: E402
from tuner.data.rows import config_of, num  # noqa: E402
from tuner.data.select import eligible  # noqa: E402
from tuner.errors import UserError  # noqa: E402

HERE = Path(__file__).resolve().parent
EXPLAINED = (
    "A knob's effect is the ratio of a config with it to the same config without it: "
    "everything else equal, the knob at torch's own value. In a grid (a landscape: every "
    "config of its space measured), every pair of configs that differ only in the knob is one "
    "ratio, and a cell gives their median and count; in a screen (one small study per "
    "candidate, an arm), the knob alone on its base mode against that base, measured in the "
    "same arm; in a sweep (every cheap candidate once, in one study), the knob alone on "
    "reduce-overhead against that base, at the same batch size in the same study. First the per-request p50 (`latency_ms_p50`; below 1 is faster), then the cold "
    "compile (`compile_s_cold`). Only configs that finished ok and matched eager count; where "
    "the config with the knob failed, the cell says how. A sweep measures its base at each "
    "batch size in several fresh processes and every other config once: the ratio is to the "
    "base's median, and a knob whose p50 lies between the base's fastest and slowest process "
    "is marked `noise` and moves nothing. A candidate moves p50 where one of its cells not so "
    "marked is at most 0.98 or at least 1.02; N counts the candidates measured so far.")
REPORT = HERE / "results" / "knobs.md"
MOVE = 0.02  # a knob moves p50 where a ratio is at most 0.98 or at least 1.02


Column = tuple[str, str, int]  # model, gpu, batch size


def columns(found: Iterable[Effect]) -> list[Column]:
    order = {m: i for i, m in enumerate(knob_plan.MODELS)}
    cols = {(e.model, e.gpu, e.batch_size) for e in found}
    return sorted(cols, key=lambda c: (order.get(c[0], len(order)), c[0], c[1], c[2]))


def cell(found: Sequence[Effect], kind: str) -> str:
    """A table cell: the median p50 ratio and cold-compile ratio, the pairs' count for a grid;
    a failure's status where no pair finished."""
    p50 = [e.p50_ratio for e in found if e.p50_ratio is not None]
    if not p50:
        return ", ".join(sorted({e.failed or "?" for e in found})) if found else "-"
    compile_ = [e.compile_ratio for e in found if e.compile_ratio is not None]
    text = f"{statistics.median(p50):.3f}"
    text += f", {statistics.median(compile_):.2f}x" if compile_ else ""
    text += ", noise" if all(e.within_noise for e in found if e.p50_ratio is not None) else ""
    return text + (f" ({len(p50)})" if kind == "grid" or len(p50) > 1 else "")


def cell_medians(found: Iterable[Effect]) -> dict[str, dict[str, list[float]]]:
    """Per candidate and model, the median p50 ratio of each of its cells (a kind of study, a
    GPU and a batch size), those within a sweep's noise floor left out."""
    groups: dict[tuple[str, str, str, str, int], list[float]] = {}
    for e in found:
        if e.p50_ratio is not None and not e.within_noise:
            groups.setdefault((e.candidate, e.model, e.kind, e.gpu, e.batch_size),
                              []).append(e.p50_ratio)
    out: dict[str, dict[str, list[float]]] = {}
    for (candidate, model, *_), ratios in groups.items():
        out.setdefault(candidate, {}).setdefault(model, []).append(statistics.median(ratios))
    return out


def moved(found: Iterable[Effect]) -> dict[str, set[str]]:
    """Per candidate, the models where one of its cells is at least 2 % from 1."""
    out: dict[str, set[str]] = {}
    for candidate, models in cell_medians(found).items():
        for model, medians in models.items():
            if any(abs(m - 1) >= MOVE - 1e-12 for m in medians):
                out.setdefault(candidate, set()).add(model)
    return out


def moved_text(found: Sequence[Effect]) -> str:
    """The candidates that moved p50, each with its models: faster where a cell is at most
    0.98, else slower."""
    medians = cell_medians(found)
    parts = []
    for name, models in sorted(moved(found).items()):
        where = ", ".join(f"{_short(m)} "
                          f"{'faster' if min(medians[name][m]) <= 1 - MOVE else 'slower'}"
                          for m in sorted(models))
        parts.append(f"{name} ({where})")
    return "; ".join(parts) or "none"


def knobs_line(found: Sequence[Effect]) -> str:
    measured = {e.candidate for e in found} & {c.name for c in CATALOGUE}
    moving = set(moved(found)) & measured
    return (f"knobs: {len(moving)} of {len(measured)} candidates move p50 by at least "
            f"{MOVE * 100:g} % on at least one model")


def effect_tables(found: Sequence[Effect]) -> list[str]:
    """A table per kind of study: a row per candidate, a column per model, GPU and batch size."""
    lines = []
    names = [c.name for c in CATALOGUE] + sorted({e.candidate for e in found} -
                                                 {c.name for c in CATALOGUE})
    for kind, title in (("sweep", "Sweeps: the knob alone on reduce-overhead, one study"),
                        ("screen", "Screens: the knob alone on its base mode"),
                        ("grid", "Grids: the median over the grid's pairs (their count)")):
        mine = [e for e in found if e.kind == kind]
        if not mine:
            continue
        cols = columns(mine)
        lines += [f"### {title}", "",
                  "| candidate | " + " | ".join(f"{_short(m)} bs{bs} {gpu.upper()}"
                                              for m, gpu, bs in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for name in names:
            row = [cell([e for e in mine if e.candidate == name and
                         (e.model, e.gpu, e.batch_size) == col], kind) for col in cols]
            if any(c != "-" for c in row):
                lines.append(f"| {name} | " + " | ".join(row) + " |")
        lines.append("")
    return lines


@dataclasses.dataclass(frozen=True)
class Measured:
    """A config's p50 and cold compile where it came from (a grid row or a screen's median)."""

    label: str
    p50_ms: float
    compile_s: float | None
    source: str


def plain_modes(grid: Study, screens: Sequence[Study], batch_size: int) -> list[Measured]:
    """The plain modes at ``batch_size``: the grid's rows, then any mode it lacks from the
    screens of the same model, GPU and dtype (the median of its rows there)."""
    out: dict[str, Measured] = {}
    ok = eligible(grid.trials)
    for _, row in ok[ok["batch_size"] == batch_size].iterrows():
        config = config_of(row)
        if grid.is_plain(config):
            out[str(config.mode)] = Measured(f"inductor:{config.mode}", float(row["latency_ms_p50"]),
                                             num(row["compile_s_cold"]), "grid")
    elsewhere: dict[str, list[tuple[float, float | None, str]]] = {}
    for study in screens:
        if (study.model, study.gpu, study.dtype) != (grid.model, grid.gpu, grid.dtype):
            continue
        ok = eligible(study.trials)
        for _, row in ok[ok["batch_size"] == batch_size].iterrows():
            config = config_of(row)
            if study.is_plain(config) and str(config.mode) not in out:
                elsewhere.setdefault(str(config.mode), []).append(
                    (float(row["latency_ms_p50"]), num(row["compile_s_cold"]), study.name))
    for mode, got in elsewhere.items():
        compiles = [c for _, c, _ in got if c is not None]
        out[mode] = Measured(f"inductor:{mode}", statistics.median(p for p, _, _ in got),
                             statistics.median(compiles) if compiles else None,
                             f"screen {got[0][2].split('/')[0]}, median of {len(got)}")
    return sorted(out.values(), key=lambda m: m.p50_ms)


def gains(grids: Sequence[Study], screens: Sequence[Study]) -> list[str]:
    """Per whole grid and batch size, its best config against the best plain mode."""
    lines = []
    for grid in grids:
        sizes = sorted(set(int(b) for b in grid.trials["batch_size"]))
        if not grid.whole:
            lines += [f"- {grid.name}: {len(grid.trials)} of {len(grid.space.configs())} configs "
                      "measured so far; its gain is given once the grid is whole.", ""]
            continue
        ok = eligible(grid.trials)
        for bs in sizes:
            here = ok[ok["batch_size"] == bs]
            modes = plain_modes(grid, screens, bs)
            name = grid.name if len(sizes) == 1 else f"{grid.name} bs{bs}"
            if here.empty or not modes:
                lines += [f"- {name}: no plain mode finished ok there; no gain to give.", ""]
                continue
            best = here.loc[pd.to_numeric(here["latency_ms_p50"]).idxmin()]
            top, best_ms = modes[0], float(best["latency_ms_p50"])
            compile_s = num(best["compile_s_cold"])
            times = f"{compile_s / top.compile_s:.2f}" if compile_s and top.compile_s else "?"
            lines += [f"gain over the best plain mode on {name}: latency "
                      f"{(top.p50_ms - best_ms) / top.p50_ms * 100:.1f} %, cold compile {times} x",
                      "", f"- the grid's best: `{best['label']}`, {best_ms:.4g} ms, cold compile "
                      f"{_seconds(compile_s)}",
                      *(f"- {m.label} with torch's settings: {m.p50_ms:.4g} ms, cold compile "
                        f"{_seconds(m.compile_s)} ({m.source})" for m in modes),
                      *(f"- inductor:{mode}: not measured at this model, GPU and batch size"
                        for mode in PLAIN_MODES if f"inductor:{mode}" not in
                        {m.label for m in modes}), ""]
    return lines


def noise(screens: Sequence[Study]) -> list[str]:
    """The configs a screen measured in several arms (eager, and each arm's base where it is
    the mode with torch's settings, whatever options it names): their spread."""
    groups: dict[tuple[str, str], list[float]] = {}
    for study in screens:
        ok = eligible(study.trials)
        for _, row in ok.iterrows():
            config = config_of(row)
            label = f"inductor:{config.mode} with torch's settings" \
                if study.is_plain(config) else str(row["label"])
            groups.setdefault((study.name.split("/")[0], f"{label}, bs{row['batch_size']}"),
                              []).append(float(row["latency_ms_p50"]))
    lines = ["| screen | config | arms | p50 median ms | spread: (max - min) / median |",
             "|---|---|---:|---:|---:|"]
    for (screen, label), p50 in sorted(groups.items()):
        if len(p50) > 1:
            mid = statistics.median(p50)
            lines.append(f"| {screen} | {label} | {len(p50)} | {mid:.4g} | "
                         f"{(max(p50) - min(p50)) / mid * 100:.1f} % |")
    return lines if len(lines) > 2 else ["No config is measured in two arms of a screen yet."]


def sweep_noise(sweeps: Sequence[Study]) -> list[str]:
    """Each sweep's noise floor: its base's p50 over fresh processes at each batch size."""
    lines = ["| sweep | base, batch size | processes | p50 ms, fastest-slowest | spread: (max - min) "
             "/ median |", "|---|---|---:|---:|---:|"]
    for study in sweeps:
        for _, row in eligible(study.trials).iterrows():
            p50 = [float(v) for v in row["latency_ms_p50_repeats"]] \
                if listed(row.get("latency_ms_p50_repeats")) else []
            if len(p50) > 1 and study.is_plain(config_of(row)):
                mid = statistics.median(p50)
                lines.append(f"| {study.name} | inductor:{row['mode']}, bs{row['batch_size']} | "
                             f"{len(p50)} | {min(p50):.4g}-{max(p50):.4g} | "
                             f"{(max(p50) - min(p50)) / mid * 100:.1f} % |")
    return lines if len(lines) > 2 else ["No sweep has measured its bases in several processes "
                                         "yet."]


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} s"


def _short(model: str) -> str:
    return model.rsplit(":", 1)[-1]


def catalogue_table(here: TorchSettings, found: Sequence[Effect]) -> list[str]:
    models: dict[str, set[str]] = {}
    for e in found:
        models.setdefault(e.candidate, set()).add(_short(e.model))
    lines = [f"| candidate | what it changes | the tuner's config (torch {here.torch}'s value "
             "first) | measured on |", "|---|---|---|---|"]
    for c in CATALOGUE:
        why = here.missing(c)
        mapping = f"`{c.mapping(here)}`" if why is None else f"not in torch {here.torch}: {why}"
        lines.append(f"| {c.name} | {c.what}{' (minutes of compile)' if c.slow else ''} | "
                     f"{mapping} | {', '.join(sorted(models.get(c.name, ()))) or '-'} |")
    return lines


def report(studies: Sequence[Study], here: TorchSettings, root: Path) -> str:
    grids = [s for s in studies if s.kind == "grid"]
    screens = [s for s in studies if s.kind == "screen"]
    sweeps = [s.name for s in studies if s.kind == "sweep"]
    found = [e for s in studies for e in effects(s)]
    line = knobs_line(found)
    data = sorted({f"{s.gpu.upper()} torch {_torch(s)}" for s in studies})
    unrecorded = [s.name for s in studies if not s.recorded_settings]
    lines = [
        "# knobs.py: which torch.compile knobs move latency, model by model", "",
        f"- **Date:** {datetime.date.today()}",
        f"- **Machine:** {platform.node()}, {os.cpu_count()} cores; no GPU is used: the page "
        "reads studies recorded on a GPU (`benchmarks/record_knobs.py`)",
        f"- **Data:** {len(grids)} grid(s) ({', '.join(s.name for s in grids) or 'none'}), "
        f"{len(sweeps)} sweep(s) ({', '.join(sweeps) or 'none'}), "
        f"{len({s.name.split('/')[0] for s in screens})} screen(s) "
        f"({', '.join(sorted({s.name.split('/')[0] for s in screens})) or 'none'}); "
        f"recorded on {', '.join(data) or 'nothing yet'}",
        "- **Command:** `python benchmarks/knobs.py`", f"- **Result:** `{line}`",
        f"- **Moved p50 by at least 2 %:** {moved_text(found)}",
        f"- **Still to record:** {still_to_record(studies)}", "",
        EXPLAINED, "",
        "Torch's settings are those recorded beside each study (`design.json`)"
        + (f"; {', '.join(unrecorded)} has none, so this torch's ({here.torch}) are used"
           if unrecorded else "") + ".", "",
        "## The candidates", "", *catalogue_table(here, found), "",
        "## Effects (ratio with the knob / without it: < 1 is faster; then cold compile)", "",
        *(effect_tables(found) or ["Nothing recorded yet.", ""]),
        "## Noise: a sweep's base in several processes", "",
        *sweep_noise([s for s in studies if s.kind == "sweep"]), "",
        "## Noise: one config measured in several arms of a screen", "", *noise(screens), "",
        "## What the search buys over the plain modes", "",
        "The grid's best is the fastest of configs each measured once, so noise makes it read a "
        "little fast: a gain within the noise above is none.", "",
        *(gains(grids, screens) or ["No grid is recorded yet.", ""]),
        *knob_plan.recording(root, studies_left(studies), floor_left=floor_left(studies)), "",
        line]
    return "\n".join(lines) + "\n"


def still_to_record(studies: Sequence[Study]) -> str:
    """The plan's models without a whole grid, sweep or screen yet (see "Recording")."""
    have = {s.model for s in studies if s.whole}
    missing = [_short(m) for m in knob_plan.MODELS if m not in have]
    return (", ".join(missing) + " (every unit of \"Recording\" below)") if missing else \
        "see \"Recording\" below"


def studies_left(studies: Sequence[Study]) -> dict[str, tuple[int, int]]:
    """Per study folder (landscapes/NAME, sweeps/NAME, screens/NAME/ARM): configs measured,
    configs it measures in all."""
    folders = {"grid": "landscapes/", "sweep": "sweeps/", "screen": "screens/"}
    return {folders[s.kind] + s.name: (len(set(s.trials["config_key"]) & s.keys()),
                                       len(s.keys())) for s in studies}


def floor_left(studies: Sequence[Study]) -> set[str]:
    """The sweeps (sweeps/NAME) whose bases still lack their noise floor."""
    return {f"sweeps/{s.name}" for s in studies if s.floor_left}


def _torch(study: Study) -> str:
    if "fp_torch" not in study.trials:
        return "?"
    versions = study.trials["fp_torch"].dropna()
    return str(versions.iloc[0]) if len(versions) else "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=HERE,
                        help="the folder holding landscapes/, sweeps/ and screens/ "
                        "(default benchmarks)")
    parser.add_argument("--out", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    try:
        here = TorchSettings.installed()
        studies = load_studies(args.root, here)
        if not studies:
            raise UserError(f"no grid, sweep or screen under {args.root}: record one "
                            "(scripts/gpu_landscape.sh)")
        text = report(studies, here, args.root)
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    args.out.write_text(text)
    print(text.rstrip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
