"""Small study specs for searches with the fake runner, and asking their Optuna study for a trial
as a search process does."""

from __future__ import annotations

import warnings

import optuna

from tuner.domain.space import SearchSpace, build_space
from tuner.domain.workload import Workload
from tuner.study.spec import StudySpec

BACKENDS = ["eager", "inductor", "aot_eager", "cudagraphs"]
MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
WORKLOAD = Workload(model="resnet18", device="cuda")


def make_space(batch_sizes=(1, 8), backends=("eager", "inductor"), modes=("default",),
               dynamic=(False, True)) -> SearchSpace:
    return build_space(device="cuda", batch_sizes=list(batch_sizes), backends=list(backends),
                       modes=list(modes), dynamic=list(dynamic), available_backends=BACKENDS,
                       available_modes=MODES)


SPACE = make_space()  # 2 batch sizes x (eager + inductor default x 2 dynamic) = 6 configs


def make_spec(tmp_path, space=SPACE, workload=WORKLOAD, **kwargs) -> StudySpec:
    return StudySpec(name="s", workload=workload, space=space, root=tmp_path, **kwargs)


def keys(space: SearchSpace) -> set[str]:
    return {c.key for c in space.configs()}


def ask(study: optuna.Study) -> optuna.Trial:
    """A trial as a search process starts one (Search beats its heartbeat itself)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
        return study.ask()
