"""What defines a study and how this run of it goes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.domain.layout import STUDIES_DIR, StudyLayout, check_name
from tuner.domain.naming import NameBasis, OptionDefaults
from tuner.domain.records import TrialProtocol
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload

if TYPE_CHECKING:
    from tuner.data.select import Constraints
    from tuner.study.start_plan import StartFrom


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """Everything that defines a study and how this run of it goes."""

    name: str
    workload: Workload
    space: SearchSpace
    protocol: TrialProtocol = TrialProtocol()
    root: Path = STUDIES_DIR
    # Any Optuna storage URL; default: SQLite in the study folder. Not in repr: it may hold a password.
    storage: str | None = dataclasses.field(default=None, repr=False)
    n_trials: int | None = None  # total measured trials the study should reach
    # Re-measurements of each finalist after the search: a number (0: none) or "auto"
    # (tuner.study.finalists.Repeats).
    confirm_repeats: int | str = 0
    budget_s: float | None = None  # wall-clock budget of this run
    seed: int = 0
    # The sampler's kind (tuner.study.sampler.SAMPLERS: tpe, nsga2, random), made by
    # tuner.study.sampler.make_sampler with the seed; None: the one the study was made with (tpe
    # for a new study). Benchmarks that compare samplers pass the kind here too.
    sampler: str | None = None
    # Limits the sampler learns as Optuna constraints (max_vram_gb, max_compile_s); None: those
    # the study was made with (none for a new study).
    limits: Constraints | None = None
    # This run tries eager again where the study holds that it crashed, ran out of memory or hit
    # a CUDA error (tuner.study.broken): the model or the machine was fixed.
    retry_failed: bool = False
    # Configs of other studies to measure first, after the baselines (tuner search
    # --start-from); None: those the study was made with, if any.
    start_from: StartFrom | None = None
    # The value each searched inductor option takes in each searched mode where a config leaves
    # it unset, as the torch that made the study runs it (tuner.domain.inductor_options
    # .installed_defaults): recorded with the study, its configs are named by what differs from
    # them (tuner.domain.naming). None: not known (the names fall back to KNOWN_DEFAULTS).
    option_defaults: OptionDefaults | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.sampler is not None:
            from tuner.study.sampler import check_sampler

            check_sampler(self.sampler)

    @property
    def layout(self) -> StudyLayout:
        return StudyLayout.of(self.root, self.name)

    @property
    def directory(self) -> Path:
        return self.layout.directory

    @property
    def names(self) -> NameBasis:
        """What its configs' names are relative to (:func:`tuner.domain.naming.config_name`)."""
        return NameBasis.of(self.workload, self.option_defaults)

    @property
    def storage_url(self) -> str:
        return self.storage or self.layout.sqlite_url
