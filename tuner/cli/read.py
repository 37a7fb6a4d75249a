"""The commands that read studies: ``show``, ``recommend``, ``compare`` and ``plot``."""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import click

from tuner.cli.errors import user_errors
from tuner.cli.options import (
    CONTEXT,
    GivenPath,
    format_option,
    json_option,
    option_of,
    output_format,
    recommend_options,
    studies_dir_option,
    study_argument,
    study_path,
)
from tuner.cli.output import echo_warnings


@contextlib.contextmanager
def recommend_errors() -> Iterator[None]:
    """What ``tuner.recommend`` refuses, in the words of the command line: its messages name
    the Python keywords (``batch_size``, ``max_compile_s``)."""
    from tuner.errors import UserError
    from tuner.use.recommend import BatchSizeNeeded, LimitsUnmet

    try:
        yield
    except BatchSizeNeeded as exc:
        raise UserError(exc.message("--batch-size N", "--objective throughput")) from None
    except LimitsUnmet as exc:
        raise UserError(exc.message(option_of)) from None


@click.command(context_settings=CONTEXT, short_help="Show a study's Pareto-optimal settings.")
@study_argument
@click.option("--all", "show_all", is_flag=True, help="Every trial, not just the Pareto set.")
@click.option("--importance", is_flag=True,
              help="Instead of the Pareto table: per batch size, the importance of each "
                   "searched parameter for latency, memory and warm-up (Optuna's PED-ANOVA, "
                   "over the verified rows of that batch size alone).")
@click.option("--wide", is_flag=True,
              help="Every column of the tables (p90, p99, stream, items/s, TFLOP/s, compile "
                   "and cache times ...), each as wide as it needs: pipe to `less -S`.")
@click.option("--columns", "column_keys", metavar="A,B,...",
              help="The tables' columns beside config and notes, by name: p50, p90, p99, "
                   "median, median-p99, rank, ci, spread, stream, median-stream, vs-eager, "
                   "items, tflops, of-peak, compile, warm, artifacts, warm-up, memory.")
@format_option("table", "json")
@json_option
@user_errors
def show(study, studies_dir, show_all, importance, wide, column_keys, fmt, as_json) -> None:
    """Show a study's Pareto-optimal settings per batch size.

    STUDY is a study folder, a study name under --studies-dir, or a trials.parquet file.

    The tables fit the terminal (COLUMNS where set; 120 columns when stdout is no terminal):
    per config, its p50, and where finalists were measured again, the median of their
    processes, their rank and the p50's 95 % interval; the speedup over eager, the warm-up
    and the memory. Long notes are numbered footnotes under each table. --wide shows every
    column, --columns the ones named.

    --importance answers "which knobs matter": for each batch size and each objective
    (latency, memory, warm-up), the importance of each parameter that took two values or more
    there (backend, mode, dynamic, dtype, channels_last, cudnn_benchmark, each opt_* inductor
    option), computed by optuna.importance.PedAnovaImportanceEvaluator from the rows that
    finished and matched eager. PED-ANOVA needs nothing beyond Optuna (fANOVA would need
    scikit-learn). It says how differently a parameter's values are spread among the best rows
    (the best 10 %, at least 5, at most half rounded up) than among all of them; each objective's
    importances sum to 1. It tells which knobs the best configs share, not by how much a knob
    moves latency: read the Pareto table (or tuner plot) for that. A batch size with fewer than
    4 such rows, or fewer than 2 parameters that varied, gets one line saying so.

    \b
    Examples:
      tuner show studies/h200-resnet18
      tuner show resnet18-cpu --format json | jq '.pareto[0]'
      tuner show studies/h200-resnet18 --json | jq '.vs_plain[]'
      tuner show studies/cpu-text-encoder --importance
      tuner show studies/cpu-text-encoder --importance --json | jq '.batch_sizes[0].importances'
    """
    from tuner.data import files
    from tuner.data.select import pareto
    from tuner.errors import UserError
    from tuner.render import study as report

    if show_all and importance:
        raise UserError("--all and --importance are two different views: give one of them")
    as_json = output_format(fmt, as_json) == "json"
    if wide and column_keys is not None:
        raise UserError("--wide shows every column and --columns the ones named: give one "
                        "of them")
    if importance and (wide or column_keys is not None):
        raise UserError(f"--{'wide' if wide else 'columns'} is for the tables of configs; "
                        "--importance has its own: drop one of them")
    from tuner.render.study.trial_table import columns_of
    from tuner.study.option_text import split

    columns = columns_of(split((column_keys,), "--columns") if column_keys is not None
                         else None, wide)
    path = study_path(study, studies_dir)
    trials, meta = files.read(path)
    folder = path if path.is_dir() else path.parent  # tuner confirm takes the folder
    if importance:
        from tuner.data.importance import importances
        from tuner.render import importance as view

        found = importances(trials)
        click.echo(json.dumps(view.as_json(found, meta, folder.name), indent=2) if as_json
                   else view.render(found, meta))
        return
    rows = trials if show_all else pareto(trials)
    if as_json:
        click.echo(json.dumps(report.as_json(trials, rows, meta, folder), indent=2))
    else:
        click.echo(report.render(trials, rows, meta, every_trial=show_all, folder=folder,
                                 columns=columns))


@click.command(context_settings=CONTEXT,
               short_help="Recommend a study's best verified config, within limits.")
@study_argument
@recommend_options
@click.option("--strict", is_flag=True,
              help="Refuse if the study was made on another GPU, driver or torch than this machine.")
@format_option("table", "json", "python",
               more=", python for a snippet to paste into production code")
@json_option
@user_errors
def recommend(study, studies_dir, batch_size, objective, max_vram_gb, max_compile_s,
              max_latency_ms, max_p99_ms, strict, fmt, as_json) -> None:
    """Recommend the best verified config of a study, within limits.

    Only trials that finished and matched eager are recommended, and a compiled config within
    noise of eager is not recommended over it. If nothing meets the limits, the error names the
    closest config and the limit it breaks. A study made on another machine gives a warning on
    stderr (--strict: an error).

    \b
    Examples:
      tuner recommend studies/resnet50-cuda --batch-size 32 --max-vram-gb 20 --max-compile-s 60
      tuner recommend studies/resnet50-cuda --batch-size 1 --max-p99-ms 5   # a tail target
      tuner recommend resnet18-cuda --objective throughput --json | jq .config
      tuner recommend studies/resnet18-cuda --batch-size 1 --format python > compile_model.py
    """
    from tuner.use.recommend import recommend as recommend_

    fmt = output_format(fmt, as_json)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with recommend_errors():
            rec = recommend_(study_path(study, studies_dir), batch_size=batch_size,
                             objective=objective, max_vram_gb=max_vram_gb,
                             max_compile_s=max_compile_s, max_latency_ms=max_latency_ms,
                             max_p99_ms=max_p99_ms, strict=strict)
    echo_warnings(caught)
    if fmt == "json":
        click.echo(json.dumps(rec.to_dict(), indent=2, default=str))
    elif fmt == "python":
        click.echo(rec.snippet(), nl=False)
    else:
        click.echo(rec.describe(option_of))  # limits as the options the user typed


@click.command(context_settings=CONTEXT, short_help="Compare studies side by side.")
@click.argument("studies", nargs=-1, required=True)
@studies_dir_option
@json_option
@click.option("--plot", "plot_file", type=GivenPath(dir_okay=False, path_type=Path),
              help="Also write a plot of the Pareto fronts: a panel per batch size, latency vs "
                   "memory, each study in its colour, each config a number named in a key. "
                   "PNG, or the format FILE's extension names (.svg, .pdf); FILE without one "
                   "gets .png.")
@user_errors
def compare(studies, studies_dir, as_json, plot_file) -> None:
    """Compare studies side by side, e.g. one model on two GPU models.

    STUDIES are two or more study folders, trials.parquet files or study names; the first is
    the reference (A) for ratios. Per batch size: each study's best config per objective,
    the speedup over its own eager, and whether one study's fastest config transfers to the
    others: the same compile, precision and memory format, found in each study whatever
    dimensions it searched (an inductor option at the value its mode runs without it counts
    as unset). Differences that confound the comparison (torch version, workload, shape
    schedule, kind of memory) are named, and a study with no verified config at a batch size
    is named under its table with why. The same study given twice, or studies none of which
    has a verified config, is an error.

    \b
    Examples:
      tuner compare studies/resnet50-h200 studies/resnet50-l4
      tuner compare h200/trials.parquet l4/trials.parquet cpu/ --plot fronts.png
      tuner compare studies/a studies/b --json | jq '.transfers'
    """
    from tuner.render.comparison import render
    from tuner.render.comparison_plot import plot
    from tuner.render.plots import need_matplotlib
    from tuner.use.compare import compare as compare_

    if plot_file is not None:
        need_matplotlib("tuner compare --plot")  # before reading the studies
    result = compare_([study_path(s, studies_dir) for s in studies])
    if plot_file is not None:
        written = plot(result, plot_file)  # the file's own name: .png added where it has none
        click.echo(f"plot written to {written}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(render(result))


@click.command(context_settings=CONTEXT,
               short_help="Plot a study's Pareto fronts and parameter importances.")
@study_argument
@click.option("--out", "out", type=GivenPath(path_type=Path), metavar="PATH",
              help="Where to write: a file ending in .png, .svg or .pdf gets every plot, "
                   "stacked (its folder must exist); any other path is a folder for the PNG "
                   "files (made if missing). Default: plots/ in the study's folder.")
@json_option
@user_errors
def plot(study, studies_dir, out, as_json) -> None:
    """Write the plots of a study, per batch size, and print the paths written (one a line,
    or with --json: the paths and why a batch size has no Pareto or importance plot).

    \b
    <study>-pareto-bs<N>.png      median latency against memory and against warm-up
                                  (compile + settle) for every verified row; the
                                  Pareto-optimal rows filled and numbered (a key names
                                  their configs), eager a red star
    <study>-importance-bs<N>.png  each parameter's importance per objective, as in
                                  tuner show --importance (Optuna's PED-ANOVA); only for
                                  batch sizes with at least 4 verified rows and 2 varied
                                  parameters

    With --out FILE.png (or .svg, .pdf) they go into that one file instead, one below the
    other in that order: the fronts by batch size, then the importances.

    STUDY is a study folder, a study name under --studies-dir, or a trials.parquet file.

    \b
    Examples:
      tuner plot studies/cpu-text-encoder
      tuner plot resnet18-cuda --out /tmp/plots
      tuner plot resnet18-cuda --out fronts.png
      tuner plot studies/resnet18-cuda --json | jq -r '.written[]'
    """
    from tuner.data import files
    from tuner.data.importance import importances
    from tuner.render.plots import no_fronts, write_plots

    trials, meta, path = files.load(study_path(study, studies_dir))
    found = importances(trials)
    written = write_plots(trials, meta, found, out or path.parent / "plots")
    missing = no_fronts(trials)
    if as_json:
        from tuner.data.json_contract import document

        click.echo(json.dumps(document({
            "study": meta.get("study") or path.parent.name,
            "written": [str(p) for p in written],
            "no_pareto": [{"batch_size": bs, "text": note} for bs, note in sorted(missing.items())],
            "no_importance": [{"batch_size": b.batch_size, "text": b.note} for b in found
                              if b.note is not None]}), indent=2))
        return
    for b in found:
        if b.batch_size in missing:
            click.echo(f"batch size {b.batch_size}: no Pareto plot: {missing[b.batch_size]}",
                       err=True)
        if b.note is not None:
            click.echo(f"batch size {b.batch_size}: no importance plot: {b.note}", err=True)
    click.echo("\n".join(str(p) for p in written))
