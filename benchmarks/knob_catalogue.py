"""The candidate knobs of issue 53 and the studies that measure them (record_knobs.py records
them on a GPU, knobs.py reports them).

A :class:`Candidate` is one change to what ``torch.compile(model, mode=...)`` does with torch's
own settings: one knob (an inductor option, ``channels_last`` or ``dynamic``) set to a value
other than torch's, on a base mode, with any options it needs beside it held on both sides
(``fixed``). Its effect is the ratio of a config with the change to the same config without it.

Three designs measure them:

- ``grid``: a landscape (benchmarks/replay.py): modes default and reduce-overhead times five
  cheap candidates each both ways, plus eager, every config measured: 66 configs per batch size
  for a CNN. Each candidate's effect is the median over the grid's pairs.
- ``screen``: one small study per candidate (an "arm"): eager, the base mode with torch's
  settings, and the base with the candidate: every candidate measured once on its own. The base
  measured again in each arm is a noise floor.
- ``sweep`` (benchmarks/knob_sweep.py): every cheap candidate once, in one study per model:
  eager, the base and the base with each candidate alone, each measured once.

The names are checked against the installed torch when a design is made: a candidate whose
option or mode this torch lacks is left out with a line saying so (the GPU machine's torch,
2.11, is older than this box's).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tuner.domain.config import EAGER, INDUCTOR, OptionValue, TrialConfig
from tuner.domain.space import SearchSpace
from tuner.errors import UserError

LANDSCAPES = "benchmarks/landscapes"  # the grids, relative to the repository root
SCREENS = "benchmarks/screens"  # the screens: a folder per model and batch sizes, an arm each
DESIGN_FILE = "design.json"  # beside the studies: torch's settings where they were recorded
REDUCE_OVERHEAD = "reduce-overhead"
GRID_MODES = ("default", REDUCE_OVERHEAD)
FORMAT_KNOBS = ("channels_last", "dynamic")  # tuner dimensions; the rest are inductor options
FAMILIES = frozenset({"cnn", "vit", "text"})
IMAGE = frozenset({"cnn", "vit"})
GEMM_BACKENDS = "max_autotune_gemm_backends"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One knob set away from torch's value, on a base mode."""

    name: str
    what: str  # one line for the page
    knob: str  # an inductor option, or "channels_last" / "dynamic"
    value: OptionValue  # what the candidate sets (torch's own value is the other side)
    base: str = REDUCE_OVERHEAD  # the mode a screen measures it on
    fixed: tuple[tuple[str, OptionValue], ...] = ()  # inductor options held on both sides
    families: frozenset[str] = FAMILIES  # the kinds of model it can change
    slow: bool = False  # an autotuning search: minutes of compile, screened under a budget

    @property
    def options(self) -> list[str]:
        """The inductor options it names (checked against the installed torch)."""
        mine = [] if self.knob in FORMAT_KNOBS else [self.knob]
        return mine + [name for name, _ in self.fixed]

    def mapping(self, settings: TorchSettings) -> str:
        """How the tuner expresses it: the base mode and the values searched, torch's first
        (a value with a comma goes in a ``--space`` file, where it stays one value)."""
        if self.knob in FORMAT_KNOBS:
            knob = f"--{self.knob.replace('_', '-')} false,true"
        else:
            torch_value = settings.value(self.knob, self.base)
            knob = f"--inductor-option {self.knob}={_text(torch_value)},{_text(self.value)}"
        fixed = "".join(f" --inductor-option {name}={_text(value)}" for name, value in self.fixed)
        return f"--mode {self.base} {knob}{fixed}"


_GEMM = "the max-autotune GEMM search (max_autotune_gemm, which also tunes convolutions)"
CATALOGUE: tuple[Candidate, ...] = (
    Candidate("channels_last", "the model and its 4-D inputs in channels_last",
              "channels_last", True, families=IMAGE),
    Candidate("freezing", "weights inlined as constants and folded", "freezing", True),
    Candidate("combo_kernels", "independent kernels combined into one launch, without "
              "benchmarking each combination", "combo_kernels", True,
              fixed=(("benchmark_combo_kernel", False),)),
    Candidate("conv_1x1_as_mm", "1x1 convolutions as matmuls", "conv_1x1_as_mm", True,
              families=frozenset({"cnn"})),
    Candidate("layout_optimization", "inductor's own channels_last choice for convolutions, "
              "turned off", "layout_optimization", False, families=IMAGE),
    Candidate("epilogue_fusion", "pointwise epilogues fused into matmul templates, turned off",
              "epilogue_fusion", False),
    Candidate("shape_padding", "matmul shapes padded for tensor cores, turned off",
              "shape_padding", False),
    Candidate("coordinate_descent_tuning", "coordinate descent over Triton kernel configs, "
              "alone", "coordinate_descent_tuning", True),
    Candidate("cudagraph_trees", "CUDA graphs without the tree manager (one graph per "
              "function), as reduce-overhead records them otherwise", "triton.cudagraph_trees",
              False),
    Candidate("dynamic", "symbolic shapes from the first compile (torch.compile's dynamic=True); "
              "each trial runs one size, so per-size specialisation is the static config",
              "dynamic", True),
    Candidate("gemm_search", f"{_GEMM}, backends ATEN,TRITON", "max_autotune_gemm", True,
              fixed=((GEMM_BACKENDS, "ATEN,TRITON"),), slow=True),
    Candidate("gemm_search_aten", f"{_GEMM}, backend ATEN only", "max_autotune_gemm", True,
              fixed=((GEMM_BACKENDS, "ATEN"),), slow=True),
    Candidate("gemm_search_triton", f"{_GEMM}, backend TRITON only", "max_autotune_gemm", True,
              fixed=((GEMM_BACKENDS, "TRITON"),), slow=True),
    Candidate("persistent_tma_matmul", "persistent TMA matmul templates in that GEMM search "
              "(ATEN,TRITON)", "triton.enable_persistent_tma_matmul", True,
              fixed=(("max_autotune_gemm", True), (GEMM_BACKENDS, "ATEN,TRITON")), slow=True),
    Candidate("max_autotune_without_cdt", "max-autotune without its coordinate descent "
              "(torch's max-autotune turns it on): the base is plain max-autotune",
              "coordinate_descent_tuning", False, base="max-autotune", slow=True),
)
BY_NAME = {c.name: c for c in CATALOGUE}

# The five cheap knobs a grid crosses with the two modes, per kind of model (KNOBS overrides).
GRID_KNOBS = {
    "cnn": ("channels_last", "freezing", "combo_kernels", "conv_1x1_as_mm", "layout_optimization"),
    "vit": ("channels_last", "freezing", "combo_kernels", "epilogue_fusion", "shape_padding"),
    "text": ("dynamic", "freezing", "combo_kernels", "epilogue_fusion", "shape_padding"),
}


def family(model: str) -> str:
    """The kind of model: a factory is text (tuner.examples:text_transformer), a torchvision
    vit/swin/maxvit a vision transformer, any other torchvision model a CNN."""
    if ":" in model:
        return "text"
    return "vit" if model.startswith(("vit", "swin", "maxvit")) else "cnn"


@dataclasses.dataclass(frozen=True)
class TorchSettings:
    """What torch does when a knob is left alone: its version, each option's value and each
    mode's own options (``torch._inductor.list_mode_options``)."""

    torch: str
    options: Mapping[str, OptionValue]  # every option of torch._inductor.config that is a value
    modes: Mapping[str, Mapping[str, OptionValue]]

    @classmethod
    def installed(cls) -> TorchSettings:
        import torch
        from torch._inductor import config, list_mode_options

        values = {name: value for name, value in config.get_config_copy().items()
                  if value is None or isinstance(value, (bool, int, float, str))}
        return cls(torch.__version__, values, list_mode_options())

    def value(self, knob: str, mode: str | None) -> OptionValue:
        """Torch's value of a knob in a mode: false for channels_last and dynamic (the tuner's
        static default), else the mode's own option or the config's."""
        if knob in FORMAT_KNOBS:
            return False
        return (self.modes.get(mode or "default") or {}).get(knob, self.options.get(knob))

    def missing(self, candidate: Candidate) -> str | None:
        """Why this torch cannot run the candidate (an option or mode it lacks), or None."""
        if candidate.base not in self.modes:
            return f"torch {self.torch} has no mode {candidate.base}"
        absent = [name for name in candidate.options if name not in self.options]
        if absent:
            return f"torch {self.torch} has no inductor option {', '.join(absent)}"
        if self.value(candidate.knob, candidate.base) == candidate.value:
            return (f"torch {self.torch} sets {candidate.knob}={_text(candidate.value)} in "
                    f"{candidate.base} already")
        return None

    def to_dict(self, names: Iterable[str] = ()) -> dict[str, Any]:
        """Plain JSON data, holding the options named (all where none are)."""
        keep = set(names)
        return {"torch": self.torch, "modes": {m: dict(o) for m, o in self.modes.items()},
                "options": {k: v for k, v in self.options.items() if not keep or k in keep}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TorchSettings:
        return cls(str(data["torch"]), dict(data["options"]), dict(data["modes"]))


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    """One study of a design: where it lives (``folder``/``name`` under the repository root),
    its space, for a screen's arm the candidate it measures, and for a sweep the configs it
    measures after the baselines (``queue``: each with its candidate), the rest of its space
    never."""

    name: str
    folder: str
    space: SearchSpace
    candidate: str | None = None
    slow: bool = False
    queue: tuple[tuple[str, TrialConfig], ...] = ()

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.name}"

    def configs(self) -> list[TrialConfig]:
        """What the study measures: every config of its space, or a sweep's baselines (eager
        and the base at each batch size) and its queue."""
        if not self.queue:
            return self.space.configs()
        return self.space.baselines() + [config for _, config in self.queue]

    def keys(self) -> set[str]:
        return {c.key for c in self.configs()}

    def toml(self) -> str:
        """The space as a ``tuner search --space`` file (a comma inside a value stays one)."""
        space = self.space
        lines = [f"batch_sizes = [{', '.join(map(str, space.batch_sizes))}]",
                 f"backends = {_list(space.backends)}", f"modes = {_list(space.modes)}",
                 f"dynamic = {_list(space.dynamic)}"]
        if space.channels_last:
            lines.append(f"channels_last = {_list(space.channels_last)}")
        if space.options:
            lines += ["", "[inductor_options]"]
            lines += [f"{json.dumps(name)} = {_list(values)}" for name, values in space.options]
        return "\n".join(lines) + "\n"


def default_name(model: str, batch_sizes: Sequence[int], gpu: str, dtype: str = "bf16") -> str:
    """``resnet50-bf16-bs1-16-h100``: a factory by its function's name."""
    short = model.rsplit(":", 1)[-1]
    return f"{short}-{dtype}-bs{'-'.join(map(str, batch_sizes))}-{gpu}"


def gpu_short(name: str | None) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100``; no GPU -> ``cpu``."""
    if not name:
        return "cpu"
    found = re.search(r"\b([A-Z]+\d+[A-Za-z]*)\b", name.replace("NVIDIA", ""))
    return found.group(1).lower() if found else re.sub(r"\W+", "-", name.lower()).strip("-")


def grid(model: str, batch_sizes: Sequence[int], name: str, settings: TorchSettings,
         knobs: Sequence[str] | None = None) -> tuple[list[StudyPlan], list[str]]:
    """The landscape of ``model``: modes default and reduce-overhead times each knob both ways
    (torch's value first, as the baselines take it), plus eager; and the lines of what was left
    out."""
    chosen = [_candidate(k, "KNOBS") for k in (knobs or GRID_KNOBS[family(model)])]
    said = []
    kept = []
    for candidate in chosen:
        why = settings.missing(candidate)
        if candidate.slow:
            raise UserError(f"KNOBS: {candidate.name} compiles for minutes a config; a grid of "
                            "it does not fit the GPU calls: screen it (DESIGN=screen)")
        if why:
            said.append(f"skipped {candidate.name}: {why}")
        else:
            kept.append(candidate)
    dynamic: tuple[bool | None, ...] = (False,)
    channels_last: tuple[bool, ...] = ()
    options: dict[str, tuple[OptionValue, ...]] = {}
    for candidate in kept:
        values = (settings.value(candidate.knob, "default"), candidate.value)
        if candidate.knob == "dynamic":
            dynamic = (False, True)
        elif candidate.knob == "channels_last":
            channels_last = (False, True)
        else:
            _put(options, candidate.knob, values)
        for option, value in candidate.fixed:
            _put(options, option, (value,))
    space = SearchSpace((EAGER, INDUCTOR), GRID_MODES, dynamic, tuple(batch_sizes),
                        channels_last=channels_last, options=tuple(options.items()))
    return [StudyPlan(name, LANDSCAPES, space)], said


def screen(model: str, batch_sizes: Sequence[int], name: str, settings: TorchSettings,
           arms: str | Sequence[str] = "cheap") -> tuple[list[StudyPlan], list[str]]:
    """One arm per candidate: eager, the base mode with torch's settings, and the base with
    the candidate, at each batch size. ``arms``: ``cheap`` (every candidate that compiles in
    seconds), ``slow`` (the autotuning searches), ``all``, or candidate names. Candidates for
    another kind of model are left out, each with a line, as are those this torch lacks."""
    kind = family(model)
    if isinstance(arms, str) and arms in ("cheap", "slow", "all"):
        chosen = [c for c in CATALOGUE
                  if arms == "all" or c.slow == (arms == "slow")]
    else:
        names = arms.split(",") if isinstance(arms, str) else arms
        chosen = [_candidate(n, "ARMS") for n in names if n]
    plans, said = [], []
    for candidate in chosen:
        why = settings.missing(candidate) or (
            None if kind in candidate.families else f"not for a {kind} model")
        if why:
            said.append(f"skipped {candidate.name}: {why}")
            continue
        options: dict[str, tuple[OptionValue, ...]] = dict((n, (v,)) for n, v in candidate.fixed)
        if candidate.knob not in FORMAT_KNOBS:
            options[candidate.knob] = (settings.value(candidate.knob, candidate.base),
                                       candidate.value)
        space = SearchSpace(
            (EAGER, INDUCTOR), (candidate.base,),
            (False, True) if candidate.knob == "dynamic" else (False,), tuple(batch_sizes),
            channels_last=(False, True) if candidate.knob == "channels_last" else (),
            options=tuple(options.items()))
        plans.append(StudyPlan(candidate.name, f"{SCREENS}/{name}", space, candidate.name,
                               candidate.slow))
    return plans, said


def _candidate(name: str, what: str) -> Candidate:
    if name.strip() not in BY_NAME:
        raise UserError(f"{what}: unknown candidate {name!r}; choose from "
                        f"{', '.join(BY_NAME)}")
    return BY_NAME[name.strip()]


def _put(options: dict[str, tuple[OptionValue, ...]], name: str,
         values: tuple[OptionValue, ...]) -> None:
    """Add an option's values, refusing two candidates that hold one option differently."""
    if name in options and options[name] != values:
        raise UserError(f"KNOBS: two candidates set {name} ({_text(options[name][-1])} and "
                        f"{_text(values[-1])}): choose one of them")
    options[name] = values


def _list(values: Iterable[Any]) -> str:
    return "[" + ", ".join(_toml(v) for v in values) + "]"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '"none"'
    return json.dumps(value)


def _text(value: OptionValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
