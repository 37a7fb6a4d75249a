"""One point of the search space (:class:`TrialConfig`): how the model is compiled, at which
batch size.

Backend ``"eager"`` means plain PyTorch with no ``torch.compile`` at all: the baseline every other
row is compared with. (Dynamo's own debugging backend of that name is not offered.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

EAGER = "eager"

INDUCTOR = "inductor"

DEFAULT_MODE = "default"

DYNAMIC_CHOICES: tuple[bool | None, ...] = (None, False, True)

# Inductor modes that record CUDA graphs; on the CPU they are the same as their graph-less twin.
CUDAGRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})


@dataclasses.dataclass(frozen=True)
class TrialConfig:
    """One point of the search space: how the model is compiled and at which batch size."""

    backend: str
    batch_size: int
    mode: str | None = None  # inductor only
    dynamic: bool | None = None  # compiled backends only; None lets dynamo decide

    @property
    def compiled(self) -> bool:
        return self.backend != EAGER

    @property
    def key(self) -> str:
        """A stable text key: two trials with the same key measure the same thing."""
        if not self.compiled:
            return f"eager|bs={self.batch_size}"
        return f"{self.backend}|{self.mode or '-'}|dynamic={self.dynamic}|bs={self.batch_size}"

    @property
    def label(self) -> str:
        """Short label without the batch size, e.g. ``inductor:reduce-overhead`` (dynamic=False)
        or ``inductor:default dynamic=None``."""
        if not self.compiled:
            return "eager"
        label = self.backend if self.mode is None else f"{self.backend}:{self.mode}"
        # Static shapes (dynamic=False) are the common case and the default: no suffix.
        return label if self.dynamic is False else f"{label} dynamic={self.dynamic}"

    def compile_kwargs(self) -> dict[str, Any]:
        """Exactly the keyword arguments given to ``torch.compile`` (empty for eager)."""
        if not self.compiled:
            return {}
        kwargs: dict[str, Any] = {"backend": self.backend, "dynamic": self.dynamic}
        if self.mode is not None:
            kwargs["mode"] = self.mode
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialConfig:
        return cls(backend=data["backend"], batch_size=int(data["batch_size"]),
                   mode=data.get("mode"), dynamic=data.get("dynamic"))


def uses_cudagraphs(config: TrialConfig) -> bool:
    """Whether the config records CUDA graphs (then each call marks an inference step)."""
    return config.backend == "cudagraphs" or (config.backend == INDUCTOR
                                              and config.mode in CUDAGRAPH_MODES)
