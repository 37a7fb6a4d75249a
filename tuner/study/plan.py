"""What one worker of a study is told: :class:`WorkerPlan`, as JSON in its argv. Light to import:
a fleet's worker reads it, then starts importing torch in its trials' template process, before
it imports the rest of the tuner (:mod:`tuner.cli.fleet_worker`)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from tuner.launch.runner import LaunchSettings

if TYPE_CHECKING:
    from tuner.launch.runner import Runner

# The storage URL reaches the workers in their environment, never in argv: `ps` shows argv to
# every user of the host, and the URL may hold a password. `tuner worker` reads it from here too.
STORAGE_ENV = "TUNER_STORAGE"
GO = "go\n"  # what a fleet's waiting workers read on stdin once the study is ready


@dataclasses.dataclass(frozen=True)
class WorkerPlan:
    """What one worker of a study does: join it, measure on one GPU, stop at the target."""

    study: str
    root: str  # where this host keeps the study folder
    launch: LaunchSettings
    seed: int
    n_trials: int | None = None
    budget_s: float | None = None
    quiet: bool = False
    # The process that made the plan checked this host's GPUs (a fleet's parent): the worker
    # does not import torch again to count them, seconds before its first trial.
    gpus_checked: bool = False
    # A fleet's worker, started before its study exists: it starts importing (its template
    # process, with this factory module) and waits for GO on stdin; anything else, or none,
    # and it exits measuring nothing (Fleet.spawn).
    wait_for_go: bool = False
    factory_module: str | None = None
    # Measure eager again where the study holds its failure (tuner search --retry-failed).
    retry_failed: bool = False

    def runner(self) -> Runner:
        """The runner of this worker's trials, made from the plan alone: a fleet's worker makes
        it, and starts its template, before its study exists."""
        from tuner.domain.layout import StudyLayout
        from tuner.launch import runner as runners

        launch = dataclasses.replace(self.launch,
                                     prestart=runners.prestart_for(self.launch.prestart))
        return runners.make_runner(launch, StudyLayout.of(self.root, self.study).cache_root)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerPlan:
        data: dict[str, Any] = json.loads(text)
        data["launch"] = LaunchSettings(**data["launch"])
        return cls(**data)
