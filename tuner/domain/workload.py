"""What is being tuned: a model, its inputs, and the global knobs set before compiling.

Two kinds of model:

* a torchvision classification model by name (``resnet18``), built with random weights so
  nothing is downloaded, fed ``randn(batch, 3, image_size, image_size)``;
* the user's own, ``--model package.module:factory``. The factory contract::

      def factory(batch_size: int) -> tuple[torch.nn.Module, torch.Tensor | tuple[torch.Tensor, ...]]

  It returns the model and the example inputs for one call at that batch size, on the CPU in
  float32 (the tuner moves both to the device, and casts the model and floating-point inputs to
  the study's dtype). The model is called as ``model(*inputs)``. A factory whose inputs have a
  sequence length takes it as a second argument, ``factory(batch_size, seq_len)``, with a
  default; a shape schedule can then vary it (``--shape-schedule 8x128,8x512``). It may name
  its model's repeated block for ``--compile-scope regional`` (:mod:`tuner.runtime.regions`).

This module describes and validates a workload in the search process, cheaply; building it
happens in the trial process (:mod:`tuner.trial.build`).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import re
from pathlib import Path, PurePosixPath
from typing import Any

from tuner.errors import UserError

DTYPES = ("float32", "bfloat16", "float16")
# What --dtype accepts: the tensor dtypes, and tf32 (float32 tensors, matmuls and convolutions
# in TF32 on CUDA: torch.set_float32_matmul_precision("high") and the allow_tf32 flags).
PRECISIONS = ("float32", "tf32", "bfloat16", "float16")
# What --device accepts: the CPU, or a CUDA GPU (cuda is cuda:0).
CUDA_DEVICE = r"cuda(:(0|[1-9]\d*))?"  # cuda:00 would be another workload than cuda:0
DEVICE = rf"cpu|{CUDA_DEVICE}"


def tensor_dtype(precision: str) -> str:
    """The torch dtype a precision holds its tensors in: ``tf32`` -> ``float32``."""
    return "float32" if precision == "tf32" else precision


def check_cudnn_benchmark(device: str) -> None:
    """A one-line error for cudnn.benchmark given on a device without cuDNN: one value would be
    kept as the workload's, as if it meant something there; several, searched for nothing."""
    if not re.fullmatch(CUDA_DEVICE, device):
        raise UserError(f"--cudnn-benchmark applies to CUDA only; this run is on {device}: "
                        "drop it", about="--cudnn-benchmark")


def check_precision(precision: str, device: str) -> None:
    """A one-line error for a precision this device cannot run.

    tf32 is refused on the CPU rather than quietly measured as float32 there: it would be a
    second row of the same measurement under another name.
    """
    if precision not in PRECISIONS:
        raise UserError(f"unknown dtype {precision!r} in --dtype: choose from "
                        f"{', '.join(PRECISIONS)}", about="--dtype")
    if precision == "tf32" and not device.startswith("cuda"):
        raise UserError(f"--dtype tf32 needs a CUDA device (on {device} it is float32): "
                        "drop tf32 or use --device cuda", about="--dtype")

# One shape of a schedule: a batch size, or (batch size, sequence length) for a factory model.
Shape = int | tuple[int, int]


# The largest batch size (or sequence length) a study takes: the int32 range. A batch past it
# is beyond any device (one 224x224 RGB float32 image is 0.6 MB, so 2**31 of them 1.3 PB), so a
# larger one is a typo. Near 2**63 the rows' int64 columns (tuner.data.schema: batch_size, and
# the byte counts that grow with it) overflow when the rows are written, a traceback after the
# trials ran: it is refused before any trial (tuner.domain.space.build_space, parse_shapes).
MAX_BATCH_SIZE = 2**31 - 1


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """``1,8,8x128`` -> (1, 8, (8, 128)); anything else is a one-line error."""
    shapes: list[Shape] = []
    for item in text.split(",") if text.strip() else []:
        item = item.strip()
        match = re.fullmatch(r"(\d+)(?:x(\d+))?", item)
        if not match or any(int(g) <= 0 for g in match.groups() if g is not None):
            raise UserError(f"shape schedule entry {item!r} is not a batch size or BATCHxSEQ_LEN "
                            "of positive integers: pass e.g. --shape-schedule 1,8,32 or "
                            "8x128,8x512")
        if any(int(g) > MAX_BATCH_SIZE for g in match.groups() if g is not None):
            raise UserError(f"shape schedule entry {item!r} is more than {MAX_BATCH_SIZE} "
                            "(2**31 - 1), more than any device holds: pass e.g. "
                            "--shape-schedule 1,8,32")
        batch, seq_len = match.groups()
        shapes.append(int(batch) if seq_len is None else (int(batch), int(seq_len)))
    return tuple(shapes)


def shape_label(shape: Shape) -> str:
    """``8`` or ``8x128`` (batch size x sequence length), as the user writes it."""
    return str(shape) if isinstance(shape, int) else f"{shape[0]}x{shape[1]}"


def shape_batch(shape: Shape) -> int:
    return shape if isinstance(shape, int) else shape[0]


def _shape_ok(shape: Any) -> bool:
    def positive(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    return positive(shape) or (isinstance(shape, tuple) and len(shape) == 2
                               and all(positive(v) for v in shape))


def factory_module(model: str) -> str | None:
    """The module ``--model pkg.mod:fn`` imports its factory from; None for a torchvision name."""
    return model.partition(":")[0] if ":" in model else None


@dataclasses.dataclass(frozen=True)
class Workload:
    """A model and the global knobs of a study; the same for every trial of it."""

    model: str
    device: str = "cpu"
    dtype: str = "float32"  # one of PRECISIONS; a config that searches it sets its own
    image_size: int = 224
    channels_last: bool = False
    cudnn_benchmark: bool = True
    seed: int = 0
    # Shapes (batch sizes, or batch size x sequence length) replayed in order after the
    # steady-state measurement (empty: no replay); see tuner.trial.replay. Part of the study's
    # workload, so resuming with another schedule is refused.
    shape_schedule: tuple[Shape, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape_schedule", tuple(
            tuple(s) if isinstance(s, list) else s for s in self.shape_schedule))

    @property
    def is_factory(self) -> bool:
        return ":" in self.model

    @property
    def factory_module(self) -> str | None:
        """The module a factory model is imported from (``pkg.mod`` of ``pkg.mod:fn``); None for
        a torchvision model."""
        return factory_module(self.model)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.shape_schedule:
            data["shape_schedule"] = [  # as JSON and Optuna store it
                s if isinstance(s, int) else list(s) for s in self.shape_schedule]
        else:
            # studies of tuner 0.1.0 before 2026-11-30 (6c67306) resume unchanged
            del data["shape_schedule"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Workload:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def validate(workload: Workload) -> None:
    """Catch bad input in the parent, cheaply, before any trial is spent on it."""
    check_precision(workload.dtype, workload.device)
    if workload.image_size <= 0:
        raise UserError(f"image size {workload.image_size} is not a positive integer")
    for shape in workload.shape_schedule:
        if not _shape_ok(shape):
            raise UserError(f"shape schedule entry {shape!r} is not a positive integer: "
                            "pass e.g. --shape-schedule 1,8,32,8")
    with_seq_len = [shape_label(s) for s in workload.shape_schedule if not isinstance(s, int)]
    if with_seq_len and not workload.is_factory:
        raise UserError(f"shape schedule entry {with_seq_len[0]} sets a sequence length, which "
                        f"only a factory model takes: use batch sizes alone for {workload.model}")
    if not re.fullmatch(DEVICE, workload.device):
        raise UserError(f"unknown device {workload.device!r}: use cpu, cuda or cuda:N")
    if workload.is_factory:
        factory = load_factory(workload.model, error=UserError)
        if (needed := _required_positional(factory)) > 1:
            raise UserError(f"{workload.model} needs {needed} arguments, but a factory is called "
                            "with the batch size alone (and a schedule's sequence length as a "
                            "second): give the others defaults, def factory(batch_size, "
                            "seq_len=128)")
        required_kw, keyword_only = _keyword_only(factory)
        if not _takes_positional(factory, 1):
            takes = (f"takes {', '.join(keyword_only)} keyword-only (after *)" if keyword_only
                     else "takes no argument")
            raise UserError(f"{workload.model} {takes}, but a factory is called with the batch "
                            "size as its first positional argument: def factory(batch_size), "
                            "returning the model and its example inputs")
        if required_kw:
            raise UserError(f"{workload.model} needs {', '.join(required_kw)} keyword-only (after "
                            "*), which the tuner does not pass: give "
                            f"{'it a default' if len(required_kw) == 1 else 'them defaults'} (a "
                            "factory is called factory(batch_size), or factory(batch_size, "
                            "seq_len) for a schedule's sequence length)")
        if with_seq_len and not _takes_seq_len(factory):
            takes = (f"takes {', '.join(keyword_only)} keyword-only (after *), while the tuner "
                     "passes the sequence length as the second positional argument"
                     if keyword_only else "takes only a batch size")
            raise UserError(f"shape schedule entry {with_seq_len[0]} sets a sequence length, but "
                            f"{workload.model} {takes}: give the factory a second argument, "
                            "def factory(batch_size, seq_len=...)")
    else:
        names = torchvision_models()
        if workload.model not in names:
            close = [n for n in names if workload.model.lower()[:4] in n][:5]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UserError(f"unknown model {workload.model!r}{hint}: give a torchvision "
                            "classification model name or package.module:factory")


def check_model_spelling(model: str) -> None:
    """Refuse a --model that names no model whatever is installed (empty, with spaces, or a
    factory without its module or name): checked before the study is named after it, which
    blamed ``--model ''`` on a study name '-cpu' the user never gave."""
    if not model.strip():
        raise UserError("--model is empty: give a torchvision classification model name "
                        "(resnet18) or package.module:factory")
    if model != model.strip() or any(c.isspace() for c in model):
        raise UserError(f"--model {model!r} has spaces: give a torchvision classification "
                        "model name (resnet18) or package.module:factory")
    module, colon, factory = model.partition(":")
    if colon and (not module or not factory):
        raise UserError(f"--model {model!r}: expected package.module:factory")


def torchvision_models() -> list[str]:
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def load_factory(spec: str, error: type[Exception], source: str | None = None) -> Any:
    """The factory ``package.module:factory`` names. ``source`` says where the name came from
    in the errors (default: ``--model SPEC``, as ``tuner search`` takes it)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise error(f"{source or f'--model {spec!r}'}: expected package.module:factory")
    source = source or f"--model {spec}"
    try:
        module = _import_module(module_name)
    except _ExitedOnImport as exited:
        raise error(f"importing {module_name!r} for {source} ended the process "
                    f"(SystemExit: {exited.code}){exited.said}: code that runs when the module "
                    "is imported, such as argparse's parse_args(), belongs under "
                    "`if __name__ == \"__main__\":`") from None
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        if _is_path(module_name):
            raise error(_path_instead_of_module(module_name, attr, source)) from exc
        hint = _close_module(exc.name, module_name) if isinstance(exc, ModuleNotFoundError) \
            and exc.name and module_name.startswith(exc.name) else ""
        raise error(f"cannot import {module_name!r} for {source}: "
                    f"{type(exc).__name__}: {exc}{hint}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        close = difflib.get_close_matches(attr, names, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise error(f"{module_name!r} has no callable {attr!r}{hint} (from {source})")
    return factory


class _ExitedOnImport(Exception):
    def __init__(self, code: object, said: str) -> None:
        super().__init__(code)
        self.code, self.said = code, said


def _import_module(module_name: str) -> Any:
    """``importlib.import_module``, where a module that calls ``sys.exit`` when imported (an
    argparse ``parse_args()`` at the top level, reading the tuner's own arguments) is an
    :class:`_ExitedOnImport` that keeps the last line it wrote to stderr (argparse's error),
    not the end of the tuner's process with another program's usage message. What it writes
    to stderr otherwise is passed on unchanged."""
    import contextlib
    import io
    import sys

    if module_name in sys.modules:
        return sys.modules[module_name]
    written = io.StringIO()
    try:
        with contextlib.redirect_stderr(written):
            return importlib.import_module(module_name)
    except SystemExit as exc:
        lines = [line for line in written.getvalue().splitlines() if line.strip()]
        written = io.StringIO()  # said in the error instead
        raise _ExitedOnImport(exc.code, f", saying {lines[-1].strip()!r}" if lines else "") \
            from None
    finally:
        sys.stderr.write(written.getvalue())


def _close_module(missing: str, module_name: str) -> str:
    """`` (did you mean pkg.models?)`` for ``module_name``, whose part ``missing`` is not found:
    close names among the modules beside it (its package's, which the failed import of its
    child loaded; or the current folder's, then the whole path's); empty when none is close."""
    import pkgutil
    import sys

    parent, _, leaf = missing.rpartition(".")
    if parent:
        path = getattr(sys.modules.get(parent), "__path__", None)
        close = difflib.get_close_matches(
            leaf, [m.name for m in pkgutil.iter_modules(path)] if path else [], n=3)
    else:
        close = difflib.get_close_matches(leaf, [m.name for m in pkgutil.iter_modules(["."])],
                                          n=3) or difflib.get_close_matches(
            leaf, [m.name for m in pkgutil.iter_modules()], n=3, cutoff=0.75)
    rest = module_name[len(missing):]
    named = [f"{parent}.{c}{rest}" if parent else f"{c}{rest}" for c in close]
    return f" (did you mean {', '.join(named)}?)" if named else ""


def _is_path(module_name: str) -> bool:
    """Whether a module name that did not import is a file's path (``tests/support/models.py``)."""
    return "/" in module_name or "\\" in module_name or module_name.endswith(".py")


def _path_instead_of_module(module_name: str, attr: str, source: str) -> str:
    """The error for a file's path given where a module belongs: its dotted name, where the
    path is under the current folder; else its folder goes on PYTHONPATH."""
    path = PurePosixPath(module_name.replace("\\", "/"))
    if path.suffix == ".py":
        path = path.with_suffix("")
    parts = [p for p in path.parts if p != "."]
    if path.is_absolute():
        try:
            parts = list(path.relative_to(PurePosixPath(Path.cwd().as_posix())).parts)
        except ValueError:
            parts = []
    flag = "--model " if source.startswith("--model") else ""
    if parts and ".." not in parts and all(p.isidentifier() for p in parts):
        instead = f"{flag}{'.'.join(parts)}:{attr}"
    else:
        instead = f"{flag}{path.name}:{attr}, with {path.parent} on PYTHONPATH"
    return (f"{source} names a file: give the module's dotted name instead, {instead} (the "
            "module is imported from the current folder or PYTHONPATH)")


def check_loads_here(workload: Workload, study: str, command: str) -> None:
    """For a run that joins a study (``tuner worker``, ``tuner confirm``): a one-line error
    before any trial where the study's factory does not import in this process, as it would
    not in its trial processes (they import from the same folder and path). Without it each
    trial would fail in its own process and be recorded as the model failing, with an exit of
    0. A torchvision model is not checked: the study was made with one that exists, and listing
    them would cost each worker the import of torchvision."""
    if not workload.is_factory:
        return
    try:
        load_factory(workload.model, error=UserError,
                     source=f"the model {workload.model} of study {study!r}")
    except UserError as exc:
        raise UserError(f"{exc}; run `tuner {command}` from the folder the study was made in, "
                        "or put the module's folder on PYTHONPATH") from None


def _required_positional(factory: Any) -> int:
    """How many positional arguments ``factory`` cannot be called without (0 if it cannot
    tell)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(1 for p in params if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _takes_positional(factory: Any, n: int) -> bool:
    """Whether ``factory`` can be called with ``n`` positional arguments (True if it cannot
    tell: the trial will say)."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= n or any(p.kind is p.VAR_POSITIONAL for p in params)


def _keyword_only(factory: Any) -> tuple[list[str], list[str]]:
    """``factory``'s keyword-only parameters (after ``*``): those without a default, and all
    (none where it cannot tell)."""
    try:
        params = [p for p in inspect.signature(factory).parameters.values()
                  if p.kind is p.KEYWORD_ONLY]
    except (TypeError, ValueError):
        return [], []
    return [p.name for p in params if p.default is p.empty], [p.name for p in params]


def _takes_seq_len(factory: Any) -> bool:
    return _takes_positional(factory, 2)
