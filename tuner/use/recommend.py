"""From a study to production: pick the config that fits, and apply it to a model.

>>> import tuner
>>> rec = tuner.recommend("studies/resnet50", batch_size=32, objective="latency",
...                       max_vram_gb=20, max_compile_s=60)      # doctest: +SKIP
>>> model = rec.apply(model)                                      # doctest: +SKIP

Which rows may be recommended and which is best are :mod:`tuner.data.select`'s rules, the same
that ``tuner show`` and ``tuner compare`` apply: only trials that finished and matched eager
(``correct`` True), and a compiled config within noise of eager never beats eager.

Warm start: a study keeps the compile artifacts of its finalists next to its Parquet files
(the row's ``artifacts_file``). :meth:`Recommendation.apply` loads them before
``torch.compile`` when this process runs the torch that saved them, so the first call hits the
compile cache instead of compiling cold.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from tuner.data import files
from tuner.data.measured import Measured
from tuner.data.noise import p50s_of, within_noise
from tuner.data.rows import config_of, plain
from tuner.data.select import (
    OBJECTIVES,
    Constraints,
    best,
    eligible,
    failed_again,
    left_out_counts,
    rank,
)
from tuner.errors import UserError
from tuner.domain.config import EAGER, TrialConfig, uses_cudagraphs
from tuner.domain.records import FINGERPRINT_FIELDS
from tuner.domain.space import SearchSpace
from tuner.domain.workload import Workload, tensor_dtype
from tuner.use.environment import MismatchWarning, environment_mismatch
from tuner.words import plural

if TYPE_CHECKING:
    import torch


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
            this one's (a t-test over their fresh processes' p50s does not separate them at
            95 %, :func:`tuner.data.noise.within_noise`); for the latency and
            throughput objectives, when the study re-measured its finalists. Empty, and not
            known, unless :attr:`confirmed`.
        row: the whole Parquet row.
        why_eager: when the config is eager, why: it was best among configs that compile, the
            limits ruled out every compiled one, or none finished and matched eager. Empty
            for a compiled config.
        search_limits: the limits the study's search was given (``--max-vram-gb``,
            ``--max-compile-s``) that this call did not set; :meth:`breaks_search_limits`
            says which of them the config breaks.
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
    search_limits: Constraints = dataclasses.field(default_factory=Constraints)

    def breaks_search_limits(self, called: Callable[[str], str] = str) -> list[str]:
        """How the config breaks each of :attr:`search_limits` it is measured over, in words
        (``takes 60.0 s where max_compile_s=20``); ``called`` names each limit."""
        return [sentence for _, excess, sentence in
                self.search_limits.violations(pd.Series(self.row), called) if excess != np.inf]

    def apply(self, model: torch.nn.Module, warm_start: bool = True) -> torch.nn.Module:
        """Set up ``model`` the way the study measured it and compile it with the recorded args.

        What it does, in order: sets the study's process-wide knobs
        (:func:`tuner.trial.build.apply_global_knobs`: ``cudnn.benchmark`` on a CUDA study; for
        ``tf32``, ``torch.set_float32_matmul_precision("high")`` and the allow_tf32 flags);
        converts the model to ``channels_last`` if the study used it (to the contiguous format
        if the study searched memory formats and chose contiguous; ``Module.to`` converts the
        model's own parameters, so the model you pass is converted too); then returns
        ``torch.compile(model, **config.compile_kwargs())``, or, when eager was best, the model
        itself, not compiled. Before compiling, with ``warm_start``, it loads the compile
        artifacts the study saved for the config (:meth:`load_artifacts`), so the first call
        finds its compiled code in the cache.

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
                ``OptimizedModule``: pass the module it wraps, ``model._orig_mod``).
        """
        import torch

        from tuner.trial.build import apply_global_knobs

        _check_flag("warm_start", warm_start)
        self._check_model(model)
        apply_global_knobs(self.workload)
        if self.workload.channels_last:
            model = model.to(memory_format=torch.channels_last)
        elif self.config.channels_last is False:  # searched, and contiguous won
            model = model.to(memory_format=torch.contiguous_format)
        if not self.config.compiled:
            return model
        if warm_start:
            self.load_artifacts(_stacklevel=3)
        # torch.compile wraps a Module in an OptimizedModule, itself a Module; torch types the
        # result as a plain callable
        return cast("torch.nn.Module", torch.compile(model, **self.config.compile_kwargs()))

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

        Skipped with a :class:`MismatchWarning` when the file is missing, this process runs
        another torch than the one that saved them, or torch cannot load them; then the first
        call compiles cold, as it would without them. Nothing to do (False, no warning) when
        the study saved none for this config.
        """
        import torch

        from tuner.trial import artifacts

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
                          "call compiles cold", MismatchWarning, stacklevel=_stacklevel)
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
        """Plain JSON-able data (``--format json``)."""
        return {
            "study": self.study, "path": str(self.path), "objective": self.objective,
            "constraints": self.constraints.to_dict(), "config": self.config.to_dict(),
            "label": self.config.label, "compile_kwargs": self.config.compile_kwargs(),
            "workload": self.workload.to_dict(), "measured": dataclasses.asdict(self.measured),
            "trial_number": self.trial_number, "candidates": self.candidates,
            "fingerprint": self.fingerprint, "mismatch": list(self.mismatch),
            "confirmed": self.confirmed,
            # not known (null) for a config measured in one process
            "within_noise": list(self.within_noise) if self.confirmed else None,
            "artifacts": None if self.artifacts_path is None else str(self.artifacts_path),
            "artifacts_found": self.artifacts_found, "why_eager": self.why_eager or None,
            "cuda_graphs": self.cuda_graphs,
            "search_limits": self.search_limits.to_dict(),
            "breaks_search_limits": self.breaks_search_limits(),
        }

    def describe(self, called: Callable[[str], str] = str) -> str:
        """A few lines for humans (``tuner recommend``); ``called`` names each limit, as in
        :meth:`LimitsUnmet.message` (the CLI: ``--max-compile-s``)."""
        from tuner.render.recommendation import describe

        return describe(self, called)


class BatchSizeNeeded(UserError):
    """A study that measured several batch sizes, asked for an objective other than throughput
    with no batch size. The message names :func:`recommend`'s keywords; ``tuner recommend``
    names its options instead (:meth:`message`)."""

    def __init__(self, study: str, sizes: list[int]) -> None:
        self.study, self.sizes = study, sizes
        super().__init__(self.message("batch_size=N", 'objective="throughput"'))

    def message(self, batch_size: str, throughput: str) -> str:
        return (f"study {self.study!r} measured batch sizes {_list(self.sizes)}: give one "
                f"({batch_size}), or use {throughput} to let the batch size be chosen too")


def recommend(
    study: str | Path,
    batch_size: int | None = None,
    objective: str = "latency",
    max_vram_gb: float | None = None,
    max_compile_s: float | None = None,
    max_latency_ms: float | None = None,
    max_p99_ms: float | None = None,
    strict: bool = False,
) -> Recommendation:
    """The best config of a study for one objective, within the limits given.

    Args:
        study: a study folder or its trials.parquet (not pareto.parquet: it lacks the eager
            rows the choice is made against).
        batch_size: the batch size to serve. ``None``: the study's only batch size; when it
            measured several, only ``objective="throughput"`` may choose among them.
        objective: ``latency`` (median per call), ``throughput`` (items per second),
            ``memory`` (while serving), ``warmup`` (compile plus settling) or ``traffic``
            (the whole replay of the study's shape schedule, recompiles included).
        max_vram_gb, max_compile_s, max_latency_ms, max_p99_ms: limits, see
            :class:`Constraints`: memory, the first call, the p50 and the p99 per request.
        strict: refuse (raise :class:`UserError`) instead of warning when the study was made on
            another GPU, driver or torch than this process runs, or its machine is unknown.

    Ties on the objective go to the lower p90 latency (a finalist's median), then the cheaper warm-up, then the
    earlier trial.

    Raises:
        UserError: unreadable study (or one that is not a path), unknown objective or batch
            size, a limit that is not a positive number, ``strict`` not a bool, nothing meets
            the limits (the message names the closest config and the limit it breaks), or,
            with ``strict``, another environment.

    Example:
        >>> rec = recommend("studies/resnet18-cuda", batch_size=32, max_compile_s=60)  # doctest: +SKIP
        >>> model = rec.apply(model)                                                  # doctest: +SKIP
    """
    if not isinstance(objective, str) or objective not in OBJECTIVES:  # a list is unhashable
        raise UserError(f"unknown objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    _check_flag("strict", strict)
    if batch_size is not None and (isinstance(batch_size, bool)
                                   or not isinstance(batch_size, numbers.Integral)):
        # "32" would be "not measured" beside a list that holds 32; True would be batch size 1
        raise UserError(f"batch_size must be an int such as 32, not {batch_size!r}")
    constraints = Constraints(max_vram_gb, max_compile_s, max_latency_ms, max_p99_ms)
    df, meta, path = files.load(study)
    name = str(meta.get("study") or path.parent.name)
    sizes = sorted(int(b) for b in df["batch_size"].dropna().unique())
    if batch_size is not None:
        if batch_size not in sizes:
            raise UserError(f"study {name!r} did not measure batch size {batch_size}; it measured "
                            f"{_list(sizes) or 'none'}")
        df = df[df["batch_size"] == batch_size]
    elif len(sizes) > 1 and objective != "throughput":
        raise BatchSizeNeeded(name, sizes)

    where = f"study {name!r}"
    if batch_size is not None or len(sizes) == 1:
        where += f" at batch size {batch_size if batch_size is not None else sizes[0]}"
    candidates = eligible(df)
    if candidates.empty:
        raise UserError(f"no config of {where} both finished and passed the correctness check "
                        f"({_why_none(df)}); nothing can be recommended")
    column = OBJECTIVES[objective].column
    if pd.to_numeric(candidates[column], errors="coerce").isna().all():
        raise UserError(f"{where} has no {column}: objective {objective} needs a study searched "
                        "with --shape-schedule")
    feasible = candidates[[not constraints.violations(r) for _, r in candidates.iterrows()]]
    if feasible.empty:
        raise LimitsUnmet(where, candidates, constraints, objective)
    chosen = best(feasible, objective)

    fingerprint = _row_fingerprint(chosen) or dict((meta.get("fingerprints") or [{}])[0])
    config = config_of(chosen)
    # What the chosen trial ran with: apply and the snippet set it up that way.
    workload = config.applied_to(_workload(meta, chosen))
    mismatch = tuple(environment_mismatch(fingerprint, workload.device))
    if mismatch:
        text = f"study {name!r}: " + "; ".join(mismatch)
        if strict:
            raise UserError(f"{text} (strict: refusing; rerun the search on this machine)")
        warnings.warn(text, MismatchWarning, stacklevel=2)
    return Recommendation(
        study=name, path=path, objective=objective, constraints=constraints,
        config=config, workload=workload, measured=Measured.from_row(chosen),
        trial_number=int(chosen["trial_number"]), candidates=len(feasible),
        fingerprint=fingerprint, mismatch=mismatch,
        row={k: plain(v) for k, v in chosen.items()},
        within_noise=_within_noise_of(chosen, feasible) if objective in ("latency", "throughput")
        else (),
        why_eager="" if config.compiled else _why_eager(chosen, df, candidates, feasible,
                                                        constraints, objective,
                                                        _unmeasured_compiled(meta, df)),
        search_limits=_search_limits(meta, constraints))


def _search_limits(meta: dict[str, Any], given: Constraints) -> Constraints:
    """The limits the study's search was given (its files' ``limits``) that ``given`` leaves
    unset; none where the files hold none, or none that can be read."""
    stored = meta.get("limits")
    if not isinstance(stored, dict):
        return Constraints()
    unset = {k for k, v in given.to_dict().items() if v is None}
    try:
        return Constraints(**{k: v for k, v in stored.items() if k in unset and v is not None})
    except (UserError, TypeError):
        return Constraints()


def _unmeasured_compiled(meta: dict[str, Any], df: pd.DataFrame) -> int:
    """How many compiled configs of the study's space, at the batch sizes of ``df``, have no
    row yet (a search still going, or stopped early)."""
    try:
        space = SearchSpace.from_dict(meta["space"])
    except (KeyError, TypeError, ValueError):
        return 0
    sizes, have = set(df["batch_size"]), set(df["config_key"])
    return sum(c.compiled and c.batch_size in sizes and c.key not in have
               for c in space.configs())


def _why_eager(chosen: pd.Series, df: pd.DataFrame, candidates: pd.DataFrame,
               feasible: pd.DataFrame, constraints: Constraints, objective: str,
               unmeasured: int = 0) -> str:
    """Why an eager ``chosen`` won at its batch size: compiling did not pay off (a compiled
    config met the limits), the limits ruled out every compiled config, or no compiled config
    finished and matched eager. ``df`` holds the batch sizes the choice was made among: one,
    or every one for throughput without a batch size, where the best compiled config may be of
    another batch size than ``chosen``. ``unmeasured``: the compiled configs of the study's
    space with no row yet."""
    def compiled_at(rows: pd.DataFrame) -> pd.DataFrame:
        return rows[rows["backend"] != EAGER]

    one_size = df["batch_size"].nunique() <= 1

    if not compiled_at(feasible).empty:
        # The choice without the limits: a compiled config they ruled out, where it is one.
        unlimited = best(candidates, objective)
        if unlimited["backend"] != EAGER and not feasible["trial_number"].isin(
                [unlimited["trial_number"]]).any():
            broken = " and ".join(s for _, _, s in constraints.violations(unlimited))
            size = "" if one_size else f" at batch size {int(unlimited['batch_size'])}"
            return (f"eager was best within the limits: {unlimited['label']}{size} (trial "
                    f"{int(unlimited['trial_number'])}) does better, but {broken}")
        return {"warmup": "eager was best here: it compiles nothing, so it warms up first",
                "memory": "eager was best here: no compiled config needs less memory"}.get(
                    objective, "eager was best here: compiling does not pay off")
    if not (ok := compiled_at(candidates)).empty:
        row = rank(ok, objective).iloc[0]
        broken = " and ".join(s for _, _, s in constraints.violations(row))
        size = "" if one_size else f" at batch size {int(row['batch_size'])}"
        return (f"eager is the only config within the limits: the best compiled one, "
                f"{row['label']}{size} (trial {int(row['trial_number'])}), {broken}")
    tried = compiled_at(df)
    if tried.empty:
        left = (f" yet: {plural(unmeasured, 'compiled config')} of its search space "
                f"{'has' if unmeasured == 1 else 'have'} no trial (the search, still running or "
                "resumed, measures them)" if unmeasured else "")
        return ("the study measured no compiled config at this batch size" if one_size
                else "the study measured no compiled config") + left
    # A finalist that a fresh process failed finished and matched eager in the search.
    held = " and held up when measured again" if failed_again(tried).any() else ""
    return f"no compiled config finished, matched eager{held} ({_why_none(tried)})" if held \
        else f"no compiled config finished and matched eager ({_why_none(tried)})"


def _within_noise_of(chosen: pd.Series, feasible: pd.DataFrame) -> tuple[str, ...]:
    """Labels of the other feasible configs at the same batch size within noise of
    ``chosen`` (:func:`tuner.data.noise.within_noise`)."""
    same = feasible[(feasible["batch_size"] == chosen["batch_size"])
                    & (feasible["trial_number"] != chosen["trial_number"])]
    return tuple(str(r["label"]) for _, r in same.iterrows() if within_noise(chosen, r))


class LimitsUnmet(UserError):
    """No config meets the limits. The message names the closest config and the limits it
    breaks, by :func:`recommend`'s keywords; ``tuner recommend`` names its options instead
    (:meth:`message`)."""

    def __init__(self, where: str, candidates: pd.DataFrame, constraints: Constraints,
                 objective: str) -> None:
        ranked = rank(candidates, objective)
        # Closest: the smallest total overshoot, relative to each limit; the objective breaks ties.
        excess = [sum(min(e, 1e9) for _, e, _ in constraints.violations(r))
                  for _, r in ranked.iterrows()]
        self.where, self.checked, self.constraints = where, len(candidates), constraints
        self.row = ranked.iloc[min(range(len(excess)), key=excess.__getitem__)]
        super().__init__(self.message())

    def message(self, called: Callable[[str], str] = str) -> str:
        """The message, ``called`` naming each limit (the CLI: ``--max-compile-s``)."""
        row, broken = self.row, self.constraints.violations(self.row, called)
        limits = ", ".join(f"{called(k)}={v:g}" for k, v in self.constraints.to_dict().items()
                           if v is not None)
        return (f"no config of {self.where} meets {limits} ({self.checked} checked); the "
                f"closest is {row['label']} (batch size {int(row['batch_size'])}, trial "
                f"{int(row['trial_number'])}), which {' and '.join(s for _, _, s in broken)}: "
                f"relax {' and '.join(called(n) for n, _, _ in broken)}")


def _why_none(df: pd.DataFrame) -> str:
    """Why none of ``df`` (none of them eligible) can be recommended, counted as ``tuner show``
    counts them: ``1 compile_error, 2 no latency measured``."""
    return left_out_counts(df) if not df.empty else "the study has no trials"


def _workload(meta: dict[str, Any], row: pd.Series) -> Workload:
    if meta.get("workload"):
        return Workload.from_dict(meta["workload"])
    fields = {f.name for f in dataclasses.fields(Workload)}
    return Workload.from_dict({k: plain(row.get(k)) for k in fields
                               if plain(row.get(k)) is not None})


def _row_fingerprint(row: pd.Series) -> dict[str, Any]:
    fp = {k: plain(row.get(f"fp_{k}")) for k in FINGERPRINT_FIELDS}
    return fp if any(v is not None for v in fp.values()) else {}


def _check_flag(name: str, value: object) -> None:
    """``value`` is True or False: a string such as "false" is truthy, and would do the opposite;
    1 and 0 equal True and False but are no flags (numpy's bool is one)."""
    if not isinstance(value, (bool, np.bool_)):
        raise UserError(f"{name} must be True or False, not {value!r}")


def _list(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
