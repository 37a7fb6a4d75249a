"""The command line: a thin layer over the library. Progress and logs go to stderr; results
(tables, or JSON with --json) to stdout."""

from __future__ import annotations

import contextlib
import functools
import json
import re
import signal
import sys
import warnings
from pathlib import Path

import click

from tuner.errors import UserError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
CONFIRM_REPEATS = 2  # tuner.finalists.DEFAULT_REPEATS, without importing pandas for --help


def user_errors(fn):
    """Library errors become one-line CLI errors with a non-zero exit, in one place."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise click.ClickException(str(exc)) from exc
    return wrapper


def parse_duration(text: str) -> float:
    """``8h``, ``30m``, ``1h30m``, ``90s`` or plain seconds → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise UserError(f"cannot read duration {text!r}: use e.g. 8h, 30m, 1h30m or 90s")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        # A zero budget would silently mean "no budget", a zero timeout kill every trial.
        raise UserError(f"duration {text!r} is not more than zero: use e.g. 8h, 30m or 90s")
    return seconds


def _split(values: tuple[str, ...]) -> list[str] | None:
    items = [v.strip() for value in values for v in value.split(",") if v.strip()]
    return items or None


def _positive_ints(text: str, what: str, option: str) -> list[int]:
    """``1,8,32`` -> [1, 8, 32]; anything else is a one-line error naming the option."""
    out = []
    for item in text.split(",") if text.strip() else []:
        item = item.strip()
        if not re.fullmatch(r"\d+", item) or int(item) <= 0:
            raise UserError(f"{what} {item!r} is not a positive integer: pass e.g. {option} 1,8,32")
        out.append(int(item))
    return out


def _dynamic(values: list[str] | None) -> list[bool | None] | None:
    if values is None:
        return None
    table = {"none": None, "auto": None, "true": True, "false": False}
    for v in values:
        if v.lower() not in table:
            raise UserError(f"--dynamic {v!r}: choose from none, true, false")
    return [table[v.lower()] for v in values]


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _study_name(model: str, device: str) -> str:
    base = model.split(":")[0].split(".")[-1] if ":" in model else model
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{base}-{device.split(':')[0]}")


# search, confirm and worker: the runner's pre-started trial processes (tuner.runner).
PRESTART = click.option(
    "--prestart/--no-prestart", default=False, show_default=True,
    help="Start the next trial's process (importing torch) while a trial runs, so the import "
         "costs no search time; still one process per trial. Off by default until measured on "
         "a GPU (README: pre-started trial processes).")

@click.group(context_settings=CONTEXT)
@click.version_option(package_name="tuner")
def main() -> None:
    """Find the torch.compile settings that pay off for your model on your hardware.

    \b
    tuner search --model resnet18 --batch-sizes 1,32     # measure, overnight if you like
    tuner show studies/resnet18-cuda                     # the Pareto-optimal settings
    """


@main.command(context_settings=CONTEXT)
@click.option("--model", required=True,
              help="torchvision classification model name (random weights), or "
                   "package.module:factory for your own (see README: factory contract).")
@click.option("--name", help="Study name; default MODEL-DEVICE. Same name = resume.")
@click.option("--device", default=None, help="cpu, cuda or cuda:N; default cuda if available.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True, help="Precision of model and inputs.")
@click.option("--image-size", type=int, default=224, show_default=True,
              help="Input height and width for torchvision models.")
@click.option("--channels-last", is_flag=True, help="Use the channels_last memory format.")
@click.option("--batch-sizes", default="1", show_default=True, help="Comma-separated, e.g. 1,8,32.")
@click.option("--shape-schedule", default="",
              help="Shapes replayed in order after each trial's steady state: batch sizes "
                   "(1,8,32,8) or, for a factory taking a sequence length, BATCHxSEQ_LEN "
                   "(8x128,8x512,8x64): recompiles, compile time and latency per shape on "
                   "the traffic you really have.")
@click.option("--backend", "backends", multiple=True,
              help="Restrict backends (comma-separated or repeated): eager (no compile), "
                   "inductor, cudagraphs, aot_eager, ... Default: eager, inductor, cudagraphs (GPU).")
@click.option("--mode", "modes", multiple=True,
              help="Restrict inductor modes: default, reduce-overhead, max-autotune, "
                   "max-autotune-no-cudagraphs, ... Default: all the device can use "
                   "(no max-autotune on CPU).")
@click.option("--dynamic", "dynamic", multiple=True,
              help="torch.compile dynamic= values to try: none, true, false. Default: false.")
@click.option("--trials", "n_trials", type=click.IntRange(min=1),
              help="Stop when the study holds this many measured trials (resume counts).")
@click.option("--budget", help="Wall-clock budget of this run, e.g. 8h or 45m.")
@click.option("--timeout", "timeout", default="30m", show_default=True,
              help="Kill a trial that has not finished after this long.")
@PRESTART
@click.option("--min-calls", type=click.IntRange(min=3), default=50, show_default=True,
              help="Steady-state calls timed per trial, at least ...")
@click.option("--min-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="... and at least this many seconds.")
@click.option("--warm-cache", is_flag=True,
              help="Share one inductor cache across trials (compile times are then warm, not cold).")
@click.option("--confirm", "confirm_repeats", type=click.IntRange(min=0), default=CONFIRM_REPEATS,
              show_default=True,
              help="After the search, measure each finalist (the Pareto set of each batch size) "
                   "this many more times, each in a fresh process: a warm compile, a start from "
                   "saved compile artifacts, and a latency interval that ranks configs within "
                   "noise. 0: skip (`tuner confirm` can do it later).")
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--storage", envvar="TUNER_STORAGE",
              help="Optuna storage URL (e.g. postgresql://...), or set TUNER_STORAGE to keep a "
                   "password out of `ps`; default: SQLite in the study folder.")
@click.option("--gpus", help="One worker per GPU on this study: GPU indices (0,1) or all. Each "
                             "worker's trials see only its GPU.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--fake-runner", is_flag=True, hidden=True, help="Tests only: made-up results.")
@click.option("--fake-delay", type=click.FloatRange(min=0), default=0.0, hidden=True,
              help="Tests only: seconds each --fake-runner trial takes.")
@user_errors
def search(model, name, device, dtype, image_size, channels_last, batch_sizes, shape_schedule,
           backends, modes,
           dynamic, n_trials, budget, timeout, prestart, min_calls, min_seconds, warm_cache,
           confirm_repeats, studies_dir, storage, gpus, seed, as_json, quiet, fake_runner,
           fake_delay) -> None:
    """Search torch.compile settings for a model; write the study's Parquet files.

    Each trial runs in a fresh process (timeout, failures kept as data). Eager and inductor's
    default are measured first at every batch size, so every row has a speedup vs eager.
    Run the same command again to resume; Ctrl-C stops after the current trial. Then the
    finalists are measured again (--confirm; after --budget too, since it bounds the search).

    \b
    Examples:
      tuner search --model resnet18 --batch-sizes 1,32 --budget 8h
      tuner search --model resnet50 --dtype bfloat16 --mode default,reduce-overhead
      tuner search --model mypkg.models:make --device cpu --trials 10
      tuner search --model resnet50 --gpus all --budget 8h   # one worker per GPU
    """
    from tuner.records import Protocol
    from tuner.runner import FakeRunner, ProcessRunner
    from tuner.space import build_space
    from tuner.study import Search, StudySpec
    from tuner.workload import Workload, parse_shapes, validate

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # --model mymodule:factory from the current folder
    if gpus is not None:
        from tuner.scaleout import choose_gpus, visible_gpus

        # The fake runner touches no GPU: tests (and benchmarks/trials_per_hour.py) run fleets
        # of it on machines without one.
        gpu_list = choose_gpus(gpus, visible_gpus() or (8 if fake_runner else 0))
        if device not in (None, "cuda"):
            raise UserError(f"--gpus shows each worker only its GPU, as cuda: drop --device {device}")
        device = "cuda"
    device = device or _default_device()
    workload = Workload(model=model, device=device, dtype=dtype, image_size=image_size,
                        channels_last=channels_last,
                        shape_schedule=parse_shapes(shape_schedule))
    validate(workload)
    space = build_space(device=device, batch_sizes=_positive_ints(batch_sizes, "batch size", "--batch-sizes"),
                        backends=_split(backends), modes=_split(modes),
                        dynamic=_dynamic(_split(dynamic)))
    protocol = Protocol(min_calls=min_calls, min_seconds=min_seconds, warm_cache=warm_cache)
    spec = StudySpec(name=name or _study_name(model, device), workload=workload, space=space,
                     protocol=protocol, root=studies_dir, storage=storage, n_trials=n_trials,
                     budget_s=parse_duration(budget) if budget else None, seed=seed,
                     confirm_repeats=confirm_repeats)
    timeout_s = parse_duration(timeout)
    runner = FakeRunner(delay_s=fake_delay) if fake_runner else ProcessRunner(
        timeout_s=timeout_s, cache_dir=spec.directory / "cache", prestart=prestart)

    def say(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    if gpus is not None:
        from tuner.scaleout import Fleet, pin

        def confirm_after() -> bool:  # once the workers are done: here, on the first GPU
            runner_ = FakeRunner(delay_s=fake_delay) if fake_runner else ProcessRunner(
                timeout_s=timeout_s, cache_dir=spec.directory / "cache", env=pin(gpu_list[0]),
                prestart=prestart)
            return _run_confirm(Search(spec, runner_, on_message=say), say, confirm_repeats)

        _run_fleet(Fleet(spec, gpu_list, timeout_s=timeout_s, quiet=quiet, prestart=prestart,
                         fake_runner=fake_runner, fake_delay_s=fake_delay), say, as_json,
                   then=confirm_after if confirm_repeats else None)
        return
    search_ = Search(spec, runner, on_trial=lambda e: say(_progress_line(e)),
                     on_message=say, on_start=lambda n, c: say(f"  running {c.label} "
                                                               f"bs={c.batch_size} ..."))
    _run_search(search_, say, as_json)


def _run_search(search_, say, as_json: bool) -> None:
    """Run a search in the foreground: Ctrl-C stops it after the trial in flight (twice:
    abandons that trial), SIGTERM abandons it; then the study's table or JSON on stdout."""
    spec = search_.spec
    configs = len(spec.space.configs())
    say(f"study {spec.name} in {spec.directory}: {configs} configs in the space, "
        f"target {spec.n_trials or configs} trials; progress below, Ctrl-C stops after a trial")

    with _signal_handlers(_stop_handlers(search_, say, "trial")):
        summary = search_.run()
    _finish(summary, say, as_json)
    if search_.stop_after_trial.is_set() or search_.abort.is_set():
        sys.exit(130)


def _run_fleet(fleet, say, as_json: bool, then=None) -> None:
    """Run one worker per GPU (tuner.scaleout.Fleet) in the foreground; Ctrl-C is passed on.
    ``then``, if the workers were not stopped, runs next (it returns True if it was stopped)."""
    spec, signals = fleet.spec, []
    configs = len(spec.space.configs())
    say(f"study {spec.name} in {spec.directory}: {configs} configs in the space, target "
        f"{spec.n_trials or configs} trials, one worker per GPU ({', '.join(map(str, fleet.gpus))}"
        "); each line starts with its GPU; Ctrl-C stops after the trials in flight")

    def forward(signum, frame):
        fleet.send_signal(signum)
        if signum == signal.SIGINT:
            say("aborting the trials in flight ..." if signals else
                "stopping after the trials in flight (Ctrl-C again to abandon them)")
        signals.append(signum)

    with _signal_handlers({signal.SIGINT: forward, signal.SIGTERM: forward}):
        summary = fleet.run()
    stopped = bool(signals) or summary.stop_reason == "stopped by the user"
    if then is not None and not stopped:
        stopped = then()
    _finish(summary, say, as_json)
    if stopped:
        sys.exit(130)


def _run_confirm(search_, say, repeats: int, redo: bool = False) -> bool:
    """Re-measure the finalists in the foreground (tuner.finalists): Ctrl-C stops after the
    process in flight (twice: abandons it), SIGTERM abandons it. True if it was stopped."""

    with _signal_handlers(_stop_handlers(search_, say, "re-measurement")):
        summary = search_.confirm(repeats, redo=redo)
    failed = f", {summary.failed} failed" if summary.failed else ""
    say(f"{summary.finalists} finalists; {summary.measured} re-measurements now{failed}"
        + ("; stopped by the user (the same command resumes)" if summary.stopped else ""))
    return summary.stopped


def _stop_handlers(search_, say, what: str):
    """Ctrl-C stops after the ``what`` in flight, a second Ctrl-C abandons it; SIGTERM (a
    scheduler, `timeout`) abandons it at once. Everything measured is kept either way."""

    def on_sigint(signum, frame):
        if search_.stop_after_trial.is_set():
            search_.abort.set()
            say(f"aborting the {what} in flight ...")
        else:
            search_.stop_after_trial.set()
            say(f"stopping after the current {what} (Ctrl-C again to abandon it)")

    def on_sigterm(signum, frame):
        search_.stop_after_trial.set()
        search_.abort.set()

    return {signal.SIGINT: on_sigint, signal.SIGTERM: on_sigterm}


@contextlib.contextmanager
def _signal_handlers(handlers):
    """Install signal handlers for the duration of a run, then put the previous ones back."""
    previous = {signum: signal.signal(signum, handler) for signum, handler in handlers.items()}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _finish(summary, say, as_json: bool) -> None:
    """How the run ended on stderr, then the study's table (or JSON) on stdout."""
    say(f"stopped: {summary.stop_reason}; {summary.new} new trials, {summary.measured} in the "
        f"study; files in {summary.directory}")
    _print_study(summary.directory, as_json)


def _print_study(directory: Path, as_json: bool) -> None:
    from tuner import report, results

    trials, meta = results.read(directory / results.TRIALS_FILE)
    pareto, _ = results.read(directory / results.PARETO_FILE)
    if as_json:
        click.echo(json.dumps(report.as_json(trials, pareto, meta), indent=2))
    else:
        click.echo(report.render(trials, pareto, meta))


def _progress_line(event) -> str:
    r, c = event.result, event.config
    where = f"[{event.number}/{event.target}]" if event.target else f"[{event.number}]"
    if r.ok:
        what = (f"p50 {r.latency_ms_p50:.3f} ms, warm-up {r.time_to_steady_s:.1f} s"
                + (" (noisy)" if r.noisy else ""))
    else:
        what = f"{r.status.value}: {r.message[:120]}"
    best = ", ".join(f"bs={bs}: {label} {ms:.3f} ms" for bs, (label, ms) in sorted(event.best.items()))
    eta = f" | ETA {_fmt_s(event.eta_s)}" if event.eta_s is not None else ""
    return f"{where} {c.label} bs={c.batch_size}: {what} | best {best or '-'}{eta}"


def _fmt_s(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


@main.command(context_settings=CONTEXT)
@click.argument("study")
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--all", "show_all", is_flag=True, help="Every trial, not just the Pareto set.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
@user_errors
def show(study, studies_dir, show_all, as_json) -> None:
    """Show a study's Pareto-optimal settings per batch size.

    STUDY is a study folder, a study name under --studies-dir, or a trials.parquet file.

    \b
    Examples:
      tuner show studies/h200-resnet18
      tuner show resnet18-cpu --json | jq '.pareto[0]'
    """
    from tuner import report, results

    path = Path(study)
    if not path.exists() and (studies_dir / study).exists():
        path = studies_dir / study
    trials, meta = results.read(path)
    front = trials if show_all else results.pareto(trials)
    if as_json:
        click.echo(json.dumps(report.as_json(trials, front, meta), indent=2))
    else:
        click.echo(report.render(trials, front, meta))


def _study_path(study: str, studies_dir: Path) -> Path:
    """A study folder, a Parquet file, or a study name under --studies-dir."""
    path = Path(study)
    if not path.exists() and (studies_dir / study).exists():
        return studies_dir / study
    return path


def _echo_warnings(caught) -> None:
    from tuner.recommendation import MismatchWarning

    for w in caught:
        if issubclass(w.category, MismatchWarning):
            click.echo(f"warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


@main.command(context_settings=CONTEXT)
@click.argument("study")
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1),
              help="Batch size to serve; needed when the study measured several "
                   "(except with --objective throughput, which may choose it).")
@click.option("--objective",
              type=click.Choice(["latency", "throughput", "memory", "warmup", "traffic"]),
              default="latency", show_default=True,
              help="What to optimise. traffic: the least time on the study's --shape-schedule, "
                   "recompiles included (dynamic shapes compared on your traffic).")
@click.option("--max-vram-gb", type=float,
              help="Most memory (GiB) the config may need, compile and warm-up included.")
@click.option("--max-compile-s", type=float, help="Longest first (compiling) call, in seconds.")
@click.option("--max-latency-ms", type=float, help="Slowest median latency per call allowed.")
@click.option("--strict", is_flag=True,
              help="Refuse if the study was made on another GPU, driver or torch than this machine.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "python"]), default="table",
              show_default=True, help="table for people, json for scripts, python for a snippet "
                                      "to paste into production code.")
@user_errors
def recommend(study, studies_dir, batch_size, objective, max_vram_gb, max_compile_s,
              max_latency_ms, strict, fmt) -> None:
    """Recommend the best verified config of a study, within limits.

    Only trials that finished and matched eager are recommended. If nothing meets the limits,
    the error names the closest config and the limit it breaks. A study made on another
    machine gives a warning on stderr (--strict: an error).

    \b
    Examples:
      tuner recommend studies/resnet50-cuda --batch-size 32 --max-vram-gb 20 --max-compile-s 60
      tuner recommend resnet18-cuda --objective throughput --format json | jq .config
      tuner recommend studies/resnet18-cuda --batch-size 1 --format python > compile_model.py
    """
    from tuner.recommendation import recommend as recommend_

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = recommend_(_study_path(study, studies_dir), batch_size=batch_size,
                         objective=objective, max_vram_gb=max_vram_gb,
                         max_compile_s=max_compile_s, max_latency_ms=max_latency_ms,
                         strict=strict)
    _echo_warnings(caught)
    if fmt == "json":
        click.echo(json.dumps(rec.to_dict(), indent=2, default=str))
    elif fmt == "python":
        click.echo(rec.snippet(), nl=False)
    else:
        click.echo(rec.describe())


@main.command(context_settings=CONTEXT)
@click.argument("studies", nargs=-1, required=True)
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG of the Pareto fronts (latency vs memory per batch size).")
@user_errors
def compare(studies, studies_dir, as_json, plot_file) -> None:
    """Compare studies side by side, e.g. one model on two GPU models.

    STUDIES are two or more study folders, trials.parquet files or study names; the first is
    the reference (A) for ratios. Per batch size: each study's best config per objective,
    the speedup over its own eager, and whether one study's fastest config transfers to the
    others. Differences that confound the comparison (torch version, workload) are named.

    \b
    Examples:
      tuner compare studies/resnet50-h200 studies/resnet50-l4
      tuner compare h200/trials.parquet l4/trials.parquet cpu/ --plot fronts.png
      tuner compare studies/a studies/b --json | jq '.transfers'
    """
    from tuner import compare as compare_

    result = compare_.compare([_study_path(s, studies_dir) for s in studies])
    if plot_file is not None:
        compare_.plot(result, plot_file)
        click.echo(f"plot written to {plot_file}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(result.render())


@main.command(context_settings=CONTEXT)
@click.argument("study")
@click.option("--repeats", type=click.IntRange(min=1), default=CONFIRM_REPEATS, show_default=True,
              help="Re-measurements each finalist should have in all. Those made before count, "
                   "so a second call only adds what is missing.")
@click.option("--redo", is_flag=True,
              help="Forget the finalists' earlier re-measurements and make --repeats new ones.")
@click.option("--timeout", "timeout", default="30m", show_default=True,
              help="Kill a re-measurement that has not finished after this long.")
@PRESTART
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--storage", envvar="TUNER_STORAGE",
              help="Optuna storage URL the study lives in (or set TUNER_STORAGE); default: the "
                   "study's SQLite file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--fake-runner", is_flag=True, hidden=True, help="Tests only: made-up results.")
@user_errors
def confirm(study, repeats, redo, timeout, prestart, studies_dir, storage, as_json, quiet,
            fake_runner) -> None:
    """Measure a study's finalists again, in fresh processes, and rank them within noise.

    The finalists are the Pareto-optimal configs of each batch size. Each gets --repeats more
    processes: the first compiles on the trial's kept cache (a warm compile) and saves the
    compile artifacts where torch can; the next starts from those artifacts on an empty cache;
    any more are warm again. The p50s of all processes give a spread and a 95% interval;
    configs whose intervals overlap share a rank. `tuner search` does this at its end
    (--confirm); this command does it for an existing study, or adds repeats.

    STUDY is a study folder, or a study name under --studies-dir (or in --storage).

    \b
    Examples:
      tuner confirm studies/resnet18-cuda
      tuner confirm resnet18-cuda --repeats 4      # two more each, after the default two
      tuner confirm studies/resnet18-cuda --redo   # all of them again, from scratch
    """
    from tuner.runner import FakeRunner, ProcessRunner
    from tuner.study import Search, join_spec

    path = Path(study)
    name, root = (path.name, path.parent) if path.is_dir() else (study, studies_dir)
    spec = join_spec(name, storage, root)
    runner = FakeRunner() if fake_runner else ProcessRunner(
        timeout_s=parse_duration(timeout), cache_dir=spec.directory / "cache",
        prestart=prestart)

    def say(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    stopped = _run_confirm(Search(spec, runner, on_message=say), say, repeats, redo=redo)
    _print_study(spec.directory, as_json)
    if stopped:
        sys.exit(130)


@main.command("worker", context_settings=CONTEXT)
@click.option("--study", "name", required=True,
              help="Name of the study to join; its workload and search space come with it.")
@click.option("--storage", envvar="TUNER_STORAGE",
              help="Optuna storage URL the study lives in, e.g. postgresql://user:pw@host/db, or "
                   "set TUNER_STORAGE to keep the password out of `ps`; default: the study's "
                   "SQLite file under --studies-dir.")
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True,
              help="Where this host writes the study's Parquet files and trial logs.")
@click.option("--gpu", type=click.IntRange(min=0),
              help="Run this worker's trials on this GPU only (an index among the GPUs this "
                   "process sees).")
@click.option("--trials", "n_trials", type=click.IntRange(min=1),
              help="Stop when the study holds this many measured trials (every worker's count).")
@click.option("--budget", help="Wall-clock budget of this worker, e.g. 8h or 45m.")
@click.option("--timeout", "timeout", default="30m", show_default=True,
              help="Kill a trial that has not finished after this long.")
@PRESTART
@click.option("--seed", type=int,
              help="Sampler seed; default: a random one, so that workers propose different configs.")
@click.option("--export-only", is_flag=True,
              help="Write the study's Parquet files under --studies-dir and exit, measuring nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--fake-runner", is_flag=True, hidden=True, help="Tests only: made-up results.")
@click.option("--fake-delay", type=click.FloatRange(min=0), default=0.0, hidden=True,
              help="Tests only: seconds each --fake-runner trial takes.")
@user_errors
def worker_(name, storage, studies_dir, gpu, n_trials, budget, timeout, prestart, seed,
            export_only, as_json, quiet, fake_runner, fake_delay) -> None:
    """Join an existing study and measure trials for it, from this host or another.

    Workers claim trials through the study's storage, so any number of them (tuner search,
    tuner worker, on any host) share one study without measuring a config twice. A worker
    that dies mid-trial stops sending heartbeats; another worker then fails its trial and
    measures that config again. Each worker writes the Parquet files under its --studies-dir.
    Workers do not measure the finalists again: run `tuner confirm` once they are done.

    \b
    Examples:
      export TUNER_STORAGE=postgresql://tuner:secret@db-host/tuner
      tuner search --model resnet50 --name r50 --trials 40   # host A: creates the study
      tuner worker --study r50 --gpu 0                       # host B: joins it
      tuner worker --study r50 --export-only                 # any host: just the Parquet files
    """
    import secrets

    from tuner.runner import FakeRunner, ProcessRunner
    from tuner.scaleout import choose_gpus, pin, visible_gpus
    from tuner.study import Search, export_study, join_spec, open_study

    spec = join_spec(name, storage, studies_dir, n_trials=n_trials,
                     budget_s=parse_duration(budget) if budget else None,
                     seed=secrets.randbelow(2**31) if seed is None else seed)
    if export_only:
        export_study(open_study(spec), spec)
        _print_study(spec.directory, as_json)
        return
    env = {}
    if gpu is not None:
        device = spec.workload.device
        if device != "cuda":
            raise UserError(f"study {name!r} runs on {device}; --gpu shows a worker's trials one "
                            "GPU, as cuda: drop --gpu" + (" (or start a study with --device cuda)"
                                                          if device.startswith("cuda") else ""))
        if not fake_runner:
            choose_gpus(str(gpu), visible_gpus())  # a one-line error for a GPU that is not there
        env = pin(gpu)
    runner = FakeRunner(delay_s=fake_delay) if fake_runner else ProcessRunner(
        timeout_s=parse_duration(timeout), cache_dir=spec.directory / "cache", env=env,
        prestart=prestart)
    prefix = "" if gpu is None else f"gpu{gpu} "

    def say(text: str) -> None:
        if not quiet:
            click.echo(prefix + text, err=True)

    search_ = Search(spec, runner, on_trial=lambda e: say(_progress_line(e)),
                     on_message=say, on_start=lambda n, c: say(f"  running {c.label} "
                                                               f"bs={c.batch_size} ..."))
    _run_search(search_, say, as_json)


if __name__ == "__main__":
    main()
