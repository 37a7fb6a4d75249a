"""What ``--start-from`` gives a study (:class:`StartFrom`), as it is stored with the study:
records only, so the study's spec can hold one without the search's queue
(:mod:`tuner.study.start_from` reads the other studies and queues their configs)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.domain.config import TrialConfig


@dataclasses.dataclass(frozen=True)
class Started:
    """A config of this space to measure first, and the study it came from."""

    config: TrialConfig
    source: str  # that study's name: the row's started_from


@dataclasses.dataclass(frozen=True)
class StartFrom:
    """What ``--start-from`` gives a study: the studies' names in the order given, the configs
    to measure first in order, and what to say of them (one line each)."""

    studies: tuple[str, ...]
    configs: tuple[Started, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"studies": list(self.studies),
                "configs": [{"config": s.config.to_dict(), "from": s.source}
                            for s in self.configs],
                "notes": list(self.notes)}

    def source_of(self, key: str) -> str | None:
        """The study that gave the config ``key`` (a row's started_from); None for the others."""
        return next((s.source for s in self.configs if s.config.key == key), None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StartFrom:
        return cls(tuple(data.get("studies") or ()),
                   tuple(Started(TrialConfig.from_dict(c["config"]), str(c["from"]))
                         for c in data.get("configs") or ()),
                   tuple(data.get("notes") or ()))
