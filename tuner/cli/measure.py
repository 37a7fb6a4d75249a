"""The commands that measure: ``search``, ``worker`` and ``confirm``."""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tuner.cli import run
from tuner.cli.options import (
    CONFIRM_REPEATS,
    CONTEXT,
    EMPTY_STUDY,
    SAMPLERS,
    Duration,
    GivenPath,
    Number,
    bool_values,
    compile_timeout_option,
    dynamic_values,
    json_option,
    max_compile_s_option,
    max_vram_gb_option,
    option_values,
    positive_ints,
    prestart_option,
    quiet_option,
    split,
    storage_option,
    studies_dir_option,
    teller,
    timeout_option,
    user_errors,
    user_gave,
    with_space_file,
)
from tuner.errors import UserError
from tuner.launch import signals
from tuner.domain.records import TrialProtocol
from tuner.domain.space_file import SpaceFile
from tuner.domain.workload import check_cudnn_benchmark, check_model_spelling
from tuner.trial.prebuild import PrebuildRequest

if TYPE_CHECKING:
    from tuner.launch.runner import Runner

SEED = click.IntRange(0, 2**32 - 1)  # what numpy, under Optuna's sampler, accepts

# Where the study holds that eager failed (tuner.study.broken), a resume skips the batch size.
retry_failed_option = click.option(
    "--retry-failed", is_flag=True,
    help="Measure eager again at the batch sizes where the study holds that it crashed, ran "
         "out of memory or hit a CUDA error (a resume skips them otherwise): after fixing the "
         "model, or freeing the GPU.")


@click.command(context_settings=CONTEXT, short_help="Search torch.compile settings for a model.")
@click.option("--model", required=True,
              help="torchvision classification model name (random weights), or "
                   "package.module:factory for your own (see README: factory contract).")
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
@click.option("--space", "space_file", type=GivenPath(dir_okay=False, path_type=Path),
              help="A TOML file that sets the dimensions, one key per option (batch_sizes, "
                   "backends, modes, dynamic, dtypes, channels_last, cudnn_benchmark, and an "
                   "[inductor_options] table); an option given on the command line wins. Any "
                   "such file turns off what a CUDA search adds: where neither it nor the "
                   "command line gives them, no inductor option is searched and channels_last "
                   "is false; the other dimensions left out take their option's default. See "
                   "README, \"A space file\".")
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
@click.option("--trials", "n_trials", type=click.IntRange(min=1),
              help="Stop when the study holds this many measured trials (resume counts).")
@click.option("--budget", "budget_s", type=Duration(),
              help="Wall-clock budget of this run, e.g. 8h or 45m.")
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
@click.option("--seed", type=SEED, default=0, show_default=True, help="Sampler seed.")
@click.option("--sampler", type=click.Choice(SAMPLERS),
              help="How each batch size's study proposes configs after the baselines: tpe "
                   "(multivariate TPE; the default for a new study), nsga2, nsga3 (NSGA-II, "
                   "NSGA-III), gp (Gaussian process; needs scipy) or random (the control). "
                   "Stored with the study: a resume uses it.")
@max_vram_gb_option("A limit the sampler learns (an Optuna constraint): configs that need more "
                    "memory (GiB, compile and warm-up included) are infeasible. They are "
                    "still measured and kept; stored with the study.")
@max_compile_s_option("A limit the sampler learns: configs whose first (compiling) call takes "
                      "longer are infeasible; stored with the study.")
@json_option
@quiet_option
@user_errors
def search(model, name, device, dtype, image_size, channels_last, cudnn_benchmark,
           inductor_options, space_file, batch_sizes, shape_schedule, backends, modes, dynamic, n_trials,
           budget_s, timeout_s, compile_timeout_s, prestart, min_calls,
           min_seconds, warm_cache, confirm_repeats, studies_dir, storage, gpus, retry_failed,
           seed, sampler, max_vram_gb, max_compile_s, as_json, quiet) -> None:
    """Search torch.compile settings for a model; write the study's Parquet files.

    Each trial runs in its own process (timeouts and failures kept as data). Eager and
    inductor in each mode are measured first at every batch size, so every row has a speedup
    vs eager. On CUDA the space also holds four inductor options both ways and, for a
    torchvision model, channels_last, unless --space is given; a mode that compiles past
    --compile-timeout is not tried again at that batch size. Then the batch size with the
    fewest trials gets the next trial, proposed by its own sampler (one Optuna study per batch
    size); failed configs, and those over --max-vram-gb or --max-compile-s, are infeasible
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
    """
    from tuner.data.select import Constraints
    from tuner.launch import gpus as gpu_list
    from tuner.launch import runner as runners
    from tuner.domain.layout import StudyLayout
    from tuner.domain.space import build_space, default_formats, default_options
    from tuner.domain.workload import Workload, parse_shapes, validate
    from tuner.study.finalists import Repeats
    from tuner.study.fleet import Fleet, plan_of
    from tuner.study.search import Search
    from tuner.study.spec import StudySpec

    repeats = Repeats.parse(confirm_repeats)
    # The file's values where the command line gave none, typed as the file gave them; the
    # command line's are read from its text below.
    from_file = SpaceFile() if space_file is None else with_space_file(space_file)

    _import_from_here()
    if ":" in model and user_gave(click.get_current_context(), "image_size"):
        # Stored with the study all the same, so a resume without it would be refused.
        raise UserError(f"--image-size applies to torchvision models only: the factory of "
                        f"--model {model} makes its own inputs; drop --image-size")
    if shape_schedule is not None and not shape_schedule.strip():
        raise UserError("--shape-schedule is empty: give shapes, e.g. --shape-schedule 1,8,32,8, "
                        "or leave it out")
    chosen = None
    if gpus is not None:
        if device not in (None, "cuda"):
            raise UserError(f"--gpus shows each worker only its GPU, as cuda: drop --device {device}")
        device = "cuda"
        # Indices given: the workers start before this process imports torch to count the GPUs
        # (seconds; checked below, and a GPU that is not there closes them at once).
        chosen = gpu_list.listed_gpus(gpus)
        if chosen is None:  # all
            chosen = gpu_list.choose_gpus(gpus, gpu_list.visible_gpus())
    if device is not None and not device.strip():
        raise UserError("--device is empty: give cpu, cuda or cuda:N, or leave it out for "
                        "cuda where torch sees a GPU")
    device = device or _default_device()
    if user_gave(click.get_current_context(), "cudnn_benchmark") or from_file.cudnn_benchmark:
        check_cudnn_benchmark(device)  # one value too: build_space sees only a searched one
    # A dimension given one value is the workload's; several are searched (tuner.domain.space).
    dtypes = from_file.dtypes or split((dtype,), "--dtype") or ["float32"]
    # Knobs the user left unset: searched on CUDA (tuner.domain.space.default_*), not on CPU;
    # a space file is the whole space.
    formats = from_file.channels_last or (
        bool_values(channels_last, "--channels-last") if channels_last is not None else
        [False] if space_file else default_formats(device, image_model=":" not in model))
    cudnn = from_file.cudnn_benchmark or bool_values(cudnn_benchmark, "--cudnn-benchmark")
    workload = Workload(model=model, device=device, image_size=image_size,
                        dtype=dtypes[0] if len(dtypes) == 1 else "float32",
                        channels_last=formats[0] if len(formats) == 1 else False,
                        cudnn_benchmark=cudnn[0] if len(cudnn) == 1 else True,
                        shape_schedule=parse_shapes(shape_schedule or ""))
    sizes = from_file.batch_sizes or positive_ints(batch_sizes, "batch size", "--batch-sizes")
    backend_list = from_file.backends or split(backends, "--backend")
    check_model_spelling(model)  # before the study is named after it
    study_name = _study_name(model, device) if name is None else name
    protocol = TrialProtocol(min_calls=min_calls, min_seconds=min_seconds,
                             warm_cache=warm_cache, compile_timeout_s=compile_timeout_s)
    _check_timeout(timeout_s, protocol, " (--min-seconds)")
    launch = runners.LaunchSettings(timeout_s=timeout_s, prestart=runners.prestart_for(prestart))
    # Searched here: the first trial's process starts importing torch now, beside the checks
    # below, which take seconds (this process imports torchvision and dynamo for them). With
    # --gpus, the workers start now and start importing, and wait for the study. A bad input
    # closes them at once.
    runner = None if chosen is not None else runners.make_runner(
        launch, StudyLayout.of(studies_dir, study_name).cache_root)
    fleet = None if chosen is None else Fleet(
        plan_of(study_name, studies_dir, launch, seed, n_trials, budget_s, quiet, model,
                retry_failed=retry_failed), chosen, storage=storage)
    try:
        if runner is not None and sizes:
            runner.start_spare(PrebuildRequest(workload, sizes[0]))
        if fleet is not None:
            fleet.spawn()
            gpu_list.choose_gpus(gpus, gpu_list.visible_gpus())
        # The device first: counting GPUs imports torch alone; validating imports the model's
        # package and dynamo (seconds more before a one-line error).
        gpu_list.check_device(device, gpu_list.visible_gpus(), f"--device {device}")
        validate(workload)
        options = dict(from_file.inductor_options) if from_file.inductor_options else \
            option_values(inductor_options) if inductor_options else \
            None if space_file else default_options(device, backend_list)
        space = build_space(device=device, batch_sizes=sizes, backends=backend_list,
                            modes=from_file.modes or split(modes, "--mode"),
                            dynamic=from_file.dynamic or dynamic_values(split(dynamic, "--dynamic")),
                            dtypes=dtypes if len(dtypes) > 1 else None,
                            channels_last=formats if len(formats) > 1 else None,
                            cudnn_benchmark=cudnn if len(cudnn) > 1 else None,
                            options=options)
        spec = StudySpec(name=study_name, workload=workload, space=space,
                         protocol=protocol,
                         root=studies_dir, storage=storage, n_trials=n_trials, budget_s=budget_s,
                         seed=seed, confirm_repeats=confirm_repeats.strip().lower(),
                         sampler=sampler, retry_failed=retry_failed,
                         limits=None if max_vram_gb is None and max_compile_s is None
                         else Constraints(max_vram_gb=max_vram_gb, max_compile_s=max_compile_s))
    except BaseException:
        if runner is not None:
            runner.close()
        if fleet is not None:
            fleet.cancel()
        raise
    say = teller(quiet)
    _warn_of_compile_budget(say, compile_timeout_s, timeout_s, "",
                            "give a --compile-timeout below --timeout")
    if fleet is not None and chosen is not None:
        def confirm_after(received: list[int]) -> bool:
            # once the workers are done: here, on the first GPU
            on_first = runners.LaunchSettings(timeout_s, launch.prestart, gpu=chosen[0])
            return run.run_confirm(
                Search(spec, runners.make_runner(on_first, spec.layout.cache_root),
                       on_message=say), say, repeats, received=received)

        run.run_fleet(fleet, spec, say, as_json,
                      then=confirm_after if repeats.any else None)
        return
    assert runner is not None
    try:
        search_ = Search(spec, runner, **run.progress(say))
    except BaseException:  # the study refuses this workload, say
        runner.close()
        raise
    run.run_search(search_, say, as_json)


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
@click.option("--trials", "n_trials", type=click.IntRange(min=1),
              help="Stop when the study holds this many measured trials (every worker's count).")
@click.option("--budget", "budget_s", type=Duration(),
              help="Wall-clock budget of this worker, e.g. 8h or 45m.")
@timeout_option
@prestart_option
@click.option("--seed", type=SEED,
              help="Sampler seed; default: a random one, so that workers propose different configs.")
@click.option("--export-only", is_flag=True,
              help="Write the study's Parquet files under --studies-dir and exit, measuring nothing.")
@retry_failed_option
@json_option
@quiet_option
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

    _check_study_option(name)
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
    run_worker(plan, storage, as_json, export_only=export_only)


def run_worker(plan, storage: str | None, as_json: bool, export_only: bool = False,
               runner: Runner | None = None,
               stop_cause: Callable[[], str | None] | None = None) -> None:
    """One worker on an existing study: ``tuner worker``, and each worker of a fleet, which
    passes the ``runner`` it made while it waited for the study (closed here in all cases)
    and its ``stop_cause`` (Search.stop_cause)."""
    from tuner.launch.gpus import check_worker_gpu
    from tuner.domain.workload import check_loads_here
    from tuner.study.export import export_study, refuse_another_studys_folder
    from tuner.study.search import Search
    from tuner.study.storage import join_spec

    try:
        spec = join_spec(plan.study, storage, Path(plan.root), "--study", n_trials=plan.n_trials,
                         budget_s=plan.budget_s, seed=plan.seed)
        spec = dataclasses.replace(spec, retry_failed=plan.retry_failed)
        refuse_another_studys_folder(spec)
        if export_only:
            joined = Search(spec)
            export_study(joined.fronts, spec)
            run.print_study(spec.layout, as_json)
            return
        device = spec.workload.device
        _check_timeout(plan.launch.timeout_s, spec.protocol, f" (as study {spec.name!r} asks)")
        runner = runner or plan.runner()
        # The first trial's process imports torch (or forks from the template that does) while
        # this one checks the GPUs and the model and opens the study.
        runner.start_spare(PrebuildRequest(spec.workload, spec.space.batch_sizes[0]))
        if not plan.gpus_checked:  # a fleet's workers were checked by the process that started them
            check_worker_gpu(plan.study, device, plan.launch.gpu)
            _import_from_here()
            check_loads_here(spec.workload, spec.name, "worker")
        say = teller(plan.quiet, prefix="" if plan.launch.gpu is None else f"gpu{plan.launch.gpu} ")
        if not plan.gpus_checked:  # a fleet's search warned already
            _warn_of_compile_budget(say, spec.protocol.compile_timeout_s, plan.launch.timeout_s,
                                    f" (study {spec.name!r})",
                                    "give this worker a --timeout above it")
        search_ = Search(spec, runner, **run.progress(say))
        if stop_cause is not None:
            search_.stop_cause = stop_cause
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    run.run_search(search_, say, as_json)


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
@json_option
@quiet_option
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
    from tuner.launch import runner as runners
    from tuner.launch.gpus import NO_GPU_FIX_JOINED, check_device, visible_gpus
    from tuner.domain.layout import check_name
    from tuner.domain.workload import check_loads_here
    from tuner.study.export import refuse_another_studys_folder
    from tuner.study.finalists import Repeats
    from tuner.study.search import Search
    from tuner.study.storage import join_spec

    plan = Repeats.parse(repeats, "--repeats")
    if not plan.any:
        raise UserError("--repeats 0 measures nothing: give auto or a number from 1")
    if not study.strip():
        raise UserError(EMPTY_STUDY)
    path = Path(study)
    if path.is_file():
        raise UserError(f"STUDY {study} is a file: give the study folder it is in "
                        f"({path.parent}), or a study name under --studies-dir")
    if path.is_dir() and path.name in ("", ".", ".."):  # `tuner confirm .` in the study folder
        path = path.resolve()
    name, root = (path.name, path.parent) if path.is_dir() else (study, studies_dir)
    try:
        check_name(name)
    except UserError:
        raise UserError(f"STUDY {study!r} is not a study folder here, and not a folder name "
                        "either: give a study folder, or a study name under --studies-dir "
                        "(letters, digits, '_', '.' and '-')") from None
    spec = join_spec(name, storage, root, "STUDY")
    refuse_another_studys_folder(spec)
    device = spec.workload.device
    check_device(device, visible_gpus(), f"study {spec.name!r} runs on {device}",
                 NO_GPU_FIX_JOINED)
    _check_timeout(timeout_s, spec.protocol, f" (as study {spec.name!r} asks)")
    _import_from_here()
    check_loads_here(spec.workload, spec.name, "confirm")
    say = teller(quiet)
    launch = runners.LaunchSettings(timeout_s, runners.prestart_for(prestart))
    runner = runners.make_runner(launch, spec.layout.cache_root)
    try:
        search_ = Search(spec, runner, on_message=say)
        if redo:  # first: the front is chosen without them (and they may be another's)
            search_.forget_repeats()
        if search_.current().pareto.empty:
            raise UserError(f"nothing to confirm: no trial of study {spec.name!r} finished ok "
                            f"and matched eager (`tuner show {shlex.quote(str(spec.directory))} "
                            "--all` lists how each ended)")
    except BaseException:
        runner.close()
        raise
    received: list[int] = []
    stopped = run.run_confirm(search_, say, plan, redo=redo, received=received)
    run.print_study(spec.layout, as_json)
    if stopped:
        sys.exit(signals.exit_code(received))


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _warn_of_compile_budget(say: Callable[[str], None], compile_timeout_s: float | None,
                            timeout_s: float, whose: str, advice: str) -> None:
    """A warning where the compile budget is not below the trial's --timeout: the budget then
    never ends a compile, and its mode is never skipped. ``whose``: after the budget, what
    set it (" (study 'x')" for a worker)."""
    if compile_timeout_s is not None and compile_timeout_s >= timeout_s:
        say(f"warning: --compile-timeout {compile_timeout_s:g} s{whose} is not below --timeout "
            f"{timeout_s:g} s: a long compile ends as timeout, not compile_timeout, so its "
            f"mode's other configs at that batch size are each tried up to --timeout; {advice}")


def _study_name(model: str, device: str) -> str:
    """MODEL-DEVICE, or MODULE-FACTORY-DEVICE for a factory: two factories of one module are
    two workloads, and one name for both would refuse the second as "another workload"."""
    module, _, factory = model.partition(":")
    base = f"{module.split('.')[-1]}-{factory}" if factory else model
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{base}-{device.split(':')[0]}")


def _import_from_here() -> None:
    """Factory models import from the current folder, as they do in the trial processes
    (``python -m`` started here puts this folder on their path)."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))


def _given(ctx: click.Context, *names: str) -> list[str]:
    """The options among ``names`` (parameter names) that the user gave, as they are spelled
    on the command line."""
    return [param.opts[0] for param in ctx.command.params
            if param.name in names and user_gave(ctx, param.name)]


def _check_timeout(timeout_s: float, protocol: TrialProtocol, whose: str) -> None:
    """A --timeout no trial can finish within is refused: every trial would end as a timeout,
    which reads as a model that hangs. Each trial times its steady state twice (per request,
    then back to back), each for the protocol's seconds, after building and compiling."""
    floor = 2 * min(protocol.min_seconds, protocol.max_seconds)
    if timeout_s <= floor:
        raise UserError(f"--timeout {timeout_s:g} s leaves no trial time to finish: each trial "
                        f"times its steady state twice, {floor / 2:g} s each{whose}, after "
                        "building and compiling; give more, e.g. --timeout 30m")


def _check_study_option(name: str) -> None:
    """``--study`` takes a study's name: a path gets the name and --studies-dir it stands for."""
    from tuner.domain.layout import check_name

    try:
        check_name(name)
    except UserError:
        if "/" not in name:
            raise UserError(f"--study {name!r} is not a folder name: give a study's name "
                            "(letters, digits, '_', '.' and '-')") from None
        path = Path(name)
        folder = path.parent if path.is_file() else path
        raise UserError(f"--study {name!r} is not a folder name: --study takes a study's name; "
                        f"for {folder} give --study {folder.name} --studies-dir "
                        f"{folder.parent}") from None
