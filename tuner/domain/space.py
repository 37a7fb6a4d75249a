"""Which trials a study may run (:class:`SearchSpace`), validated against the installed torch.

The choices are never taken from a hard-coded list: a backend must be registered with dynamo, a
mode must be one inductor lists, an inductor option must be a name of ``torch._inductor.config``
whose type is a boolean, a number, a string or a list of literals.

A dimension given one value is not searched: that value is the workload's (the CLI puts it
there), and the study's configs, keys and stored space stay what they were before the dimension
could be searched (tuner 0.1.0 before 2026-11-30, a87c065).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from tuner.domain.config import (
    COMPILE_SCOPES,
    CUDAGRAPH_MODES,
    DEFAULT_MODE,
    EAGER,
    INDUCTOR,
    WHOLE,
    OptionValue,
    TrialConfig,
    is_max_autotune,
)
from tuner.domain.inductor_options import check_options, cuda_graph_option
from tuner.domain.workload import MAX_BATCH_SIZE, check_cudnn_benchmark, check_precision
from tuner.errors import UserError

# Backends that only make sense on a CUDA device.
_CUDA_ONLY_BACKENDS = {"cudagraphs"}


# Registered with dynamo but only useful to debug dynamo or torch itself.
_NOT_OFFERED = {"eager", "eager_debug", "eager_noexcept", "pre_dispatch_eager", "invoke_subgraph",
                "dynamo_minifier_backend", "dynamo_accuracy_minifier_backend"}


class _Formats(TypedDict):
    """The memory-format settings a baseline takes (``TrialConfig`` keywords)."""

    channels_last: bool | None
    cudnn_benchmark: bool | None


# Backends dynamo registers whatever is installed, but that import a package of their own when
# they compile: without it every trial would end compile_error. backend -> (module, what to
# install). Backends that need nothing beyond torch (inductor, cudagraphs, aot_eager, ts) are not
# here; those that packages register through entry points come with their package.
BACKEND_PACKAGES = {
    "tvm": ("tvm", "apache-tvm"),
    "openxla": ("torch_xla", "torch_xla"),
    "openxla_eval": ("torch_xla", "torch_xla"),
    "onnxrt": ("onnxruntime", "onnxruntime onnx onnxscript"),
    "tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "torch_tensorrt": ("torch_tensorrt", "torch-tensorrt"),
    "ipex": ("intel_extension_for_pytorch", "intel-extension-for-pytorch"),
}


def installed_backends() -> list[str]:
    """Backends the installed torch offers and can run here, ``eager`` (no compile) first."""
    import torch._dynamo

    registered = torch._dynamo.list_backends(exclude_tags=())
    return [EAGER] + sorted(b for b in registered
                            if b not in _NOT_OFFERED and not b.endswith("_TESTING_ONLY")
                            and missing_package(b) is None)


def missing_package(backend: str) -> str | None:
    """What to install for ``backend`` where its package is missing; None if nothing is."""
    import importlib.util

    module, install = BACKEND_PACKAGES.get(backend, (None, None))
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return install


def installed_modes() -> list[str]:
    """Inductor modes the installed torch offers, ``default`` first."""
    import torch._inductor

    modes = list(torch._inductor.list_mode_options())
    return [DEFAULT_MODE] + [m for m in modes if m != DEFAULT_MODE]


@dataclasses.dataclass(frozen=True)
class SearchSpace:
    """The choices of each dimension. Every combination :meth:`configs` yields can run.

    ``dtypes``, ``channels_last``, ``cudnn_benchmark`` and ``options`` are empty when not
    searched (the workload's value holds); ``options`` holds (inductor option, its values),
    sorted by name, and applies to inductor configs only. ``compile_scopes`` (of
    :data:`~tuner.domain.config.COMPILE_SCOPES`) applies to compiled configs; empty: the whole
    model is compiled, and the configs do not name a scope.
    """

    backends: tuple[str, ...]
    modes: tuple[str, ...]
    dynamic: tuple[bool | None, ...]
    batch_sizes: tuple[int, ...]
    dtypes: tuple[str, ...] = ()
    channels_last: tuple[bool, ...] = ()
    cudnn_benchmark: tuple[bool, ...] = ()
    options: tuple[tuple[str, tuple[OptionValue, ...]], ...] = ()
    compile_scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        items: Iterable[Any] = (self.options.items() if isinstance(self.options, Mapping)
                                else self.options)
        object.__setattr__(self, "options", tuple(sorted((str(k), tuple(v)) for k, v in items)))

    def _global_choices(self) -> list[tuple[str | None, bool | None, bool | None]]:
        """(dtype, channels_last, cudnn_benchmark) of every config; None: not searched."""
        return list(itertools.product(self.dtypes or (None,), self.channels_last or (None,),
                                      self.cudnn_benchmark or (None,)))

    def _option_choices(self) -> list[tuple[tuple[str, OptionValue], ...]]:
        names = [name for name, _ in self.options]
        return [tuple(zip(names, values))
                for values in itertools.product(*(values for _, values in self.options))]

    def configs(self) -> list[TrialConfig]:
        """Every runnable config, impossible combinations left out (mode and options only with
        inductor)."""
        out: list[TrialConfig] = []
        for bs in self.batch_sizes:
            for backend in self.backends:
                if backend == EAGER:
                    out += [TrialConfig(EAGER, bs, dtype=dt, channels_last=cl, cudnn_benchmark=cb)
                            for dt, cl, cb in self._global_choices()]
                    continue
                modes: Iterable[str | None] = self.modes if backend == INDUCTOR else (None,)
                options = self._option_choices() if backend == INDUCTOR else [()]
                for mode, dyn, (dt, cl, cb), opts, scope in itertools.product(
                        modes, self.dynamic, self._global_choices(), options,
                        self.compile_scopes or (None,)):
                    out.append(TrialConfig(backend, bs, mode, dyn, dtype=dt, channels_last=cl,
                                           cudnn_benchmark=cb, options=opts,
                                           compile_scope=scope))
        return out

    def baselines(self) -> list[TrialConfig]:
        """What is measured first, in this order: eager at every batch size (in every precision
        searched: each row's accuracy and speed against it), then, where inductor is in the
        space, inductor in each mode at every batch size, inductor's default first and the
        max-autotune modes last, whose compile takes minutes (each row's speedup against the
        plain modes). Each with the first value of the other dimensions (list the default
        first)."""
        first: _Formats = {
            "channels_last": self.channels_last[0] if self.channels_last else None,
            "cudnn_benchmark": self.cudnn_benchmark[0] if self.cudnn_benchmark else None}
        out = [TrialConfig(EAGER, bs, dtype=dt, **first)
               for bs in self.batch_sizes for dt in self.dtypes or (None,)]
        if INDUCTOR in self.backends:
            # stable: default first, max-autotune last
            modes = sorted(self.modes, key=lambda m: (m != DEFAULT_MODE, is_max_autotune(m)))
            dyn = False if False in self.dynamic else self.dynamic[0]
            dtype = self.dtypes[0] if self.dtypes else None
            options = tuple((name, values[0]) for name, values in self.options)
            scope = self.compile_scopes[0] if self.compile_scopes else None
            out += [TrialConfig(INDUCTOR, bs, mode, dyn, dtype=dtype, options=options,
                                compile_scope=scope, **first)
                    for mode in modes for bs in self.batch_sizes]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; the dimensions added on 2026-11-30 (a87c065) only where searched, so
        the space of a study made by tuner 0.1.0 before them compares equal when resumed with the
        same options."""
        data: dict[str, Any] = {"backends": list(self.backends), "modes": list(self.modes),
                                "dynamic": list(self.dynamic),
                                "batch_sizes": list(self.batch_sizes)}
        for name in ("dtypes", "channels_last", "cudnn_benchmark"):
            if getattr(self, name):
                data[name] = list(getattr(self, name))
        if self.options:
            data["options"] = {name: list(values) for name, values in self.options}
        if self.compile_scopes:  # tuner 0.3.0: only where searched, as the dimensions above
            data["compile_scopes"] = list(self.compile_scopes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchSpace:
        return cls(tuple(data["backends"]), tuple(data["modes"]), tuple(data["dynamic"]),
                   tuple(int(b) for b in data["batch_sizes"]),
                   dtypes=tuple(data.get("dtypes") or ()),
                   channels_last=tuple(data.get("channels_last") or ()),
                   cudnn_benchmark=tuple(data.get("cudnn_benchmark") or ()),
                   options=tuple((data.get("options") or {}).items()),
                   compile_scopes=tuple(data.get("compile_scopes") or ()))


# The inductor options a CUDA search covers when the user names none: those that moved resnet50
# bf16 latency both ways on the H200 (docs/examples.md, "Example: the extended space"), each
# with the installed torch's value first, so the baselines keep it.
CUDA_DEFAULT_OPTIONS = ("coordinate_descent_tuning", "epilogue_fusion", "freezing", "shape_padding")


def default_options(device: str, backends: Sequence[str] | None,
                    current: Mapping[str, Any] | None = None) -> dict[str, list[Any]] | None:
    """The inductor options a search covers where the user named none: on CUDA, with inductor
    in the space, :data:`CUDA_DEFAULT_OPTIONS` at their current value and the other; otherwise
    none. ``current``: option name -> value (default: this torch's inductor config)."""
    if not device.startswith("cuda") or (backends is not None and INDUCTOR not in backends):
        return None
    if current is None:
        from torch._inductor import config

        current = config.get_config_copy()
    return {name: [current[name], not current[name]] for name in CUDA_DEFAULT_OPTIONS
            if isinstance(current.get(name), bool)} or None


def default_formats(device: str, image_model: bool) -> list[bool]:
    """The memory formats a search covers where the user gave none: channels_last off and on
    for a torchvision model (4-D images) on CUDA; off otherwise (a factory's inputs need not
    be images)."""
    return [False, True] if device.startswith("cuda") and image_model else [False]



def _bools(values: Sequence[Any], option: str) -> tuple[bool, ...]:
    table = {"true": True, "false": False, "on": True, "off": False}
    out = []
    for v in values:
        if not isinstance(v, bool) and str(v).strip().lower() not in table:
            raise UserError(f"{option} {v!r}: choose from true, false (e.g. {option} false,true)",
                            about=option)
        out.append(v if isinstance(v, bool) else table[str(v).strip().lower()])
    return tuple(dict.fromkeys(out))


def build_space(
    *,
    device: str,
    batch_sizes: Sequence[int],
    backends: Sequence[str] | None = None,
    modes: Sequence[str] | None = None,
    dynamic: Sequence[bool | None] | None = None,
    available_backends: Sequence[str] | None = None,
    available_modes: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    channels_last: Sequence[bool | str] | None = None,
    cudnn_benchmark: Sequence[bool | str] | None = None,
    options: Mapping[str, Sequence[Any]] | None = None,
    available_options: Mapping[str, Any] | None = None,
    compile_scopes: Sequence[str] | None = None,
) -> SearchSpace:
    """Validate the user's restrictions against the installed torch and the device.

    ``None`` for a dimension means the default for the device: eager, inductor (and cudagraphs
    on CUDA); every inductor mode the device can use; ``dynamic=False`` only (static shapes are
    what a fixed batch size serves; ask for ``None``/``True`` to compare). Eager is always in
    the space: every row's speedup is measured against it.

    ``dtypes``, ``channels_last``, ``cudnn_benchmark`` and ``options`` (inductor option name ->
    values, text or typed) are searched dimensions; None or empty: not searched. tf32 needs a
    CUDA device, and so does searching cudnn.benchmark; options need inductor in the space.
    ``channels_last`` changes the model and the 4-D inputs only (a factory model's other
    inputs stay as they are). ``compile_scopes`` (whole, regional) needs a compiled backend;
    ``whole`` alone is what no scope means, so it searches nothing.
    """
    have_backends = list(available_backends or installed_backends())
    have_modes = list(available_modes or installed_modes())
    _check_batch_sizes(batch_sizes)
    backends = _checked_backends(backends, have_backends, device)
    modes = _checked_modes(modes, have_modes, backends, device)
    if dynamic is not None and set(backends) == {EAGER}:
        raise UserError("--dynamic applies to compiled backends only (eager runs the model as "
                        "it is): add inductor to --backend or drop --dynamic",
                        about=("--dynamic", "--backend"))
    if dynamic is None:
        dynamic = [False]

    for precision in dtypes or ():
        check_precision(precision, device)
    if cudnn_benchmark:
        check_cudnn_benchmark(device)
    checked = _checked_options(options, available_options, backends, device)
    scopes = _checked_scopes(compile_scopes, backends)

    return SearchSpace(
        backends=tuple(dict.fromkeys(backends)),
        modes=tuple(dict.fromkeys(modes)) or (DEFAULT_MODE,),
        dynamic=tuple(dict.fromkeys(dynamic)),
        batch_sizes=tuple(dict.fromkeys(batch_sizes)),
        dtypes=tuple(dict.fromkeys(dtypes or ())),
        channels_last=_bools(channels_last or (), "--channels-last"),
        cudnn_benchmark=_bools(cudnn_benchmark or (), "--cudnn-benchmark"),
        options=checked,
        compile_scopes=scopes,
    )


def _checked_scopes(scopes: Sequence[str] | None, backends: Sequence[str]) -> tuple[str, ...]:
    """The compile scopes asked for, each once; none where only ``whole`` is: the whole model
    is what a config without a scope compiles, and its key stays what it was."""
    scopes = tuple(dict.fromkeys(s.strip().lower() for s in scopes or ()))
    for scope in scopes:
        if scope not in COMPILE_SCOPES:
            raise UserError(f"--compile-scope {scope!r}: choose from {', '.join(COMPILE_SCOPES)} "
                            "(e.g. --compile-scope whole,regional)", about="--compile-scope")
    if scopes and set(backends) == {EAGER}:
        raise UserError("--compile-scope applies to compiled backends only (eager compiles "
                        "nothing): add inductor to --backend or drop --compile-scope",
                        about=("--compile-scope", "--backend"))
    return () if scopes == (WHOLE,) else scopes


def _check_batch_sizes(batch_sizes: Sequence[int]) -> None:
    if not batch_sizes:
        raise UserError("no batch size given: pass e.g. --batch-sizes 1,32", about="--batch-sizes")
    for bs in batch_sizes:
        if not isinstance(bs, int) or isinstance(bs, bool) or bs <= 0:
            raise UserError(f"batch size {bs!r} is not a positive integer: pass e.g. "
                            "--batch-sizes 1,32", about="--batch-sizes")
        if bs > MAX_BATCH_SIZE:
            raise UserError(f"batch size {bs} is more than {MAX_BATCH_SIZE} (2**31 - 1), more "
                            "than any device holds: pass e.g. --batch-sizes 1,32",
                            about="--batch-sizes")


def _checked_backends(backends: Sequence[str] | None, have_backends: list[str],
                      device: str) -> list[str]:
    """The backends asked for (None: the device's default), each one this torch can run here;
    eager always among them."""
    on_cuda = device.startswith("cuda")
    if backends is None:
        backends = [b for b in (EAGER, INDUCTOR, "cudagraphs") if b in have_backends
                    and (on_cuda or b not in _CUDA_ONLY_BACKENDS)]
    for b in backends:
        if (install := missing_package(b)) is not None:
            raise UserError(f"backend {b!r} needs a package that is not installed: pip install "
                            f"{install}, or choose from {', '.join(have_backends)}",
                            about="--backend")
        if b not in have_backends:
            raise UserError(f"unknown backend {b!r}: this torch offers {', '.join(have_backends)}",
                            about="--backend")
        if b in _CUDA_ONLY_BACKENDS and not on_cuda:
            raise UserError(f"backend {b!r} needs a CUDA device; this run is on {device}",
                            about="--backend")
    if EAGER not in backends:
        # Eager is the baseline every row is compared with: always measured, so always in the space.
        backends = [EAGER, *backends]
    return list(backends)


def _checked_modes(modes: Sequence[str] | None, have_modes: list[str], backends: Sequence[str],
                   device: str) -> Sequence[str]:
    """The inductor modes asked for (None: every one the device can use), each one this
    torch's inductor offers and the device can run."""
    on_cuda = device.startswith("cuda")
    if modes is not None and INDUCTOR not in backends:
        raise UserError("--mode applies to the inductor backend only: add inductor to --backend "
                        "or drop --mode", about=("--mode", "--backend"))
    if modes is None:
        modes = [m for m in have_modes if on_cuda or m not in CUDAGRAPH_MODES]
        # max-autotune compiles for minutes per config; the user opts in, or gets it on the GPU.
        if not on_cuda:
            modes = [m for m in modes if not is_max_autotune(m)]
    for m in modes:
        if m not in have_modes:
            raise UserError(f"unknown mode {m!r}: this torch's inductor offers "
                            f"{', '.join(have_modes)}", about="--mode")
        if m in CUDAGRAPH_MODES and not on_cuda:
            raise UserError(f"mode {m!r} records CUDA graphs and needs a CUDA device; "
                            f"this run is on {device} (try max-autotune-no-cudagraphs)",
                            about="--mode")
    return modes


def _checked_options(options: Mapping[str, Sequence[Any]] | None,
                     available_options: Mapping[str, Any] | None, backends: Sequence[str],
                     device: str) -> tuple[tuple[str, tuple[OptionValue, ...]], ...]:
    """The inductor options, typed (:func:`tuner.domain.inductor_options.check_options`);
    only with inductor in the space, and those about CUDA graphs only on a CUDA device."""
    if options and INDUCTOR not in backends:
        raise UserError("--inductor-option applies to the inductor backend only: add inductor "
                        "to --backend or drop --inductor-option",
                        about=("--inductor-option", "--backend"))
    checked = check_options(options, available_options) if options else ()
    graphs = [name for name, _ in checked if cuda_graph_option(name)]
    if graphs and not device.startswith("cuda"):
        raise UserError(f"--inductor-option {', '.join(graphs)}: CUDA graphs need a CUDA device; "
                        f"this run is on {device}: drop it", about="--inductor-option")
    return checked
