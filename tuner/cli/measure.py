"""The commands that measure: ``search``, ``worker`` and ``confirm``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tuner.cli import output
from tuner.cli.errors import user_errors
from tuner.cli.options import (
    CONFIRM_REPEATS,
    CONTEXT,
    SAMPLERS,
    GivenPath,
    Number,
    budget_option,
    compile_scope_option,
    compile_timeout_option,
    max_compile_s_option,
    max_vram_gb_option,
    output_options,
    prestart_option,
    retry_failed_option,
    seed_option,
    storage_option,
    studies_dir_option,
    timeout_option,
    trials_option,
    user_gave,
    with_space_file,
)
from tuner.domain.records import TrialProtocol
from tuner.errors import UserError
from tuner.launch import signals

if TYPE_CHECKING:
    from tuner.launch.runner import Runner
    from tuner.study.new_search import SearchOptions
    from tuner.study.plan import WorkerPlan


@click.command(context_settings=CONTEXT, short_help="Search torch.compile settings for a model.")
@click.option("--model", required=True,
              help="torchvision classification model name (random weights), or "
                   "package.module:factory for your own (see docs/your-model.md).")
@click.option("--name", help="Study name (a folder name); default MODEL-DEVICE, or "
                            "MODULE-FACTORY-DEVICE for package.module:factory. Same name = resume.")
@click.option("--device", default=None, help="cpu, cuda or cuda:N; default cuda if available.")
@click.option("--dtype", default="float32", show_default=True,
              help="Precision of model and inputs: float32, tf32 (float32 with TF32 matmuls, "
                   "CUDA only), bfloat16, float16; several (float32,bfloat16) are searched, and "
                   "each row's error against float32 eager is recorded.")
@click.option("--image-size", type=click.IntRange(min=1), default=224, show_default=True,
              help="Input height and width for torchvision models.")
@click.option("--channels-last", is_flag=False, flag_value="true", metavar="[BOOL,...]",
              help="The channels_last memory format (the model and its 4-D inputs); "
                   "--channels-last alone means true; false,true searches both. Default: "
                   "false,true for a torchvision model on CUDA without --space, false otherwise.")
@click.option("--cudnn-benchmark", default="true", show_default=True, metavar="BOOL,...",
              help="torch.backends.cudnn.benchmark (CUDA only); true,false searches both.")
@click.option("--inductor-option", "inductor_options", multiple=True, metavar="NAME=V1,V2",
              help="Search an option of torch._inductor.config (repeatable; inductor only), "
                   "e.g. epilogue_fusion=true,false or triton.cudagraphs=false,true; modes "
                   "combine with them. Each gets a Parquet column opt_NAME (dots as "
                   "underscores). List the default value first: the baseline uses it. Default "
                   "on CUDA without --space: coordinate_descent_tuning, epilogue_fusion, "
                   "freezing and shape_padding, each both ways; none: no option.")
@compile_scope_option
@click.option("--space", "space_file", type=GivenPath(dir_okay=False, path_type=Path),
              help="A TOML file that sets the dimensions, one key per option (batch_sizes, "
                   "backends, modes, dynamic, dtypes, channels_last, cudnn_benchmark, "
                   "compile_scopes, and an [inductor_options] table); an option given on the "
                   "command line wins. Any such file turns off what a CUDA search adds: where "
                   "neither it nor the command line gives them, no inductor option is searched "
                   "and channels_last is false; the other dimensions left out take their "
                   "option's default. See docs/search-space.md, \"A space file\".")
@click.option("--batch-sizes", default="1", show_default=True, help="Comma-separated, e.g. 1,8,32.")
@click.option("--shape-schedule",
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
              help="torch.compile dynamic= values to try: none, true, false (compiled "
                   "backends only: eager runs the model as it is). Default: false.")
@trials_option("Stop when the study holds this many measured trials (resume counts).")
@budget_option("Wall-clock budget of this run, e.g. 8h or 45m.")
@timeout_option
@compile_timeout_option
@prestart_option
@click.option("--min-calls", type=click.IntRange(min=3), default=50, show_default=True,
              help="Steady-state calls timed per trial, at least ...")
@click.option("--min-seconds", type=Number(min=0, max=TrialProtocol.max_seconds), default=2.0,
              show_default=True,
              help=f"... and at least this many seconds (at most {TrialProtocol.max_seconds:g}: "
                   f"a trial stops timing after {TrialProtocol.max_seconds:g} s whatever "
                   "--min-calls says).")
@click.option("--warm-cache", is_flag=True,
              help="Share one inductor cache across trials (compile times are then warm, not "
                   "cold; each row's cache_start says which).")
@click.option("--confirm", "confirm_repeats", default=CONFIRM_REPEATS, show_default=True,
              metavar="auto|N",
              help="After the search, run each finalist (the Pareto set of each batch size) "
                   "N more times, each a whole trial in a fresh process. A compiled config's "
                   "1st run compiles warm from its trial's cache, its 2nd starts from saved "
                   "compile artifacts on an empty cache, any later ones are warm again. The "
                   "95% latency interval, and the t-test that ranks configs within noise, are "
                   "taken over the search trial's p50 and these runs': N+1 values (1: two "
                   "values and no start from artifacts). auto: 2 to 6 runs, stopping once the "
                   "interval is within 5% of the p50; N: exactly N runs, failed ones counted; "
                   "0: skip (`tuner confirm` can do it later).")
@studies_dir_option
@storage_option("Optuna storage URL (e.g. postgresql://...), or set TUNER_STORAGE to keep a "
                "password out of `ps`; default: SQLite in the study folder.")
@click.option("--gpus", help="One worker per GPU on this study: GPU indices (0,1) or all. Each "
                             "worker's trials see only its GPU.")
@retry_failed_option
@seed_option("Sampler seed.", default=0)
@click.option("--sampler", type=click.Choice(SAMPLERS),
              help="How each batch size's study proposes configs after the baselines: tpe "
                   "(multivariate TPE; the default for a new study), nsga2, nsga3 (NSGA-II, "
                   "NSGA-III), gp (Gaussian process; needs scipy) or random (the control). "
                   "Stored with the study: a resume uses it.")
@click.option("--start-from", "start_from", multiple=True, metavar="STUDY",
              help="Before the sampler, and after the baselines, measure the configs of "
                   "STUDY's finalists and Pareto fronts that fit this space, in STUDY's order "
                   "of merit (repeatable): a study folder or a name under --studies-dir, "
                   "from any GPU or torch. Only batch sizes both search; each such row's "
                   "started_from names STUDY. Stored with the study: a resume gives the same "
                   "or none.")
@max_vram_gb_option("A limit the sampler learns (an Optuna constraint): configs that need more "
                    "memory (GiB, compile and warm-up included) are infeasible. They are "
                    "still measured and kept; stored with the study.")
@max_compile_s_option("A limit the sampler learns: configs whose first (compiling) call takes "
                      "longer are infeasible; stored with the study.")
@output_options
@user_errors
def search(as_json, quiet, **_) -> None:  # the others: search_options reads the context
    """Search torch.compile settings for a model; write the study's Parquet files.

    Each trial runs in its own process (timeouts and failures kept as data). Eager and
    inductor in each mode are measured first at every batch size, so every row has a speedup
    vs eager. On CUDA the space also holds four inductor options both ways and, for a
    torchvision model, channels_last, unless --space is given; a mode that compiles past
    --compile-timeout is not tried again at that batch size. With --start-from, the configs
    of another study's finalists and fronts that fit this space come next, in its order of
    merit. Then the batch size with the fewest trials gets the next trial, proposed by its own
    sampler (one Optuna study per batch size); failed configs, and those over --max-vram-gb or --max-compile-s, are infeasible
    points it learns from. The same command resumes; Ctrl-C stops after the current trial.
    Then the finalists are measured again (--confirm; after --budget too, since it bounds the
    search).

    \b
    Examples:
      tuner search --model resnet18 --batch-sizes 1,32 --budget 8h
      tuner search --model resnet50 --dtype bfloat16 --mode default,reduce-overhead
      tuner search --model mypkg.models:make --device cpu --trials 10
      tuner search --model resnet50 --gpus all --budget 8h   # one worker per GPU
      tuner search --model resnet50 --max-vram-gb 20 --max-compile-s 120 --sampler nsga2
      tuner search --model resnet50 --start-from studies/h100-resnet50   # on an H200
    """
    from tuner.study import new_search

    options = search_options(click.get_current_context())
    say = output.teller(quiet)
    new = new_search.prepare(options, say)
    with output.progress(say, live=not quiet) as callbacks:
        ended = new_search.run(new, say, callbacks)
    output.end(ended, say, as_json)


def search_options(ctx: click.Context) -> SearchOptions:
    """The options of a parsed ``tuner search`` command line (its context, current), as the
    search takes them, the --space file read. Also how benchmarks/sweep_search.py reads the
    same command line, so both build one search from it."""
    from tuner.study.new_search import SearchOptions

    p = ctx.params
    options = SearchOptions(
        model=p["model"], name=p["name"], device=p["device"], dtype=p["dtype"],
        image_size=p["image_size"], image_size_given=user_gave(ctx, "image_size"),
        channels_last=p["channels_last"], cudnn_benchmark=p["cudnn_benchmark"],
        cudnn_benchmark_given=user_gave(ctx, "cudnn_benchmark"),
        inductor_options=p["inductor_options"], compile_scopes=p["compile_scopes"],
        space_file=p["space_file"], batch_sizes=p["batch_sizes"],
        shape_schedule=p["shape_schedule"], backends=p["backends"], modes=p["modes"],
        dynamic=p["dynamic"], n_trials=p["n_trials"], budget_s=p["budget_s"],
        timeout_s=p["timeout_s"], compile_timeout_s=p["compile_timeout_s"],
        prestart=p["prestart"], min_calls=p["min_calls"], min_seconds=p["min_seconds"],
        warm_cache=p["warm_cache"], confirm_repeats=p["confirm_repeats"],
        studies_dir=p["studies_dir"], storage=p["storage"], gpus=p["gpus"],
        retry_failed=p["retry_failed"], seed=p["seed"], sampler=p["sampler"],
        max_vram_gb=p["max_vram_gb"], max_compile_s=p["max_compile_s"], quiet=p["quiet"],
        start_from=p["start_from"])
    if p["space_file"] is not None:
        options = dataclasses.replace(options, from_file=with_space_file(p["space_file"]))
    return options


@click.command("worker", context_settings=CONTEXT,
               short_help="Join an existing study and measure trials for it.")
@click.option("--study", "name", required=True,
              help="Name of the study to join; its workload and search space come with it.")
@storage_option("Optuna storage URL the study lives in, e.g. postgresql://user:pw@host/db, or set "
                "TUNER_STORAGE to keep the password out of `ps`; default: the study's SQLite "
                "file under --studies-dir.")
@studies_dir_option
@click.option("--gpu", type=click.IntRange(min=0),
              help="Run this worker's trials on this GPU only (an index among the GPUs this "
                   "process sees).")
@trials_option("Stop when the study holds this many measured trials (every worker's count).")
@budget_option("Wall-clock budget of this worker, e.g. 8h or 45m.")
@timeout_option
@prestart_option
@seed_option("Sampler seed; default: a random one, so that workers propose different configs.")
@click.option("--export-only", is_flag=True,
              help="Write the study's Parquet files under --studies-dir and exit, measuring nothing.")
@retry_failed_option
@output_options
@user_errors
def worker(name, storage, studies_dir, gpu, n_trials, budget_s, timeout_s, prestart, seed,
           export_only, retry_failed, as_json, quiet) -> None:
    """Join an existing study and measure trials for it, from this host or another.

    Workers claim trials through the study's storage, so any number of them (tuner search,
    tuner worker, on any host) share one study without measuring a config twice. A worker
    that dies mid-trial stops sending heartbeats; another worker then fails its trial and
    measures that config again. Trials are measured as the study says (its --min-seconds,
    --compile-timeout, ...). Each worker writes the Parquet files under its --studies-dir.
    Workers do not measure the finalists again: run `tuner confirm` once they are done.

    \b
    Examples:
      export TUNER_STORAGE=postgresql://tuner:secret@db-host/tuner
      tuner search --model resnet50 --name r50 --trials 40   # host A: creates the study
      tuner worker --study r50 --gpu 0                       # host B: joins it
      tuner worker --study r50 --export-only                 # any host: just the Parquet files
    """
    import secrets

    from tuner.launch.runner import LaunchSettings
    from tuner.study.plan import WorkerPlan
    from tuner.study.preflight import check_study_option

    check_study_option(name)
    if export_only:
        given = _given(click.get_current_context(), "gpu", "n_trials", "budget_s", "timeout_s",
                       "prestart", "retry_failed", "seed")
        if given:
            raise UserError(f"--export-only measures nothing: drop {' and '.join(given)}")
    plan = WorkerPlan(study=name, root=str(studies_dir),
                      launch=LaunchSettings(timeout_s=timeout_s, prestart=prestart, gpu=gpu),
                      seed=secrets.randbelow(2**31) if seed is None else seed,
                      n_trials=n_trials, budget_s=budget_s, quiet=quiet,
                      retry_failed=retry_failed)
    run_worker(plan, storage, as_json, export_only=export_only, live=not quiet)


def run_worker(plan: WorkerPlan, storage: str | None, as_json: bool, export_only: bool = False,
               runner: Runner | None = None,
               stop_cause: Callable[[], str | None] | None = None, live: bool = False) -> None:
    """One worker on an existing study: ``tuner worker``, and each worker of a fleet, which
    passes the ``runner`` it made while it waited for the study (closed here in all cases)
    and its ``stop_cause`` (Search.stop_cause). ``live``: a progress bar where stderr is a
    terminal (``tuner worker``; a fleet's workers share the terminal, so they print lines)."""
    from tuner.study import foreground
    from tuner.study.joined import join_worker

    say = output.teller(plan.quiet,
                        prefix="" if plan.launch.gpu is None else f"gpu{plan.launch.gpu} ")
    with output.progress(say, live=live and not export_only) as callbacks:
        search_ = join_worker(plan, storage, say, callbacks, export_only=export_only,
                              runner=runner, stop_cause=stop_cause)
        ended = None if export_only else foreground.run_search(search_, say)
    if ended is None:
        output.print_study(search_.spec.layout, as_json)
        return
    output.end(ended, say, as_json)


@click.command(context_settings=CONTEXT,
               short_help="Measure a study's finalists again and rank them within noise.")
@click.argument("study")
@click.option("--repeats", default=CONFIRM_REPEATS, show_default=True, metavar="auto|N",
              help="Re-measurements each finalist should have in all: N, or auto (2 to 6, until "
                   "the 95% interval is within 5% of the p50). Those made before count, so a "
                   "second call only adds what is missing.")
@click.option("--redo", is_flag=True,
              help="Forget the finalists' earlier re-measurements and make --repeats new ones.")
@timeout_option
@prestart_option
@studies_dir_option
@storage_option("Optuna storage URL the study lives in (or set TUNER_STORAGE); default: the "
                "study's SQLite file.")
@output_options
@user_errors
def confirm(study, repeats, redo, timeout_s, prestart, studies_dir, storage, as_json,
            quiet) -> None:
    """Measure a study's finalists again, in fresh processes, and rank them within noise.

    The finalists are the Pareto-optimal configs of each batch size. Each is measured in fresh
    processes until it has --repeats in all, those of earlier runs included: the first compiles on the trial's kept cache (a warm compile) and saves the
    compile artifacts where torch can; the next starts from those artifacts on an empty cache;
    any more are warm again. The p50s of all processes give a spread and a 95% interval, and
    a t-test over them ranks the configs: equal ranks are within noise. The median of those
    p50s then stands for the config: the front, the ranking and `tuner recommend` use it. A trial that joins the front
    when a finalist turns out slower is measured again in turn, and so is a trial measured on a
    slow host core that could be on the front. `tuner search` does this at its end
    (--confirm); this command does it for an existing study, or adds repeats.

    STUDY is a study folder, or a study name under --studies-dir (or in --storage).

    \b
    Examples:
      tuner confirm studies/resnet18-cuda
      tuner confirm resnet18-cuda --repeats 8      # 8 each in all, those made before included
      tuner confirm studies/resnet18-cuda --redo   # all of them again, from scratch
    """
    from tuner.study import foreground
    from tuner.study.joined import join_confirm

    say = output.teller(quiet)
    search_, plan = join_confirm(study, repeats, studies_dir, storage, timeout_s, prestart, redo,
                                 say)
    received: list[int] = []
    stopped = foreground.run_confirm(search_, say, plan, redo=redo, received=received)
    output.print_study(search_.spec.layout, as_json)
    if stopped:
        sys.exit(signals.exit_code(received))


def _given(ctx: click.Context, *names: str) -> list[str]:
    """The options among ``names`` (parameter names) that the user gave, as they are spelled
    on the command line."""
    return [param.opts[0] for param in ctx.command.params
            if param.name in names and user_gave(ctx, param.name)]
