"""A new search (``tuner search``) from the options the user gave (:class:`SearchOptions`): its
spec built and checked, with its first trial's process or its fleet of workers started beside
the checks (:func:`prepare`), then run in the foreground (:func:`run`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.domain import workload as workloads
from tuner.domain.layout import StudyLayout
from tuner.domain.naming import OptionDefaults
from tuner.domain.records import TrialProtocol
from tuner.domain.space_file import SpaceFile
from tuner.domain.workload import Workload, check_cudnn_benchmark, check_model_spelling
from tuner.errors import UserError
from tuner.launch import gpus as gpu_list
from tuner.launch import runner as runners
from tuner.study import foreground
from tuner.study.option_text import (
    bool_values,
    dynamic_values,
    option_values,
    positive_ints,
    split,
)
from tuner.study.preflight import check_timeout, import_from_here, warn_of_compile_budget
from tuner.trial.prebuild import PrebuildRequest

if TYPE_CHECKING:
    from tuner.domain.space import SearchSpace


@dataclasses.dataclass(frozen=True)
class SearchOptions:
    """The options of ``tuner search`` as the user gave them. A value given as text stays text:
    :func:`prepare` reads each where its check runs, so that of two bad values the same one is
    named first, whichever way the search was started."""

    model: str
    name: str | None  # None: MODEL-DEVICE (study_name)
    device: str | None  # None: cuda where torch sees a GPU, else cpu
    dtype: str
    image_size: int
    image_size_given: bool  # the user gave --image-size (a factory makes its own inputs)
    channels_last: str | None  # None: the device's default (default_formats)
    cudnn_benchmark: str
    cudnn_benchmark_given: bool  # the user gave --cudnn-benchmark (checked against the device)
    inductor_options: tuple[str, ...]  # NAME=V1,V2 each
    compile_scopes: tuple[str, ...]  # whole, regional; none given: whole (not searched)
    space_file: Path | None
    batch_sizes: str
    shape_schedule: str | None
    backends: tuple[str, ...]
    modes: tuple[str, ...]
    dynamic: tuple[str, ...]
    n_trials: int | None
    budget_s: float | None
    timeout_s: float
    compile_timeout_s: float | None
    prestart: bool | None
    min_calls: int
    min_seconds: float
    warm_cache: bool
    confirm_repeats: str  # auto or N (tuner.study.finalists.Repeats)
    studies_dir: Path
    storage: str | None
    gpus: str | None  # indices (0,1) or all: one worker per GPU
    retry_failed: bool
    seed: int
    sampler: str | None
    max_vram_gb: float | None
    max_compile_s: float | None
    quiet: bool
    # Studies (folders, trials files or names under studies_dir) whose finalists and fronts are
    # measured first, after the baselines (tuner.study.start_from)
    start_from: tuple[str, ...] = ()
    # The --space file's values where the command line gave none, typed as the file gave them;
    # the command line's are read from its text in prepare.
    from_file: SpaceFile = SpaceFile()

    def __post_init__(self) -> None:
        _ = self.repeats  # --confirm is read first, before the --space file, as it always was

    @property
    def repeats(self) -> Any:
        """--confirm as a tuner.study.finalists.Repeats."""
        from tuner.study.repeats import Repeats

        return Repeats.parse(self.confirm_repeats)


@dataclasses.dataclass
class NewSearch:
    """A search's spec, built and checked, and what runs it: a runner in this process, or a
    fleet of one worker per GPU (``gpus``), started and waiting for the study."""

    spec: Any  # tuner.study.spec.StudySpec
    repeats: Any  # tuner.study.finalists.Repeats
    launch: runners.LaunchSettings
    runner: runners.Runner | None
    fleet: Any  # tuner.study.fleet.Fleet, or None
    gpus: list[int] | None


@dataclasses.dataclass(frozen=True)
class _Values:
    """The dimensions read from the options: one value is the workload's, several are searched
    (tuner.domain.space)."""

    dtypes: list[str] | tuple[str, ...]
    formats: list[bool] | tuple[bool, ...]
    cudnn: list[bool] | tuple[bool, ...]
    sizes: list[int] | tuple[int, ...]
    backends: list[str] | tuple[str, ...] | None


def prepare(options: SearchOptions, say: Callable[[str], None]) -> NewSearch:
    """The search's spec, checked; its first trial's process (or its workers) started early.
    A bad input closes them and raises."""
    from tuner.study.fleet import Fleet, plan_of
    from tuner.study.start_from import read_start_from

    o = options
    import_from_here()
    _refuse_misplaced(o)
    device, chosen = _device_and_gpus(o)
    workload, values = _workload(o, device)
    check_model_spelling(o.model)  # before the study is named after it
    name = study_name(o.model, device) if o.name is None else o.name
    protocol = TrialProtocol(min_calls=o.min_calls, min_seconds=o.min_seconds,
                             warm_cache=o.warm_cache, compile_timeout_s=o.compile_timeout_s)
    check_timeout(o.timeout_s, protocol, " (--min-seconds)")
    launch = runners.LaunchSettings(timeout_s=o.timeout_s,
                                    prestart=runners.prestart_for(o.prestart))
    # Searched here: the first trial's process starts importing torch now, beside the checks
    # below, which take seconds (this process imports torchvision and dynamo for them). With
    # --gpus, the workers start now and start importing, and wait for the study. A bad input
    # closes them at once.
    runner = None if chosen is not None else runners.make_runner(
        launch, StudyLayout.of(o.studies_dir, name).cache_root)
    fleet = None if chosen is None else Fleet(
        plan_of(name, o.studies_dir, launch, o.seed, o.n_trials, o.budget_s, o.quiet, o.model,
                retry_failed=o.retry_failed), chosen, storage=o.storage)
    try:
        if runner is not None and values.sizes:
            runner.start_spare(PrebuildRequest(workload, values.sizes[0]))
        if fleet is not None and o.gpus is not None:
            fleet.spawn()
            gpu_list.choose_gpus(o.gpus, gpu_list.visible_gpus())
        spec = _spec(o, name, workload, values, protocol)
        if o.start_from:
            spec = dataclasses.replace(spec, start_from=read_start_from(
                o.start_from, o.studies_dir, name, workload, spec.space))
    except BaseException:
        if runner is not None:
            runner.close()
        if fleet is not None:
            fleet.cancel()
        raise
    warn_of_compile_budget(say, o.compile_timeout_s, o.timeout_s, "",
                           "give a --compile-timeout below --timeout")
    return NewSearch(spec, o.repeats, launch, runner, fleet, chosen)


def run(new: NewSearch, say: Callable[[str], None],
        progress: Mapping[str, Callable[..., None]]) -> foreground.Ended:
    """Run the search in the foreground (``progress``: the callbacks its Search takes), then,
    for a fleet, measure the finalists again (the runner's search does that itself)."""
    from tuner.study.search import Search

    spec, chosen = new.spec, new.gpus
    if new.fleet is not None and chosen is not None:
        def confirm_after(received: list[int]) -> bool:
            # once the workers are done: here, on the first GPU
            on_first = runners.LaunchSettings(new.launch.timeout_s, new.launch.prestart,
                                              gpu=chosen[0])
            return foreground.run_confirm(
                Search(spec, runners.make_runner(on_first, spec.layout.cache_root),
                       on_message=say), say, new.repeats, received=received)

        for note in spec.start_from.notes if spec.start_from is not None else ():
            say(note)  # the workers measure what it gives, and say nothing of it
        return foreground.run_fleet(new.fleet, spec, say,
                                    then=confirm_after if new.repeats.any else None)
    runner = new.runner
    assert runner is not None
    try:
        search_ = Search(spec, runner, **progress)
    except BaseException:  # the study refuses this workload, say
        runner.close()
        raise
    return foreground.run_search(search_, say)


def _refuse_misplaced(o: SearchOptions) -> None:
    """Options that do not apply to what else was given."""
    if ":" in o.model and o.image_size_given:
        # Stored with the study all the same, so a resume without it would be refused.
        raise UserError(f"--image-size applies to torchvision models only: the factory of "
                        f"--model {o.model} makes its own inputs; drop --image-size")
    if o.shape_schedule is not None and not o.shape_schedule.strip():
        raise UserError("--shape-schedule is empty: give shapes, e.g. --shape-schedule 1,8,32,8, "
                        "or leave it out")


def _device_and_gpus(o: SearchOptions) -> tuple[str, list[int] | None]:
    """The device, and with --gpus the GPUs of its workers."""
    device, chosen = o.device, None
    if o.gpus is not None:
        if device not in (None, "cuda"):
            raise UserError(f"--gpus shows each worker only its GPU, as cuda: drop --device {device}")
        device = "cuda"
        # Indices given: the workers start before this process imports torch to count the GPUs
        # (seconds; checked below, and a GPU that is not there closes them at once).
        chosen = gpu_list.listed_gpus(o.gpus)
        if chosen is None:  # all
            chosen = gpu_list.choose_gpus(o.gpus, gpu_list.visible_gpus())
    if device is not None and not device.strip():
        raise UserError("--device is empty: give cpu, cuda or cuda:N, or leave it out for "
                        "cuda where torch sees a GPU")
    return device or default_device(), chosen


def _workload(o: SearchOptions, device: str) -> tuple[Workload, _Values]:
    """The workload, and the dimensions read from the options and the space file."""
    from tuner.domain.space import default_formats

    from_file = o.from_file
    if o.cudnn_benchmark_given or from_file.cudnn_benchmark:
        check_cudnn_benchmark(device)  # one value too: build_space sees only a searched one
    # A dimension given one value is the workload's; several are searched (tuner.domain.space).
    dtypes = from_file.dtypes or split((o.dtype,), "--dtype") or ["float32"]
    # Knobs the user left unset: searched on CUDA (tuner.domain.space.default_*), not on CPU;
    # a space file is the whole space.
    formats = from_file.channels_last or (
        bool_values(o.channels_last, "--channels-last") if o.channels_last is not None else
        [False] if o.space_file else default_formats(device, image_model=":" not in o.model))
    cudnn = from_file.cudnn_benchmark or bool_values(o.cudnn_benchmark, "--cudnn-benchmark")
    workload = Workload(model=o.model, device=device, image_size=o.image_size,
                        dtype=dtypes[0] if len(dtypes) == 1 else "float32",
                        channels_last=formats[0] if len(formats) == 1 else False,
                        cudnn_benchmark=cudnn[0] if len(cudnn) == 1 else True,
                        shape_schedule=workloads.parse_shapes(o.shape_schedule or ""))
    sizes = from_file.batch_sizes or positive_ints(o.batch_sizes, "batch size", "--batch-sizes")
    backends = from_file.backends or split(o.backends, "--backend")
    return workload, _Values(dtypes, formats, cudnn, sizes, backends)


def _spec(o: SearchOptions, name: str, workload: Workload, values: _Values,
          protocol: TrialProtocol) -> Any:
    """The study's spec, once the device and the model are checked."""
    from tuner.data.select import Constraints
    from tuner.domain.space import build_space, default_options
    from tuner.study.spec import StudySpec

    from_file, device = o.from_file, workload.device
    # The device first: counting GPUs imports torch alone; validating imports the model's
    # package and dynamo (seconds more before a one-line error).
    gpu_list.check_device(device, f"--device {device}")
    workloads.validate(workload)
    options = dict(from_file.inductor_options) if from_file.inductor_options else \
        option_values(o.inductor_options) if o.inductor_options else \
        None if o.space_file else default_options(device, values.backends)
    dtypes, formats, cudnn = values.dtypes, values.formats, values.cudnn
    space = build_space(device=device, batch_sizes=values.sizes, backends=values.backends,
                        modes=from_file.modes or split(o.modes, "--mode"),
                        dynamic=from_file.dynamic or dynamic_values(split(o.dynamic, "--dynamic")),
                        dtypes=dtypes if len(dtypes) > 1 else None,
                        channels_last=formats if len(formats) > 1 else None,
                        cudnn_benchmark=cudnn if len(cudnn) > 1 else None,
                        options=options,
                        compile_scopes=from_file.compile_scopes
                        or split(o.compile_scopes, "--compile-scope"))
    return StudySpec(name=name, workload=workload, space=space, protocol=protocol,
                     option_defaults=_option_defaults(space),
                     root=o.studies_dir, storage=o.storage, n_trials=o.n_trials,
                     budget_s=o.budget_s, seed=o.seed,
                     confirm_repeats=o.confirm_repeats.strip().lower(), sampler=o.sampler,
                     retry_failed=o.retry_failed,
                     limits=None if o.max_vram_gb is None and o.max_compile_s is None
                     else Constraints(max_vram_gb=o.max_vram_gb, max_compile_s=o.max_compile_s))


def _option_defaults(space: SearchSpace) -> OptionDefaults | None:
    """What this torch runs for the space's inductor options in each of its modes, recorded
    with the study to name its configs (tuner.domain.naming); None without inductor."""
    from tuner.domain.config import INDUCTOR
    from tuner.domain.inductor_options import installed_defaults

    if INDUCTOR not in space.backends:
        return None
    return installed_defaults(space.modes, [name for name, _ in space.options])


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def study_name(model: str, device: str) -> str:
    """MODEL-DEVICE, or MODULE-FACTORY-DEVICE for a factory: two factories of one module are
    two workloads, and one name for both would refuse the second as "another workload"."""
    module, _, factory = model.partition(":")
    base = f"{module.split('.')[-1]}-{factory}" if factory else model
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{base}-{device.split(':')[0]}")
