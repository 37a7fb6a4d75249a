"""The :class:`Recommendation` record: the config a study recommends, and what production code
does with it (:meth:`Recommendation.apply`).

Warm start: a study keeps the compile artifacts of its finalists next to its Parquet files
(the row's ``artifacts_file``). :meth:`Recommendation.apply` loads them before
``torch.compile`` when this process runs the torch that saved them, so the first call hits the
compile cache instead of compiling cold.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from tuner.data.measured import Measured
from tuner.data.noise import p50s_of
from tuner.data.plain import PlainGain
from tuner.data.rows import NAME
from tuner.data.select import Constraints
from tuner.domain.config import TrialConfig, uses_cudagraphs
from tuner.domain.naming import config_name
from tuner.domain.workload import Workload, tensor_dtype
from tuner.errors import UserError
from tuner.use.environment import MismatchWarning
from tuner.use.recommend.first_call import WarmStartMissed, watch

if TYPE_CHECKING:
    import torch

    from tuner.runtime.regions import Regions


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The config a study recommends, and how to use it in production.

    Attributes:
        study: the study's name.
        path: the Parquet file it was read from (the study folder is ``path.parent``).
        objective: what was optimised: latency, throughput, memory, warmup or traffic.
        constraints: the limits it meets.
        config: backend, mode, dynamic, batch size, and the precision, memory format,
            cudnn.benchmark and inductor options where the study searched them;
            ``config.compile_kwargs()`` is exactly what ``torch.compile`` is given.
        workload: the model and global knobs the chosen trial ran with (device, dtype,
            channels_last, cudnn.benchmark): the study's, with the config's where it sets them.
        measured: latency, throughput, memory and compile cost as measured.
        trial_number: the trial it comes from.
        candidates: how many configs met the constraints.
        fingerprint: the machine and software the trial ran on.
        mismatch: how the running process differed from ``fingerprint`` when this was made.
        within_noise: configs that met the constraints and whose latency is within noise of
            this one's (neither is faster beyond noise and their fresh processes' p50s
            overlap, :func:`tuner.data.noise.within_noise`); for the latency and
            throughput objectives, when the study re-measured its finalists. Empty, and not
            known, unless :attr:`confirmed`.
        row: the whole Parquet row.
        why_eager: when the config is eager, why: it was best among configs that compile, the
            limits ruled out every compiled one, or none finished and matched eager. Empty
            for a compiled config.
        undecided: configs that met the constraints and that this one is undecided against
            (every process of one was faster, but too few processes to say so beyond noise,
            :func:`tuner.data.noise.verdict`): it was chosen by its median, and
            ``tuner confirm STUDY --repeats N`` decides. Latency and throughput objectives,
            when :attr:`confirmed`.
        processes_to_decide: the processes each config would need for those to be decided, if
            their figures held (``--repeats`` one fewer); None where not known.
        search_limits: the limits the study's search was given (``--max-vram-gb``,
            ``--max-compile-s``) that this call did not set; :meth:`breaks_search_limits`
            says which of them the config breaks.
        vs_plain: the config against the best plain mode at its batch size (inductor's
            default, reduce-overhead or max-autotune with torch's settings, among the verified
            configs whatever the limits): the ratio and whether it is beyond noise
            (:func:`tuner.data.plain.gain_over_plain`). None only where not computed.

    ``repr(rec)`` is one line (study, batch size, config, p50); in a notebook the
    recommendation shows as a small table (``_repr_html_``).
    """

    study: str
    path: Path
    objective: str
    constraints: Constraints
    config: TrialConfig
    workload: Workload
    measured: Measured
    trial_number: int
    candidates: int
    fingerprint: dict[str, Any] = dataclasses.field(compare=False)
    mismatch: tuple[str, ...] = ()
    row: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    within_noise: tuple[str, ...] = ()
    why_eager: str = ""
    undecided: tuple[str, ...] = ()
    processes_to_decide: int | None = None
    search_limits: Constraints = dataclasses.field(default_factory=Constraints)
    vs_plain: PlainGain | None = None

    def __repr__(self) -> str:
        return (f"Recommendation(study={self.study!r}, batch_size={self.config.batch_size}, "
                f"config={self.name!r}, p50_ms={_p50(self.measured):.3f})")

    def _repr_html_(self) -> str:
        """A small table for notebooks (Jupyter calls it)."""
        from tuner.render.notebook import html_table

        return html_table(self)

    @property
    def name(self) -> str:
        """The config as people read it (:func:`tuner.domain.naming.config_name`): its backend
        and mode, then what differs from what that mode runs by itself."""
        return str(self.row.get(NAME) or config_name(self.config))

    def breaks_search_limits(self, called: Callable[[str], str] = str) -> list[str]:
        """How the config breaks each of :attr:`search_limits` it is measured over, in words
        (``takes 60.0 s where max_compile_s=20``); ``called`` names each limit."""
        return [sentence for _, excess, sentence in
                self.search_limits.violations(pd.Series(self.row), called) if excess != np.inf]

    def apply(self, model: torch.nn.Module, warm_start: bool = True) -> torch.nn.Module:
        """Set up ``model`` the way the study measured it and compile it with the recorded args.

        What it does, in order: sets the study's process-wide knobs
        (:func:`tuner.runtime.knobs.apply_global_knobs`: ``cudnn.benchmark`` on a CUDA study; for
        ``tf32``, ``torch.set_float32_matmul_precision("high")`` and the allow_tf32 flags);
        converts the model to ``channels_last`` if the study used it (to the contiguous format
        if the study searched memory formats and chose contiguous; ``Module.to`` converts the
        model's own parameters, so the model you pass is converted too); then returns
        ``torch.compile(model, **config.compile_kwargs())``, or, when eager was best, the model
        itself, not compiled. A regional config (``config.compile_scope == "regional"``)
        compiles each block of the class the study compiled in place instead
        (``block.compile(**config.compile_kwargs())``, :mod:`tuner.runtime.regions`) and
        returns the model itself, the rest of it eager. Before compiling, with ``warm_start``,
        it loads the compile artifacts the study saved for the config (:meth:`load_artifacts`),
        so the first call finds its compiled code in the cache; if it does not, a :class:`WarmStartMissed`
        warning says why, once: at ``apply`` when the file is missing, was saved by another torch
        or cannot be read, at the first call when it was loaded and that call compiled all the
        same (a cache key did not match).

        Compile artifacts are code: loading them unpickles torch's cached graphs, and the first
        call runs the Python inductor generated. Warm-start only from a study you trust (as you
        would run its code); ``warm_start=False`` compiles from scratch. Reading a study
        (``tuner.recommend``, ``tuner show``, ``tuner compare``) loads nothing of them.

        What it does not do: move the model to the device, cast it to the study's dtype, put it in
        eval mode, or touch the inputs (cast them, make 4-D ones channels_last, and run under
        ``torch.no_grad()`` as the study did). Casting the model alone would break inputs of the
        old dtype, so it warns (:class:`MismatchWarning`) when the model's dtype or device is not
        the study's, and leaves the choice to you.

        A config that records CUDA graphs (:attr:`cuda_graphs`) returns outputs that live in the
        graphs' memory pool: the next call overwrites them. The study called
        ``torch.compiler.cudagraph_mark_step_begin()`` before each call; do the same, and
        ``.clone()`` any output you keep past the next call (reading an overwritten one raises
        a RuntimeError).

        Raises:
            UserError: ``model`` is not a ``torch.nn.Module``, or is already compiled (an
                ``OptimizedModule``: pass the module it wraps, ``model._orig_mod``), or the
                config is regional and the model has none of the blocks the study compiled.
        """
        import torch

        from tuner.runtime.knobs import apply_global_knobs

        check_flag("warm_start", warm_start)
        self._check_model(model)
        apply_global_knobs(self.workload)
        if self.workload.channels_last:
            model = model.to(memory_format=torch.channels_last)
        elif self.config.channels_last is False:  # searched, and contiguous won
            model = model.to(memory_format=torch.contiguous_format)
        if not self.config.compiled:
            return model
        regions = self._regions(model) if self.config.regional else None
        loaded = warm_start and self.load_artifacts(_stacklevel=3)
        if regions is not None:
            from tuner.runtime.regions import compile_regions

            compile_regions(model, regions, **self.config.compile_kwargs())
            compiled = model
        else:
            # torch.compile wraps a Module in an OptimizedModule, itself a Module; torch types
            # the result as a plain callable
            compiled = cast("torch.nn.Module",
                            torch.compile(model, **self.config.compile_kwargs()))
        if loaded:
            watch(compiled, self.study, self.config.batch_size, str(self.artifacts_path))
        return compiled

    def _regions(self, model: torch.nn.Module) -> Regions:
        """The blocks of ``model`` a regional config compiles: those of the class the study
        compiled (the row's ``region_class``), found by the trial's rule
        (:mod:`tuner.runtime.regions`); a one-line error where the model has none."""
        from tuner.runtime.regions import NoRegions, find_regions

        try:
            return find_regions(model, self.row.get("region_class"))
        except NoRegions as exc:
            raise UserError(f"apply: study {self.study!r} compiled the blocks of its model "
                            f"regionally, but {exc}: pass the model the study measured"
                            ) from None

    @property
    def cuda_graphs(self) -> bool:
        """Whether the config records CUDA graphs on the GPU: then mark each call as a step and
        clone outputs you keep (see :meth:`apply`)."""
        return uses_cudagraphs(self.config) and self.workload.device.startswith("cuda")

    @property
    def confirmed(self) -> bool:
        """Whether the config was measured in two fresh processes or more (``tuner confirm``):
        only then is :attr:`within_noise` known, and only then can a compiled config within
        noise of eager lose to it."""
        return len(p50s_of(self.row)) >= 2

    @property
    def artifacts_path(self) -> Path | None:
        """The file of compile artifacts the study saved for this config, if it names one."""
        name = self.row.get("artifacts_file")
        return (self.path.parent / name).resolve() if name else None

    @property
    def artifacts_found(self) -> bool:
        """Whether that file is there, to warm-start from (a study folder copied without its
        artifacts/ has none)."""
        return self.artifacts_path is not None and self.artifacts_path.exists()

    def load_artifacts(self, _stacklevel: int = 2) -> bool:
        """Load the study's compile artifacts of this config into this process's compile
        caches (``torch.compiler.load_cache_artifacts``); True if they were loaded.

        Skipped with a :class:`WarmStartMissed` warning (a :class:`MismatchWarning`) when the
        file is missing, this process runs another torch than the one that saved them, or torch
        cannot load them; then the first call compiles cold, as it would without them. Nothing to do (False, no warning) when
        the study saved none for this config.
        """
        import torch

        from tuner.runtime import artifacts

        path = self.artifacts_path
        if path is None or not self.config.compiled:
            return False
        saved_by = self.row.get("artifacts_torch") or self.fingerprint.get("torch")
        problem = None
        if not path.exists():
            problem = f"{path} is missing"
        elif saved_by != torch.__version__:
            problem = (f"{path} was saved by torch {saved_by or '(unknown)'}, this process runs "
                       f"torch {torch.__version__}")
        else:
            _, problem = artifacts.load(path)
        if problem:
            # At the line that called apply (or this method): the user's, to see and filter.
            warnings.warn(f"apply: no warm start from study {self.study!r}: {problem}; the first "
                          "call compiles cold", WarmStartMissed, stacklevel=_stacklevel)
            return False
        return True

    def _check_model(self, model: torch.nn.Module) -> None:
        import torch

        # An OptimizedModule exists only once dynamo is imported (an import of a second or so,
        # not made for an eager config): torch.compile of one returns a plain function.
        frames = sys.modules.get("torch._dynamo.eval_frame")
        if frames is not None and isinstance(model, frames.OptimizedModule):
            raise UserError(f"apply: the model is already compiled ({type(model).__name__}): "
                            "pass the module itself, model._orig_mod")
        if not isinstance(model, torch.nn.Module):
            raise UserError(f"apply takes a torch.nn.Module, not {type(model).__name__}: pass "
                            "the model (its memory format and mode are set and checked)")
        w = self.workload
        problems = []
        dtype = tensor_dtype(w.dtype)  # tf32 holds float32 tensors
        if model.training:  # dropout and batch norm in training mode run another computation
            problems.append("it is in training mode, the study measured model.eval()")
        param = next((p for p in model.parameters() if p.is_floating_point()), None)
        if param is None:
            pass
        elif param.dtype != getattr(torch, dtype):
            problems.append(f"its parameters are {param.dtype}, the study used torch.{dtype}")
        if param is not None and param.device.type != torch.device(w.device).type:
            problems.append(f"it is on {param.device}, the study ran on {w.device}")
        if problems:
            warnings.warn(f"apply: the model is not as study {self.study!r} measured it: "
                          f"{'; '.join(problems)}. Its numbers assume model.eval().to("
                          f"{w.device!r}, torch.{dtype}) and inputs cast alike; apply does not "
                          "change the mode, cast or move",
                          MismatchWarning, stacklevel=3)

    def snippet(self) -> str:
        """Python source to paste into production code; it does what :meth:`apply` does."""
        from tuner.render.recommendation import snippet

        return snippet(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (``--format json``), under the JSON contract
        (:mod:`tuner.data.json_contract`: ``tuner_version``, ``schema``, integer counts)."""
        from tuner.data.json_contract import document

        return document({
            "study": self.study, "path": str(self.path), "objective": self.objective,
            "batch_size": self.config.batch_size,
            "constraints": self.constraints.to_dict(), "config": self.config.to_dict(),
            "label": self.config.label, "name": self.name,
            "compile_kwargs": self.config.compile_kwargs(),
            "workload": self.workload.to_dict(), "measured": dataclasses.asdict(self.measured),
            "vs_plain": None if self.vs_plain is None else self.vs_plain.to_dict(),
            "trial_number": self.trial_number, "candidates": self.candidates,
            "fingerprint": self.fingerprint, "mismatch": list(self.mismatch),
            "confirmed": self.confirmed,
            # not known (null) for a config measured in one process
            "within_noise": list(self.within_noise) if self.confirmed else None,
            "undecided": list(self.undecided) if self.confirmed else None,
            "processes_to_decide": self.processes_to_decide,
            "artifacts": None if self.artifacts_path is None else str(self.artifacts_path),
            "artifacts_found": self.artifacts_found, "why_eager": self.why_eager or None,
            "cuda_graphs": self.cuda_graphs,
            "search_limits": self.search_limits.to_dict(),
            "breaks_search_limits": self.breaks_search_limits(),
        })

    def describe(self, called: Callable[[str], str] = str, width: int | None = None) -> str:
        """A few lines for humans (``tuner recommend``), within ``width`` characters (None: the
        terminal's, :func:`tuner.render.table.terminal_width`); ``called`` names each limit,
        as in :meth:`LimitsUnmet.message` (the CLI: ``--max-compile-s``)."""
        from tuner.render.recommendation import describe

        return describe(self, called, width)


def _p50(m: Measured) -> float:
    """What the config was ranked by: the median over its processes, else its own p50."""
    return m.latency_ms_p50 if m.latency_ms_p50_median is None else m.latency_ms_p50_median


def check_flag(name: str, value: object) -> None:
    """``value`` is True or False: a string such as "false" is truthy, and would do the opposite;
    1 and 0 equal True and False but are no flags (numpy's bool is one)."""
    if not isinstance(value, (bool, np.bool_)):
        raise UserError(f"{name} must be True or False, not {value!r}")
