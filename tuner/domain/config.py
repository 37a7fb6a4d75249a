"""One point of the search space (:class:`TrialConfig`): how the model is compiled, at which
batch size, in which precision and memory format, with which inductor options.

Backend ``"eager"`` means plain PyTorch with no ``torch.compile`` at all: the baseline every other
row is compared with. (Dynamo's own debugging backend of that name is not offered.)

The dimensions added on 2026-11-30 in tuner 0.1.0 (a87c065: ``dtype``, ``channels_last``,
``cudnn_benchmark``, ``options``) are ``None``/empty unless the study searches them: then the
workload's value holds, and the config's key is the one it had before those dimensions existed,
so studies made before them resume unchanged. ``compile_scope`` (tuner 0.3.0) is the same:
``None`` compiles the whole model, and a config's key names it only where it is set.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.domain.workload import Workload

EAGER = "eager"

INDUCTOR = "inductor"

DEFAULT_MODE = "default"

# Inductor modes whose compile searches kernels and takes minutes (max-autotune of resnet18 had
# no result after 380 s on the H200): measured after the others, and probed first
# (tuner.study.probe).
MAX_AUTOTUNE = "max-autotune"


def is_max_autotune(mode: str | None) -> bool:
    """Whether ``mode`` is one of inductor's max-autotune modes (its name starts so)."""
    return mode is not None and mode.startswith(MAX_AUTOTUNE)


# Inductor modes that record CUDA graphs; on the CPU they are the same as their graph-less twin.
CUDAGRAPH_MODES = frozenset({"reduce-overhead", "max-autotune"})

# What torch.compile is given (``compile_scope``): the whole model, torch.compile(model), or
# each block of its largest list of repeated blocks, compiled in place while the rest runs
# eager (tuner.runtime.regions: PyTorch's regional compilation). None in a config: whole.
WHOLE = "whole"
REGIONAL = "regional"
COMPILE_SCOPES = (WHOLE, REGIONAL)

# Short names of precisions, in labels and names (tuner.domain.naming).
SHORT_DTYPE = {"float32": "fp32", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16"}

# An inductor option's value, as Optuna, JSON and Parquet can hold it.
OptionValue = bool | int | float | str | None


def option_column(name: str) -> str:
    """The Parquet column of an inductor option: ``triton.cudagraphs`` -> ``opt_triton_cudagraphs``."""
    return "opt_" + name.replace(".", "_")


@dataclasses.dataclass(frozen=True)
class TrialConfig:
    """One point of the search space: how the model is compiled and at which batch size."""

    backend: str
    batch_size: int
    mode: str | None = None  # inductor only
    dynamic: bool | None = None  # compiled backends only; None lets dynamo decide
    # None: the workload's (not searched). A precision of tuner.domain.workload.PRECISIONS.
    dtype: str | None = None
    channels_last: bool | None = None  # None: the workload's
    cudnn_benchmark: bool | None = None  # None: the workload's
    # inductor only: options of torch._inductor.config given to torch.compile(options=...),
    # sorted by name (a mapping is accepted and sorted, so equal choices give equal configs)
    options: tuple[tuple[str, OptionValue], ...] = ()
    # compiled backends only: one of COMPILE_SCOPES; None: whole (not searched)
    compile_scope: str | None = None

    def __post_init__(self) -> None:
        items: Iterable[Any] = (self.options.items() if isinstance(self.options, Mapping)
                                else self.options)
        object.__setattr__(self, "options", tuple(sorted((str(k), v) for k, v in items)))
        if self.options and self.backend != INDUCTOR:
            # Only inductor reads torch._inductor.config: elsewhere an option would be a
            # second key for the same measurement.
            raise ValueError(f"inductor options given for backend {self.backend!r}")
        if self.compile_scope is not None and (
                not self.compiled or self.compile_scope not in COMPILE_SCOPES):
            raise ValueError(f"compile scope {self.compile_scope!r} given for backend "
                             f"{self.backend!r}: one of {', '.join(COMPILE_SCOPES)}, compiled "
                             "backends only")

    @property
    def compiled(self) -> bool:
        return self.backend != EAGER

    @property
    def regional(self) -> bool:
        """Whether each repeated block is compiled, not the whole model."""
        return self.compile_scope == REGIONAL

    @functools.cached_property  # a search compares every config's key after every trial
    def key(self) -> str:
        """A stable text key: two trials with the same key measure the same thing. The
        dimensions added in tuner 0.1.0 on 2026-11-30 (a87c065) are appended only where set, so
        keys made before them stay what they were."""
        if not self.compiled:
            key = f"eager|bs={self.batch_size}"
        else:
            key = f"{self.backend}|{self.mode or '-'}|dynamic={self.dynamic}|bs={self.batch_size}"
        if self.dtype is not None:
            key += f"|dtype={self.dtype}"
        if self.channels_last is not None:
            key += f"|channels_last={self.channels_last}"
        if self.cudnn_benchmark is not None:
            key += f"|cudnn_benchmark={self.cudnn_benchmark}"
        if self.compile_scope is not None:
            key += f"|scope={self.compile_scope}"
        return key + "".join(f"|opt.{name}={value!r}" for name, value in self.options)

    @functools.cached_property
    def label(self) -> str:
        """Every setting the config holds but its batch size, as the Parquet ``label`` column
        has it: ``inductor:reduce-overhead`` (dynamic=False), ``inductor:default dynamic=None``,
        ``inductor:default regional`` (each repeated block compiled) or ``inductor:default bf16
        epilogue_fusion=False``. People read configs by their name
        (:func:`tuner.domain.naming.config_name`), which says only what differs from the mode's
        defaults."""
        if not self.compiled:
            label = EAGER
        else:
            label = self.backend if self.mode is None else f"{self.backend}:{self.mode}"
            # Static shapes (dynamic=False) are the common case and the default: no suffix.
            label = label if self.dynamic is False else f"{label} dynamic={self.dynamic}"
        parts = [label, REGIONAL] if self.regional else [label]
        if self.dtype is not None:
            parts.append(SHORT_DTYPE.get(self.dtype, self.dtype))
        if self.channels_last is not None:
            parts.append("channels_last" if self.channels_last else "contiguous")
        if self.cudnn_benchmark is not None:
            parts.append(f"cudnn.benchmark={self.cudnn_benchmark}")
        parts += [f"{name}={value!r}" for name, value in self.options]
        return " ".join(parts)

    @property
    def option_dict(self) -> dict[str, OptionValue]:
        return dict(self.options)

    def compile_kwargs(self) -> dict[str, Any]:
        """Exactly the keyword arguments given to ``torch.compile`` (empty for eager).

        With inductor options, the mode is given as the options it stands for
        (``torch._inductor.list_mode_options``) under the chosen ones: torch.compile refuses a
        mode and options together, and this way they combine.
        """
        if not self.compiled:
            return {}
        kwargs: dict[str, Any] = {"backend": self.backend, "dynamic": self.dynamic}
        if self.options:
            from torch._inductor import list_mode_options

            kwargs["options"] = {**list_mode_options(self.mode, self.dynamic),
                                 **self.option_dict}
        elif self.mode is not None:
            kwargs["mode"] = self.mode
        return kwargs

    def applied_to(self, workload: Workload) -> Workload:
        """The workload as this config runs it: its dtype, memory format and cudnn.benchmark
        where the config sets them."""
        changes = {name: getattr(self, name) for name in ("dtype", "channels_last", "cudnn_benchmark")
                   if getattr(self, name) is not None}
        return dataclasses.replace(workload, **changes) if changes else workload

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; the dimensions added on 2026-11-30 (a87c065) only where set (records
        of tuner 0.1.0 before them stay as they were)."""
        data: dict[str, Any] = {"backend": self.backend, "batch_size": self.batch_size,
                                "mode": self.mode, "dynamic": self.dynamic}
        for name in ("dtype", "channels_last", "cudnn_benchmark"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        if self.options:
            data["options"] = self.option_dict
        if self.compile_scope is not None:
            data["compile_scope"] = self.compile_scope
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialConfig:
        return cls(backend=data["backend"], batch_size=int(data["batch_size"]),
                   mode=data.get("mode"), dynamic=data.get("dynamic"), dtype=data.get("dtype"),
                   channels_last=data.get("channels_last"),
                   cudnn_benchmark=data.get("cudnn_benchmark"),
                   options=tuple((data.get("options") or {}).items()),
                   compile_scope=data.get("compile_scope"))


def uses_cudagraphs(config: TrialConfig) -> bool:
    """Whether the config records CUDA graphs (then each call marks an inference step): an
    explicit ``triton.cudagraphs`` option decides over the mode."""
    if config.backend == "cudagraphs":
        return True
    if config.backend != INDUCTOR:
        return False
    options = config.option_dict
    if "triton.cudagraphs" in options:
        return bool(options["triton.cudagraphs"])
    return config.mode in CUDAGRAPH_MODES
