"""Runs on a study that exists: a worker that joins it (``tuner worker``, each worker of a
fleet) and the finalists measured again (``tuner confirm``), each joined and checked here,
ready to run in the foreground (tuner.study.foreground)."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.errors import UserError
from tuner.study.preflight import check_timeout, import_from_here, warn_of_compile_budget

if TYPE_CHECKING:
    from tuner.launch.runner import Runner
    from tuner.study.plan import WorkerPlan
    from tuner.study.repeats import Repeats
    from tuner.study.search import Search

EMPTY_STUDY = "a STUDY given is empty (''): give a study folder, or a study name under --studies-dir"


def join_worker(plan: WorkerPlan, storage: str | None, say: Callable[[str], None],
                progress: Mapping[str, Callable[..., None]], export_only: bool = False,
                runner: Runner | None = None,
                stop_cause: Callable[[], str | None] | None = None) -> Search:
    """One worker's search on an existing study (``progress``: the callbacks it takes). A fleet's
    worker passes the ``runner`` it made while it waited for the study (closed here if joining
    fails) and its ``stop_cause`` (Search.stop_cause). ``export_only``: the study's Parquet
    files are written, and the search returned measures nothing."""
    from tuner.domain.workload import check_loads_here
    from tuner.launch.gpus import check_worker_gpu
    from tuner.study.export import export_study, refuse_another_studys_folder
    from tuner.study.search import Search
    from tuner.study.storage import join_spec
    from tuner.trial.prebuild import PrebuildRequest

    try:
        spec = join_spec(plan.study, storage, Path(plan.root), "--study", n_trials=plan.n_trials,
                         budget_s=plan.budget_s, seed=plan.seed)
        spec = dataclasses.replace(spec, retry_failed=plan.retry_failed)
        refuse_another_studys_folder(spec)
        if export_only:
            joined = Search(spec)
            export_study(joined.fronts, spec)
            return joined
        device = spec.workload.device
        check_timeout(plan.launch.timeout_s, spec.protocol, f" (as study {spec.name!r} asks)")
        runner = runner or plan.runner()
        # The first trial's process imports torch (or forks from the template that does) while
        # this one checks the GPUs and the model and opens the study.
        runner.start_spare(PrebuildRequest(spec.workload, spec.space.batch_sizes[0]))
        # A fleet's workers were checked by the process that started them, and its search warned.
        if not plan.gpus_checked:
            check_worker_gpu(plan.study, device, plan.launch.gpu)
            import_from_here()
            check_loads_here(spec.workload, spec.name, "worker")
            warn_of_compile_budget(say, spec.protocol.compile_timeout_s, plan.launch.timeout_s,
                                   f" (study {spec.name!r})",
                                   "give this worker a --timeout above it")
        search_ = Search(spec, runner, **progress)
        if stop_cause is not None:
            search_.stop_cause = stop_cause
    except BaseException:
        if runner is not None:
            runner.close()
        raise
    return search_


def join_confirm(study: str, repeats: str, studies_dir: Path, storage: str | None,
                 timeout_s: float, prestart: bool | None, redo: bool,
                 say: Callable[[str], None]) -> tuple[Search, Repeats]:
    """The search whose finalists ``tuner confirm`` measures again, and how often (``repeats``,
    its --repeats): STUDY a study folder, or a study name under ``studies_dir`` (or in
    ``storage``). ``redo``: their earlier re-measurements forgotten first."""
    from tuner.domain.workload import check_loads_here
    from tuner.launch import runner as runners
    from tuner.launch.gpus import NO_GPU_FIX_JOINED, check_device
    from tuner.study.export import refuse_another_studys_folder
    from tuner.study.repeats import Repeats
    from tuner.study.search import Search
    from tuner.study.storage import join_spec

    plan = Repeats.parse(repeats, "--repeats")
    if not plan.any:
        raise UserError("--repeats 0 measures nothing: give auto or a number from 1")
    name, root = _study_of(study, studies_dir)
    spec = join_spec(name, storage, root, "STUDY")
    refuse_another_studys_folder(spec)
    device = spec.workload.device
    check_device(device, f"study {spec.name!r} runs on {device}",
                 NO_GPU_FIX_JOINED)
    check_timeout(timeout_s, spec.protocol, f" (as study {spec.name!r} asks)")
    import_from_here()
    check_loads_here(spec.workload, spec.name, "confirm")
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
    return search_, plan


def _study_of(study: str, studies_dir: Path) -> tuple[str, Path]:
    """STUDY's name and the folder that holds it: a study folder, or a name under
    ``studies_dir``."""
    from tuner.domain.layout import check_name

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
    return name, root

