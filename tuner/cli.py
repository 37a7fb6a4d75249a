"""The command line: a thin layer over the library. Progress and logs go to stderr; results
(tables, or JSON with --json) to stdout."""

from __future__ import annotations

import functools
import json
import re
import signal
import sys
from pathlib import Path

import click

from tuner.errors import UserError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


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
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise UserError(f"cannot read duration {text!r}: use e.g. 8h, 30m, 1h30m or 90s")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def _split(values: tuple[str, ...]) -> list[str] | None:
    items = [v.strip() for value in values for v in value.split(",") if v.strip()]
    return items or None


def _batch_sizes(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        item = item.strip()
        if not re.fullmatch(r"\d+", item) or int(item) <= 0:
            raise UserError(f"batch size {item!r} is not a positive integer: "
                            "pass e.g. --batch-sizes 1,32")
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
@click.option("--min-calls", type=click.IntRange(min=3), default=50, show_default=True,
              help="Steady-state calls timed per trial, at least ...")
@click.option("--min-seconds", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="... and at least this many seconds.")
@click.option("--warm-cache", is_flag=True,
              help="Share one inductor cache across trials (compile times are then warm, not cold).")
@click.option("--studies-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("studies"), show_default=True)
@click.option("--storage", help="Optuna storage URL (e.g. postgresql://...); default: SQLite "
                                "in the study folder.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--fake-runner", is_flag=True, hidden=True, help="Tests only: made-up results.")
@user_errors
def search(model, name, device, dtype, image_size, channels_last, batch_sizes, backends, modes,
           dynamic, n_trials, budget, timeout, min_calls, min_seconds, warm_cache, studies_dir,
           storage, seed, as_json, quiet, fake_runner) -> None:
    """Search torch.compile settings for a model; write the study's Parquet files.

    Each trial runs in a fresh process (timeout, failures kept as data). Eager and inductor's
    default are measured first at every batch size, so every row has a speedup vs eager.
    Run the same command again to resume; Ctrl-C stops after the current trial.

    \b
    Examples:
      tuner search --model resnet18 --batch-sizes 1,32 --budget 8h
      tuner search --model resnet50 --dtype bfloat16 --mode default,reduce-overhead
      tuner search --model mypkg.models:make --device cpu --trials 10
    """
    from tuner import report, results
    from tuner.records import Protocol
    from tuner.runner import FakeRunner, ProcessRunner
    from tuner.space import build_space
    from tuner.study import Search, StudySpec
    from tuner.workload import Workload, validate

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # --model mymodule:factory from the current folder
    device = device or _default_device()
    workload = Workload(model=model, device=device, dtype=dtype, image_size=image_size,
                        channels_last=channels_last)
    validate(workload)
    space = build_space(device=device, batch_sizes=_batch_sizes(batch_sizes),
                        backends=_split(backends), modes=_split(modes),
                        dynamic=_dynamic(_split(dynamic)))
    protocol = Protocol(min_calls=min_calls, min_seconds=min_seconds, warm_cache=warm_cache)
    spec = StudySpec(name=name or _study_name(model, device), workload=workload, space=space,
                     protocol=protocol, root=studies_dir, storage=storage, n_trials=n_trials,
                     budget_s=parse_duration(budget) if budget else None, seed=seed)
    timeout_s = parse_duration(timeout)
    runner = FakeRunner() if fake_runner else ProcessRunner(
        timeout_s=timeout_s, cache_dir=spec.directory / "cache")

    def say(text: str) -> None:
        if not quiet:
            click.echo(text, err=True)

    search_ = Search(spec, runner, on_trial=lambda e: say(_progress_line(e)),
                     on_message=say, on_start=lambda n, c: say(f"  running {c.label} "
                                                               f"bs={c.batch_size} ..."))
    configs = len(space.configs())
    say(f"study {spec.name} in {spec.directory}: {configs} configs in the space, "
        f"target {n_trials or configs} trials; progress below, Ctrl-C stops after a trial")

    def on_sigint(signum, frame):
        if search_.stop_after_trial.is_set():
            search_.abort.set()
            say("aborting the trial in flight ...")
        else:
            search_.stop_after_trial.set()
            say("stopping after the current trial (Ctrl-C again to abandon it)")

    def on_sigterm(signum, frame):
        # Killed by a scheduler or `timeout`: abandon the trial, keep everything measured.
        search_.stop_after_trial.set()
        search_.abort.set()

    previous = signal.signal(signal.SIGINT, on_sigint), signal.signal(signal.SIGTERM, on_sigterm)
    try:
        summary = search_.run()
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    say(f"stopped: {summary.stop_reason}; {summary.new} new trials, {summary.measured} in the "
        f"study; files in {summary.directory}")
    trials, meta = results.read(summary.directory / results.TRIALS_FILE)
    pareto, _ = results.read(summary.directory / results.PARETO_FILE)
    if as_json:
        click.echo(json.dumps(report.as_json(trials, pareto, meta), indent=2))
    else:
        click.echo(report.render(trials, pareto, meta))
    if search_.stop_after_trial.is_set() or search_.abort.is_set():
        sys.exit(130)


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


if __name__ == "__main__":
    main()
