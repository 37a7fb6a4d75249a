"""From a study to production: pick the config that fits, and apply it to a model.

>>> import tuner
>>> rec = tuner.recommend("studies/resnet50", batch_size=32, objective="latency",
...                       max_vram_gb=20, max_compile_s=60)      # doctest: +SKIP
>>> model = rec.apply(model)                                      # doctest: +SKIP

Only trials that finished (status ``ok``) and whose output was checked against eager and matched
(``correct == True``) are ever recommended. A trial whose correctness could not be checked
(``correct`` is empty, as in files of old schema versions) is left out too: the tuner does not
recommend what it could not verify.

The module is named ``recommendation`` rather than ``recommend`` so that importing it never
shadows the :func:`tuner.recommend` function on the package.

Warm start: a study keeps the compile artifacts of its finalists next to its Parquet files
(``artifacts/<config>.bin``, named by the row's ``artifacts_file``; see :mod:`tuner.finalists`).
:meth:`Recommendation.apply` loads them before ``torch.compile`` when this process runs the
torch that saved them, so the first call hits the compile cache instead of compiling cold.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tuner import results
from tuner.errors import UserError
from tuner.fingerprint import FIELDS as FINGERPRINT_FIELDS
from tuner.fingerprint import describe
from tuner.records import Status
from tuner.space import EAGER, TrialConfig
from tuner.worker import SCHEDULE_REPEATS
from tuner.workload import Workload, shape_label

if TYPE_CHECKING:
    import torch

GIB = 2**30


class MismatchWarning(UserWarning):
    """What runs now differs from what the study measured (machine, torch, dtype, device)."""


@dataclasses.dataclass(frozen=True)
class Objective:
    name: str
    column: str
    higher_is_better: bool
    what: str


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("latency", "latency_ms_p50", False, "lowest median latency per call"),
    Objective("throughput", "throughput_per_s", True, "most items per second"),
    Objective("memory", "peak_memory_bytes", False, "least memory while serving"),
    Objective("warmup", "time_to_steady_s", False, "cheapest warm-up (compile + settle)"),
    Objective("traffic", "schedule_total_s", False,
              "least time on the study's shape schedule, recompiles included"),
)}
# After the objective itself, in this order: a tail that is better, a warm-up that is cheaper,
# then the earlier trial. Exact ties only; no noise band.
TIE_BREAKERS = ("latency_ms_p90", "time_to_steady_s", "trial_number")


@dataclasses.dataclass(frozen=True)
class Constraints:
    """Limits a recommended config must meet. ``None`` means no limit.

    ``max_vram_gb`` is in GiB (2**30 bytes, as ``tuner show`` prints memory) and bounds the most
    memory the config needed at any point: while serving and while compiling and warming up. On a
    CPU study the memory is the trial process's peak resident memory. ``max_compile_s`` bounds
    the first compiled call as the study measured it (cold, unless the study ran with
    ``--warm-cache``). ``max_latency_ms`` bounds the median latency per call.
    """

    max_vram_gb: float | None = None
    max_compile_s: float | None = None
    max_latency_ms: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.to_dict().items():
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise UserError(f"{name}={value!r}: give a positive number")

    def to_dict(self) -> dict[str, float | None]:
        return dataclasses.asdict(self)

    def violations(self, row: pd.Series) -> list[tuple[str, float, str]]:
        """Each broken limit as (constraint, relative excess, sentence); unknown counts as broken."""
        out = []
        checks = (
            ("max_vram_gb", self.max_vram_gb, memory_needed_bytes(row), GIB, "{:.2f} GiB",
             "needs"),
            ("max_compile_s", self.max_compile_s, _num(row.get("compile_s_cold")), 1.0,
             "{:.1f} s", "takes"),
            ("max_latency_ms", self.max_latency_ms, _num(row.get("latency_ms_p50")), 1.0,
             "{:.3f} ms", "takes"),
        )
        for name, limit, value, unit, fmt, verb in checks:
            if limit is None:
                continue
            if value is None:
                out.append((name, math.inf, f"has no measurement for {name}"))
            elif value > limit * unit:
                out.append((name, value / (limit * unit) - 1,
                            f"{verb} {fmt.format(value / unit)} where {name}={limit:g}"))
        return out


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the study measured for the recommended config. Units in the names."""

    latency_ms_p50: float
    latency_ms_p90: float | None
    latency_ms_p99: float | None
    throughput_per_s: float | None
    speedup_vs_eager: float | None
    eager_latency_ms_p50: float | None
    compile_s_cold: float | None
    time_to_steady_s: float | None
    break_even_calls: float | None
    peak_memory_bytes: int | None
    memory_kind: str | None
    memory_needed_bytes: int | None  # the most at any point, compile and warm-up included
    noisy: bool | None
    graph_breaks: int | None
    recompiles: int | None
    # finalists measured again in fresh processes (tuner.finalists); None if not
    compile_s_warm: float | None = None
    compile_s_artifacts: float | None = None
    latency_ms_p50_ci_low: float | None = None
    latency_ms_p50_ci_high: float | None = None
    latency_spread_pct: float | None = None
    rank_within_noise: int | None = None

    @classmethod
    def from_row(cls, row: pd.Series) -> Measured:
        values = {f.name: _plain(row.get(f.name)) for f in dataclasses.fields(cls)}
        values["memory_needed_bytes"] = memory_needed_bytes(row)
        for name in ("peak_memory_bytes", "graph_breaks", "recompiles", "rank_within_noise"):
            if values[name] is not None:
                values[name] = int(values[name])
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The config a study recommends, and how to use it in production.

    Attributes:
        study: the study's name.
        path: the Parquet file it was read from (the study folder is ``path.parent``).
        objective: what was optimised: latency, throughput, memory, warmup or traffic.
        constraints: the limits it meets.
        config: backend, mode, dynamic and batch size; ``config.compile_kwargs()`` is exactly
            what ``torch.compile`` is given.
        workload: the model and global knobs the study measured with (device, dtype,
            channels_last, cudnn.benchmark).
        measured: latency, throughput, memory and compile cost as measured.
        trial_number: the trial it comes from.
        candidates: how many configs met the constraints.
        fingerprint: the machine and software the trial ran on.
        mismatch: how the running process differed from ``fingerprint`` when this was made.
        within_noise: configs that met the constraints and whose latency is within noise of
            this one's (their 95% intervals over fresh processes overlap); for the latency and
            throughput objectives, when the study re-measured its finalists.
        row: the whole Parquet row.
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

    def apply(self, model: torch.nn.Module, warm_start: bool = True) -> torch.nn.Module:
        """Set up ``model`` the way the study measured it and compile it with the recorded args.

        What it does, in order: sets the study's process-wide knobs
        (:func:`tuner.workload.apply_global_knobs`: ``cudnn.benchmark`` on a CUDA study);
        converts the model to ``channels_last`` if the study used it; then returns
        ``torch.compile(model, **config.compile_kwargs())``, or, when eager was best, the model
        itself, not compiled. Before compiling, with ``warm_start``, it loads the compile
        artifacts the study saved for the config (:meth:`load_artifacts`), so the first call
        finds its compiled code in the cache.

        What it does not do: move the model to the device, cast it to the study's dtype, put it in
        eval mode, or touch the inputs (cast them, make 4-D ones channels_last, and run under
        ``torch.no_grad()`` as the study did). Casting the model alone would break inputs of the
        old dtype, so it warns (:class:`MismatchWarning`) when the model's dtype or device is not
        the study's, and leaves the choice to you.
        """
        import torch

        from tuner.workload import apply_global_knobs

        self._check_model(model)
        apply_global_knobs(self.workload)
        if self.workload.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if not self.config.compiled:
            return model
        if warm_start:
            self.load_artifacts()
        return torch.compile(model, **self.config.compile_kwargs())

    @property
    def artifacts_path(self) -> Path | None:
        """The file of compile artifacts the study saved for this config, if it names one."""
        name = self.row.get("artifacts_file")
        return self.path.parent / name if name else None

    def load_artifacts(self) -> bool:
        """Load the study's compile artifacts of this config into this process's compile
        caches (``torch.compiler.load_cache_artifacts``); True if they were loaded.

        Skipped with a :class:`MismatchWarning` when the file is missing, this process runs
        another torch than the one that saved them, or torch cannot load them; then the first
        call compiles cold, as it would without them. Nothing to do (False, no warning) when
        the study saved none for this config.
        """
        import torch

        from tuner import artifacts

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
            warnings.warn(f"apply: no warm start from study {self.study!r}: {problem}; the first "
                          "call compiles cold", MismatchWarning, stacklevel=3)
            return False
        return True

    def _check_model(self, model: torch.nn.Module) -> None:
        import torch

        param = next((p for p in model.parameters() if p.is_floating_point()), None)
        if param is None:
            return
        w = self.workload
        problems = []
        if param.dtype != getattr(torch, w.dtype):
            problems.append(f"its parameters are {param.dtype}, the study used torch.{w.dtype}")
        if param.device.type != torch.device(w.device).type:
            problems.append(f"it is on {param.device}, the study ran on {w.device}")
        if problems:
            warnings.warn(f"apply: the model is not as study {self.study!r} measured it: "
                          f"{'; '.join(problems)}. Its numbers assume model.to({w.device!r}, "
                          f"torch.{w.dtype}) and inputs cast alike; apply does not cast or move",
                          MismatchWarning, stacklevel=3)

    def snippet(self) -> str:
        """Python source to paste into production code; it does what :meth:`apply` does."""
        w, m = self.workload, self.measured
        lines = [
            f"# Recommended by tuner: study {self.study!r}, objective {self.objective}, "
            f"batch size {self.config.batch_size}, trial {self.trial_number}.",
            f"# Measured on {describe(self.fingerprint)}:",
            f"#   {_summary(m)}.",
            f"# The study ran the model in eval mode on {w.device} in torch.{w.dtype} under "
            "torch.no_grad(),",
            f"# inputs of batch size {self.config.batch_size}"
            + (", 4-D inputs channels_last" if w.channels_last else "")
            + ": place and cast model and inputs the same way.",
            "import torch",
        ]
        warm = self.artifacts_path if self.config.compiled else None
        if warm is not None and warm.exists():
            saved_by = self.row.get("artifacts_torch") or self.fingerprint.get("torch")
            lines += [
                "from pathlib import Path",
                "",
                "# Compile artifacts the study saved for this config: loaded before torch.compile,",
                "# the first call finds its compiled code in the cache (copy the file along).",
                f"ARTIFACTS = Path({str(warm)!r})",
                f"ARTIFACTS_TORCH = {saved_by!r}  # only this torch can use them",
            ]
        lines += [
            "",
            "",
            "def compile_model(model: torch.nn.Module) -> torch.nn.Module:",
            '    """Usage: model = compile_model(model)"""',
        ]
        if w.device.startswith("cuda"):
            lines.append(f"    torch.backends.cudnn.benchmark = {w.cudnn_benchmark}")
        if w.channels_last:
            lines.append("    model = model.to(memory_format=torch.channels_last)")
        if self.config.compiled:
            if warm is not None and warm.exists():
                lines += ["    if ARTIFACTS.exists() and torch.__version__ == ARTIFACTS_TORCH:",
                          "        torch.compiler.load_cache_artifacts(ARTIFACTS.read_bytes())"]
            args = ", ".join(f"{k}={v!r}" for k, v in self.config.compile_kwargs().items())
            lines.append(f"    return torch.compile(model, {args})")
        else:
            lines.append("    return model  # eager was best here: compiling does not pay off")
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (``--format json``)."""
        return {
            "study": self.study, "path": str(self.path), "objective": self.objective,
            "constraints": self.constraints.to_dict(), "config": self.config.to_dict(),
            "label": self.config.label, "compile_kwargs": self.config.compile_kwargs(),
            "workload": self.workload.to_dict(), "measured": dataclasses.asdict(self.measured),
            "trial_number": self.trial_number, "candidates": self.candidates,
            "fingerprint": self.fingerprint, "mismatch": list(self.mismatch),
            "within_noise": list(self.within_noise),
            "artifacts": None if self.artifacts_path is None else str(self.artifacts_path),
        }

    def describe(self) -> str:
        """A few lines for humans (``--format table``)."""
        w, m = self.workload, self.measured
        limits = ", ".join(f"{k}={v:g}" for k, v in self.constraints.to_dict().items()
                           if v is not None) or "none"
        call = ", ".join(f"{k}={v!r}" for k, v in self.config.compile_kwargs().items())
        rows = [
            ("study", f"{self.study} ({w.model} {w.dtype} on {w.device}; {self.path})"),
            ("objective", f"{self.objective}: {OBJECTIVES[self.objective].what}"),
            ("constraints", f"{limits}; {self.candidates} configs meet them"),
            ("config", f"{self.config.label}, batch size {self.config.batch_size} "
                       f"(trial {self.trial_number})"),
            ("apply", f"torch.compile(model, {call})" if self.config.compiled
             else "no torch.compile: eager was best"),
            ("latency", _fmt(m.latency_ms_p50, "{:.3f} ms p50") + ", "
             + _fmt(m.latency_ms_p90, "{:.3f} ms p90") + ", "
             + _fmt(m.speedup_vs_eager, "{:.2f}x vs eager")),
            ("throughput", _fmt(m.throughput_per_s, "{:,.0f} items/s")),
            ("compile", _fmt(m.compile_s_cold, "{:.1f} s first call") + ", "
             + ("" if m.compile_s_warm is None else f"{m.compile_s_warm:.1f} s warm, ")
             + ("" if m.compile_s_artifacts is None
                else f"{m.compile_s_artifacts:.1f} s from saved artifacts, ")
             + _fmt(m.time_to_steady_s, "{:.1f} s until steady")
             + ("" if m.break_even_calls is None
                else f", pays back after {m.break_even_calls:,.0f} calls")),
            ("memory", _fmt(m.peak_memory_bytes, "bytes") + f" serving ({m.memory_kind}), "
             + _fmt(m.memory_needed_bytes, "bytes") + " at most"),
            ("measured on", describe(self.fingerprint)),
        ]
        if m.latency_ms_p50_ci_low is not None:
            rows.insert(6, ("noise", f"p50 {m.latency_ms_p50_ci_low:.3f}-"
                            f"{m.latency_ms_p50_ci_high:.3f} ms (95% interval over fresh "
                            f"processes), spread {_fmt(m.latency_spread_pct, '{:.1f}%')}"))
        replay = self.row.get("schedule_total_s")
        if replay is not None and w.shape_schedule:
            shapes = ",".join(shape_label(s) for s in w.shape_schedule)
            recompiles = self.row.get("schedule_recompiles")
            rows.insert(-1, ("traffic", f"{replay:.2f} s for {SCHEDULE_REPEATS} replays of "
                                        f"{shapes}" + ("" if recompiles is None else
                                                       f", {recompiles:.0f} recompiles")))
        if self.within_noise:
            rows.append(("note", f"within noise of {', '.join(self.within_noise)}: their 95% "
                                 "latency intervals overlap, so neither is faster; choose on "
                                 "the other columns"))
        if self.artifacts_path is not None:
            saved_by = self.row.get("artifacts_torch") or self.fingerprint.get("torch")
            rows.append(("warm start", f"apply() loads {self.artifacts_path} (saved by torch "
                                       f"{saved_by}; another torch skips it)"))
        if m.noisy:
            rows.append(("note", "the latency was noisy (IQR above 10% of the median)"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def recommend(
    study: str | Path,
    batch_size: int | None = None,
    objective: str = "latency",
    max_vram_gb: float | None = None,
    max_compile_s: float | None = None,
    max_latency_ms: float | None = None,
    strict: bool = False,
) -> Recommendation:
    """The best config of a study for one objective, within the limits given.

    Args:
        study: a study folder or one of its Parquet files.
        batch_size: the batch size to serve. ``None``: the study's only batch size; when it
            measured several, only ``objective="throughput"`` may choose among them.
        objective: ``latency`` (median per call), ``throughput`` (items per second),
            ``memory`` (while serving), ``warmup`` (compile plus settling) or ``traffic``
            (the whole replay of the study's shape schedule, recompiles included).
        max_vram_gb, max_compile_s, max_latency_ms: limits, see :class:`Constraints`.
        strict: refuse (raise :class:`UserError`) instead of warning when the study was made on
            another GPU, driver or torch than this process runs, or its machine is unknown.

    Ties on the objective go to the lower p90 latency, then the cheaper warm-up, then the
    earlier trial.

    Raises:
        UserError: unreadable study, unknown objective or batch size, nothing meets the limits
            (the message names the closest config and the limit it breaks), or, with
            ``strict``, another environment.

    Example:
        >>> rec = recommend("studies/resnet18-cuda", batch_size=32, max_compile_s=60)  # doctest: +SKIP
        >>> model = rec.apply(model)                                                  # doctest: +SKIP
    """
    if objective not in OBJECTIVES:
        raise UserError(f"unknown objective {objective!r}: choose one of {', '.join(OBJECTIVES)}")
    constraints = Constraints(max_vram_gb, max_compile_s, max_latency_ms)
    df, meta, path = load(study)
    name = str(meta.get("study") or path.parent.name)
    sizes = sorted(int(b) for b in df["batch_size"].dropna().unique())
    if batch_size is not None:
        if batch_size not in sizes:
            raise UserError(f"study {name!r} did not measure batch size {batch_size}; it measured "
                            f"{_list(sizes) or 'none'}")
        df = df[df["batch_size"] == batch_size]
    elif len(sizes) > 1 and objective != "throughput":
        raise UserError(f"study {name!r} measured batch sizes {_list(sizes)}: give one "
                        "(batch_size= / --batch-size), or use objective throughput to let the "
                        "batch size be chosen too")

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
        raise UserError(_closest_message(where, candidates, constraints, objective))
    best = rank(feasible, objective).iloc[0]

    fingerprint = _row_fingerprint(best) or dict((meta.get("fingerprints") or [{}])[0])
    workload = _workload(meta, best)
    mismatch = tuple(environment_mismatch(fingerprint, workload.device))
    if mismatch:
        text = f"study {name!r}: " + "; ".join(mismatch)
        if strict:
            raise UserError(f"{text} (strict: refusing; rerun the search on this machine)")
        warnings.warn(text, MismatchWarning, stacklevel=2)
    return Recommendation(
        study=name, path=path, objective=objective, constraints=constraints,
        config=config_of(best), workload=workload, measured=Measured.from_row(best),
        trial_number=int(best["trial_number"]), candidates=len(feasible),
        fingerprint=fingerprint, mismatch=mismatch,
        row={k: _plain(v) for k, v in best.items()},
        within_noise=_within_noise_of(best, feasible) if objective in ("latency", "throughput")
        else ())


def _within_noise_of(best: pd.Series, feasible: pd.DataFrame) -> tuple[str, ...]:
    """Labels of the other feasible configs at the same batch size whose latency interval
    overlaps ``best``'s (see tuner.finalists)."""
    from tuner.report import within_noise

    same = feasible[(feasible["batch_size"] == best["batch_size"])
                    & (feasible["trial_number"] != best["trial_number"])]
    return tuple(str(r["label"]) for _, r in same.iterrows() if within_noise(best, r))


# -- loading -----------------------------------------------------------------------------------
def load(study: str | Path) -> tuple[pd.DataFrame, dict[str, Any], Path]:
    """Read a study (folder or Parquet file) of any schema version this tuner knows.

    Columns that older files lack but that follow from others (throughput, warm-up cost, memory,
    speedup vs eager, fingerprint) are filled in; anything unreadable is a one-line UserError.
    """
    path = Path(study)
    if path.is_dir():
        path = path / results.TRIALS_FILE
    try:
        df, meta = results.read(path)
    except UserError as exc:
        raise UserError(_one_line(str(exc))) from exc
    except Exception as exc:  # noqa: BLE001 - a damaged file: say so on one line, never a traceback
        raise UserError(_one_line(f"{path}: not a readable tuner study file "
                                  f"({type(exc).__name__}: {exc})")) from exc
    missing = [c for c in ("status", "batch_size") if len(df) and df[c].isna().all()]
    if missing:
        raise UserError(f"{path}: not a tuner study file (no {', '.join(missing)} values)")
    return _complete(df, meta), meta, path


def _complete(df: pd.DataFrame, meta: dict[str, Any]) -> pd.DataFrame:
    df = df.copy()

    def fill(column: str, values: pd.Series) -> None:
        df[column] = df[column].where(df[column].notna(), values)

    p50 = pd.to_numeric(df["latency_ms_p50"], errors="coerce")
    fill("throughput_per_s", pd.to_numeric(df["batch_size"]) * 1e3 / p50)
    fill("time_to_steady_s", pd.to_numeric(df["compile_s_cold"], errors="coerce")
         + pd.to_numeric(df["warmup_s"], errors="coerce").fillna(0.0))
    steady = df["vram_bytes_steady_reserved"]
    fill("memory_kind", pd.Series(["cuda_reserved" if pd.notna(v) else "host_max_rss"
                                   for v in steady], index=df.index, dtype=object))
    fill("peak_memory_bytes", steady.where(steady.notna(), df["host_rss_bytes_peak"]))
    ok = df[(df["status"] == Status.OK.value) & (df["backend"] == EAGER)]
    eager = pd.to_numeric(ok["latency_ms_p50"], errors="coerce").groupby(ok["batch_size"]).min()
    fill("eager_latency_ms_p50", df["batch_size"].map(eager))
    fill("speedup_vs_eager", pd.to_numeric(df["eager_latency_ms_p50"], errors="coerce") / p50)
    fps = meta.get("fingerprints") or []
    if len(fps) == 1:  # one machine made the whole study: rows without one get it
        for key in FINGERPRINT_FIELDS:
            if fps[0].get(key) is not None:
                df[f"fp_{key}"] = df[f"fp_{key}"].astype(object).where(
                    df[f"fp_{key}"].notna(), fps[0][key])
    return df


# -- choosing ----------------------------------------------------------------------------------
def eligible(df: pd.DataFrame) -> pd.DataFrame:
    """Rows that may be recommended: finished, verified correct, with a latency, and not a
    compiled config that ran eager (``ran_compiled`` False)."""
    verified = df["correct"].map(lambda v: v is True or (v is not None and v == True))  # noqa: E712
    keep = (df["status"] == Status.OK.value) & verified.astype(bool) & df["latency_ms_p50"].notna()
    keep &= ~results.ran_eager_only(df)
    return df[keep]


def rank(df: pd.DataFrame, objective: str) -> pd.DataFrame:
    """``df`` best first for ``objective``; exact ties as :data:`TIE_BREAKERS` says."""
    spec = OBJECTIVES[objective]
    keys = [spec.column] + [c for c in TIE_BREAKERS if c != spec.column]
    ordered = df.assign(**{c: pd.to_numeric(df[c], errors="coerce") for c in keys})
    ordered = ordered.sort_values(keys, ascending=[not spec.higher_is_better] + [True] * (len(keys) - 1),
                                  na_position="last", kind="stable")
    return df.loc[ordered.index]


def _closest_message(where: str, candidates: pd.DataFrame, constraints: Constraints,
                     objective: str) -> str:
    ranked = rank(candidates, objective)
    # Closest: the smallest total overshoot, relative to each limit; the objective breaks ties.
    excess = [sum(min(e, 1e9) for _, e, _ in constraints.violations(r)) for _, r in ranked.iterrows()]
    row = ranked.iloc[min(range(len(excess)), key=excess.__getitem__)]
    broken = constraints.violations(row)
    limits = ", ".join(f"{k}={v:g}" for k, v in constraints.to_dict().items() if v is not None)
    return (f"no config of {where} meets {limits} ({len(candidates)} checked); the closest is "
            f"{row['label']} (batch size {int(row['batch_size'])}, trial {int(row['trial_number'])}), "
            f"which {' and '.join(s for _, _, s in broken)}: relax "
            f"{' and '.join(n for n, _, _ in broken)}")


def _why_none(df: pd.DataFrame) -> str:
    if df.empty:
        return "the study has no trials"
    ok = df[df["status"] == Status.OK.value]
    parts = [f"{len(df) - len(ok)} of {len(df)} trials failed"]
    unverified = int(ok["correct"].isna().sum())
    if unverified:
        parts.append(f"{unverified} could not be checked for correctness")
    wrong = int((ok["correct"] == False).sum())  # noqa: E712
    if wrong:
        parts.append(f"{wrong} gave wrong results")
    ran_eager = int(results.ran_eager_only(ok).sum())
    if ran_eager:
        parts.append(f"{ran_eager} compiled nothing and ran eager")
    return ", ".join(parts)


# -- environment -------------------------------------------------------------------------------
def environment_mismatch(study_fp: dict[str, Any], device: str,
                         current: dict[str, Any] | None = None) -> list[str]:
    """How this process's machine and software differ from ``study_fp``; empty if they match.

    ``current`` defaults to :func:`tuner.fingerprint.collect`, called lazily: CUDA is touched
    only when the study ran on CUDA and this process has it.
    """
    if not any(v is not None for v in study_fp.values()):
        return ["the study records no fingerprint, so it cannot be checked against this machine"]
    if current is None:
        current = _current_fingerprint(device, study_fp.get("device_kind") == "cuda")
    fields = ["device_kind", "torch"]
    if study_fp.get("device_kind") == "cuda" and current.get("device_kind") == "cuda":
        fields += ["gpu_name", "driver", "cuda"]
    elif study_fp.get("device_kind") != "cuda":
        fields += ["cpu"]
    differ = [f for f in fields if study_fp.get(f) is not None and study_fp.get(f) != current.get(f)]
    if not differ:
        return []
    words = {"device_kind": "device", "gpu_name": "GPU", "cpu": "CPU"}
    detail = ", ".join(f"{words.get(f, f)} {study_fp.get(f)} vs {current.get(f)}" for f in differ)
    return [f"measured on {_where(study_fp)}, but this process runs on {_where(current)} "
            f"({detail}); the numbers may not hold here"]


def _current_fingerprint(device: str, study_on_cuda: bool) -> dict[str, Any]:
    import torch

    from tuner import fingerprint

    if study_on_cuda and torch.cuda.is_available():
        return fingerprint.collect(device if device.startswith("cuda") else "cuda")
    return fingerprint.collect("cpu")


def _where(fp: dict[str, Any]) -> str:
    text = describe(fp)
    return text + (f", driver {fp['driver']}" if fp.get("driver") else "")


# -- small helpers -----------------------------------------------------------------------------
def memory_needed_bytes(row: pd.Series) -> int | None:
    """The most memory a config held at any point: serving, or compiling and warming up."""
    values = (_num(row.get("peak_memory_bytes")), _num(row.get("vram_bytes_compile_reserved")))
    known = [v for v in values if v is not None]
    return int(max(known)) if known else None


def config_of(row: pd.Series) -> TrialConfig:
    mode, dynamic = _plain(row.get("mode")), _plain(row.get("dynamic"))
    return TrialConfig(backend=str(row["backend"]), batch_size=int(row["batch_size"]),
                       mode=mode, dynamic=None if dynamic is None else bool(dynamic))


def _workload(meta: dict[str, Any], row: pd.Series) -> Workload:
    if meta.get("workload"):
        return Workload.from_dict(meta["workload"])
    fields = {f.name for f in dataclasses.fields(Workload)}
    return Workload.from_dict({k: _plain(row.get(k)) for k in fields
                               if _plain(row.get(k)) is not None})


def _row_fingerprint(row: pd.Series) -> dict[str, Any]:
    fp = {k: _plain(row.get(f"fp_{k}")) for k in FINGERPRINT_FIELDS}
    return fp if any(v is not None for v in fp.values()) else {}


def _num(value: Any) -> float | None:
    value = _plain(value)
    return None if value is None or isinstance(value, (str, bool)) else float(value)


def _plain(value: Any) -> Any:
    """numpy/pandas scalars → Python; NaN/NA → None (lists pass through)."""
    if isinstance(value, (list, tuple, dict)):
        return value
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
        if isinstance(value, list):
            return value
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "bytes":
        return f"{value / GIB:.2f} GiB"
    return fmt.format(value)


def _summary(m: Measured) -> str:
    parts = [f"p50 {m.latency_ms_p50:.3f} ms"]
    if m.speedup_vs_eager is not None:
        parts.append(f"{m.speedup_vs_eager:.2f}x vs eager")
    if m.compile_s_cold is not None:
        parts.append(f"first call {m.compile_s_cold:.1f} s")
    if m.peak_memory_bytes is not None:
        parts.append(f"memory {m.peak_memory_bytes / GIB:.2f} GiB")
    return ", ".join(parts)


def _list(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def _one_line(text: str) -> str:
    return " ".join(text.split())

