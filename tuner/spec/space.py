"""Which trials a study may run (:class:`SearchSpace`), validated against the installed torch.

The choices are never taken from a hard-coded list: a backend must be registered with dynamo, a
mode must be one inductor lists.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from tuner.errors import UserError
from tuner.spec.config import CUDAGRAPH_MODES, DEFAULT_MODE, EAGER, INDUCTOR, TrialConfig

# Backends that only make sense on a CUDA device.
_CUDA_ONLY_BACKENDS = {"cudagraphs"}

# Registered with dynamo but only useful to debug dynamo or torch itself.
_NOT_OFFERED = {"eager", "eager_debug", "eager_noexcept", "pre_dispatch_eager", "invoke_subgraph",
                "dynamo_minifier_backend", "dynamo_accuracy_minifier_backend"}


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
    """The choices of each dimension. Every combination :meth:`configs` yields can run."""

    backends: tuple[str, ...]
    modes: tuple[str, ...]
    dynamic: tuple[bool | None, ...]
    batch_sizes: tuple[int, ...]

    def configs(self) -> list[TrialConfig]:
        """Every runnable config, impossible combinations left out (mode only with inductor)."""
        out: list[TrialConfig] = []
        for bs in self.batch_sizes:
            for backend in self.backends:
                if backend == EAGER:
                    out.append(TrialConfig(EAGER, bs))
                    continue
                modes: Iterable[str | None] = self.modes if backend == INDUCTOR else (None,)
                for mode, dyn in itertools.product(modes, self.dynamic):
                    out.append(TrialConfig(backend, bs, mode, dyn))
        return out

    def baselines(self) -> list[TrialConfig]:
        """Eager, and inductor's default where inductor is in the space, at every batch size."""
        out = [TrialConfig(EAGER, bs) for bs in self.batch_sizes]
        if INDUCTOR in self.backends:
            mode = DEFAULT_MODE if DEFAULT_MODE in self.modes else self.modes[0]
            dyn = False if False in self.dynamic else self.dynamic[0]
            out += [TrialConfig(INDUCTOR, bs, mode, dyn) for bs in self.batch_sizes]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"backends": list(self.backends), "modes": list(self.modes),
                "dynamic": list(self.dynamic), "batch_sizes": list(self.batch_sizes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchSpace:
        return cls(tuple(data["backends"]), tuple(data["modes"]), tuple(data["dynamic"]),
                   tuple(int(b) for b in data["batch_sizes"]))


def build_space(
    *,
    device: str,
    batch_sizes: Sequence[int],
    backends: Sequence[str] | None = None,
    modes: Sequence[str] | None = None,
    dynamic: Sequence[bool | None] | None = None,
    available_backends: Sequence[str] | None = None,
    available_modes: Sequence[str] | None = None,
) -> SearchSpace:
    """Validate the user's restrictions against the installed torch and the device.

    ``None`` for a dimension means the default for the device: eager, inductor (and cudagraphs
    on CUDA); every inductor mode the device can use; ``dynamic=False`` only (static shapes are
    what a fixed batch size serves; ask for ``None``/``True`` to compare). Eager is always in
    the space: every row's speedup is measured against it.
    """
    have_backends = list(available_backends or installed_backends())
    have_modes = list(available_modes or installed_modes())
    on_cuda = device.startswith("cuda")

    if not batch_sizes:
        raise UserError("no batch size given: pass e.g. --batch-sizes 1,32")
    for bs in batch_sizes:
        if not isinstance(bs, int) or isinstance(bs, bool) or bs <= 0:
            raise UserError(f"batch size {bs!r} is not a positive integer: pass e.g. --batch-sizes 1,32")

    if backends is None:
        backends = [b for b in (EAGER, INDUCTOR, "cudagraphs") if b in have_backends
                    and (on_cuda or b not in _CUDA_ONLY_BACKENDS)]
    for b in backends:
        if (install := missing_package(b)) is not None:
            raise UserError(f"backend {b!r} needs a package that is not installed: pip install "
                            f"{install}, or choose from {', '.join(have_backends)}")
        if b not in have_backends:
            raise UserError(f"unknown backend {b!r}: this torch offers {', '.join(have_backends)}")
        if b in _CUDA_ONLY_BACKENDS and not on_cuda:
            raise UserError(f"backend {b!r} needs a CUDA device; this run is on {device}")
    if EAGER not in backends:
        # Eager is the baseline every row is compared with: always measured, so always in the space.
        backends = [EAGER, *backends]

    if modes is not None and INDUCTOR not in backends:
        raise UserError("--mode applies to the inductor backend only: add inductor to --backend "
                        "or drop --mode")
    if modes is None:
        modes = [m for m in have_modes if on_cuda or m not in CUDAGRAPH_MODES]
        # max-autotune compiles for minutes per config; the user opts in, or gets it on the GPU.
        if not on_cuda:
            modes = [m for m in modes if not m.startswith("max-autotune")]
    for m in modes:
        if m not in have_modes:
            raise UserError(f"unknown mode {m!r}: this torch's inductor offers {', '.join(have_modes)}")
        if m in CUDAGRAPH_MODES and not on_cuda:
            raise UserError(f"mode {m!r} records CUDA graphs and needs a CUDA device; "
                            f"this run is on {device} (try max-autotune-no-cudagraphs)")
    if dynamic is None:
        dynamic = [False]

    return SearchSpace(
        backends=tuple(dict.fromkeys(backends)),
        modes=tuple(dict.fromkeys(modes)) or (DEFAULT_MODE,),
        dynamic=tuple(dict.fromkeys(dynamic)),
        batch_sizes=tuple(dict.fromkeys(batch_sizes)),
    )
