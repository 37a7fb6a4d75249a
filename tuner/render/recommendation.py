"""A recommendation for people: the lines of ``tuner recommend``, and the Python snippet that
does what :meth:`tuner.Recommendation.apply` does."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from tuner.data.measured import Measured
from tuner.data.noise import p99_of_few_calls
from tuner.data.plain import PlainGain
from tuner.data.select import OBJECTIVES, Constraints
from tuner.domain.config import TrialConfig
from tuner.domain.records import SCHEDULE_REPEATS
from tuner.domain.workload import Workload, shape_label, tensor_dtype
from tuner.render.plain import describe as describe_gain
from tuner.render.table import terminal_width, wrap
from tuner.render.text import describe_fingerprint, fmt_bytes
from tuner.words import plural


class Recommended(Protocol):
    """What these views read of a :class:`tuner.Recommendation` (a frozen dataclass: every
    member is read-only)."""

    @property
    def study(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def objective(self) -> str: ...

    @property
    def constraints(self) -> Constraints: ...

    @property
    def config(self) -> TrialConfig: ...

    @property
    def name(self) -> str: ...

    @property
    def workload(self) -> Workload: ...

    @property
    def measured(self) -> Measured: ...

    @property
    def trial_number(self) -> int: ...

    @property
    def cuda_graphs(self) -> bool: ...

    @property
    def search_limits(self) -> Constraints: ...

    def breaks_search_limits(self, called: Callable[[str], str] = str) -> list[str]: ...

    @property
    def candidates(self) -> int: ...

    @property
    def confirmed(self) -> bool: ...

    @property
    def fingerprint(self) -> dict[str, Any]: ...

    @property
    def row(self) -> dict[str, Any]: ...

    @property
    def within_noise(self) -> tuple[str, ...]: ...

    @property
    def artifacts_path(self) -> Path | None: ...

    @property
    def artifacts_found(self) -> bool: ...

    @property
    def why_eager(self) -> str: ...

    @property
    def undecided(self) -> tuple[str, ...]: ...

    @property
    def processes_to_decide(self) -> int | None: ...

    @property
    def vs_plain(self) -> PlainGain | None: ...


def snippet(rec: Recommended) -> str:
    """Python source to paste into production code; it does what :meth:`apply` does."""
    warm = rec.artifacts_path if rec.config.compiled and rec.artifacts_found else None
    lines = _head(rec, warm) + ["", ""] + _compile_model(rec, warm)
    if rec.cuda_graphs:
        lines += ["", "", *(f"# {line}" for line in CUDA_GRAPHS),
                  "def infer(compiled: torch.nn.Module, *inputs):",
                  '    """One inference step, marked as the study marked each call."""',
                  "    torch.compiler.cudagraph_mark_step_begin()",
                  "    return compiled(*inputs)"]
    return "\n".join(lines) + "\n"


def _head(rec: Recommended, warm: Path | None) -> list[str]:
    """The snippet's opening: where the config comes from and what it measured, how the study
    ran the model, the imports, and the compile artifacts to warm-start from (``warm``)."""
    w, m = rec.workload, rec.measured
    lines = [
        f"# Recommended by tuner: study {rec.study!r}, objective {rec.objective}, "
        f"batch size {rec.config.batch_size}, trial {rec.trial_number}.",
        f"# Measured on {describe_fingerprint(rec.fingerprint)}:",
        f"#   {_summary(m)}.",
        f"# The study ran the model in eval mode on {w.device} in {_precision(w.dtype)} under "
        "torch.no_grad(),",
        f"# inputs of batch size {rec.config.batch_size}"
        + (", 4-D inputs channels_last" if w.channels_last else "")
        + ": place and cast model and inputs the same way.",
        "import warnings",
        "import torch",
    ]
    if warm is not None:
        saved_by = rec.row.get("artifacts_torch") or rec.fingerprint.get("torch")
        lines += [
            "from pathlib import Path",
            "",
            "# Compile artifacts the study saved for this config: loaded before torch.compile,",
            "# the first call finds its compiled code in the cache (copy the file along and",
            "# point ARTIFACTS at it).",
            f"ARTIFACTS = Path({str(warm)!r})",
            f"ARTIFACTS_TORCH = {saved_by!r}  # only this torch can use them",
        ]
    elif rec.config.compiled and rec.artifacts_path is not None:  # as the table says
        lines += ["", "# No warm start: the study saved compile artifacts for this config, but",
                  f"# {rec.artifacts_path} is missing; copy the study folder's artifacts/ along",
                  "# and write this again to load them. Until then the first call compiles cold."]
    return lines


def _compile_model(rec: Recommended, warm: Path | None) -> list[str]:
    """``compile_model``: the study's global knobs and memory format, then the artifacts loaded
    (``warm``) and ``torch.compile`` with the recorded args, or the model as it is for eager."""
    w = rec.workload
    dtype = tensor_dtype(w.dtype)
    device = w.device.split(":")[0]
    lines = [
        "def compile_model(model: torch.nn.Module) -> torch.nn.Module:",
        '    """Usage: model = compile_model(model)"""',
        "    param = next((p for p in model.parameters() if p.is_floating_point()), None)",
        f"    measured_as = (torch.{dtype}, {device!r})  # dtype and device",
        "    if model.training or (param is not None and (param.dtype, param.device.type) != "
        "measured_as):",
        f'        warnings.warn("the study measured model.eval().to({device!r}, torch.{dtype}); '
        'this one differs, so its numbers do not hold")',
    ]
    if w.device.startswith("cuda"):
        lines.append(f"    torch.backends.cudnn.benchmark = {w.cudnn_benchmark}")
    if w.dtype == "tf32":
        lines.append('    torch.set_float32_matmul_precision("high")  # TF32 matmuls')
        if w.device.startswith("cuda"):
            lines += ["    torch.backends.cuda.matmul.allow_tf32 = True",
                      "    torch.backends.cudnn.allow_tf32 = True"]
    if w.channels_last:
        lines.append("    model = model.to(memory_format=torch.channels_last)")
    elif rec.config.channels_last is False:
        lines.append("    model = model.to(memory_format=torch.contiguous_format)  "
                     "# the study ran it contiguous")
    if rec.config.compiled:
        if warm is not None:
            # load_cache_artifacts returns None for bytes it cannot read (it only logs why)
            lines += ["    loaded = None",
                      "    if ARTIFACTS.exists() and torch.__version__ == ARTIFACTS_TORCH:",
                      "        loaded = torch.compiler.load_cache_artifacts(ARTIFACTS.read_bytes())",
                      "    if loaded is None:",
                      '        why = ("is missing" if not ARTIFACTS.exists() else '
                      'f"was saved by torch {ARTIFACTS_TORCH} and this is {torch.__version__}"',
                      '               if torch.__version__ != ARTIFACTS_TORCH else '
                      '"could not be read (torch logged why)")',
                      '        warnings.warn(f"no warm start: {ARTIFACTS} {why}; the first call '
                      'compiles cold")']
        args = ", ".join(f"{k}={v!r}" for k, v in rec.config.compile_kwargs().items())
        lines += _regional(rec, args) if rec.config.regional else \
            [f"    return torch.compile(model, {args})"]
    else:
        lines.append(f"    return model  # not compiled: {rec.why_eager}")
    return lines


def _regional(rec: Recommended, args: str) -> list[str]:
    """A regional config's compile: each outermost module of the class the study compiled,
    in place, as tuner.runtime.regions does; the rest of the model stays eager."""
    block = rec.row.get("region_class")
    return [f"    # Regional: each {block} compiled in place (the study compiled "
            f"{rec.row.get('regions_compiled')}); the rest runs eager.",
            "    blocks: list[str] = []",
            "    for name, module in model.named_modules():",
            f"        if name and type(module).__qualname__ == {block!r} and not any(",
            '                name.startswith(outer + ".") for outer in blocks):',
            "            blocks.append(name)",
            f"            module.compile({args})",
            "    return model"]


def _applied(rec: Recommended) -> str:
    """How the config is applied, in one line (``tuner recommend``'s ``apply``)."""
    call = ", ".join(f"{k}={v!r}" for k, v in rec.config.compile_kwargs().items())
    if not rec.config.regional:
        return f"torch.compile(model, {call})"
    return (f"block.compile({call}) for each {rec.row.get('region_class')} of the model "
            f"(regional: the study compiled {rec.row.get('regions_compiled')}), the rest eager")


# What a config that records CUDA graphs asks of the code that calls it.
CUDA_GRAPHS = ("CUDA graphs: the study called torch.compiler.cudagraph_mark_step_begin() before "
               "each call.", "Outputs live in the graphs' memory pool and the next call "
               "overwrites them: .clone() any", "output you keep past the next call.")


def describe(rec: Recommended, called: Callable[[str], str] = str,
             width: int | None = None) -> str:
    """A few lines for humans (``--format table``), each wrapped within ``width`` characters
    (None: :func:`tuner.render.table.terminal_width`) under its value's column; ``called``
    names each limit (the CLI: its option, ``--max-compile-s``)."""
    rows = _figures(rec, called) + _notes(rec, called)
    keys = max(len(k) for k, _ in rows)
    fits = (terminal_width() if width is None else width) - keys - 2
    return "\n".join(f"{k.ljust(keys)}  " + wrap(v, fits, hang=0).replace("\n", "\n" + " " * (keys + 2))
                     for k, v in rows)




def _figures(rec: Recommended, called: Callable[[str], str]) -> list[tuple[str, str]]:
    """The rows of what was chosen and how it measured: the study, objective and limits, the
    config and how to apply it, its latency, throughput, compile cost and memory, and where."""
    w, m = rec.workload, rec.measured
    limits = ", ".join(f"{called(k)}={v:g}" for k, v in rec.constraints.to_dict().items()
                       if v is not None) or "none"
    # "... takes 15.0 s where max_compile_s=1", "... has no measurement for max_p99_ms"
    why_eager = re.sub(rf"\b({'|'.join(Constraints().to_dict())})\b",
                       lambda found: called(found.group(1)), rec.why_eager)
    rows = [
        ("study", f"{rec.study} ({w.model} {w.dtype} on {w.device}; {rec.path})"),
        ("objective", f"{rec.objective}: {OBJECTIVES[rec.objective].what}"),
        ("constraints", f"{limits}; {rec.candidates} "
                        + ("config meets them" if rec.candidates == 1 else "configs meet them")),
        ("config", f"{rec.name}, batch size {rec.config.batch_size} "
                   f"(trial {rec.trial_number})"),
        ("apply", _applied(rec) if rec.config.compiled
         else f"no torch.compile: {why_eager}"),
        ("latency", _latency(m) + ", " + _fmt(m.speedup_vs_eager, "{:.2f}x vs eager")),
        ("throughput", _fmt(m.throughput_per_s, "{:,.0f} items/s") + " back to back ("
         + _fmt(m.stream_ms_p50_median if m.stream_ms_p50_median is not None
                else m.stream_ms_p50, "{:.3f} ms a call") + ")"),
        # eager compiles nothing: no compile time (show and compare print "-" there)
        ("compile", ("none (eager)" if not rec.config.compiled
                     else _fmt(m.compile_s_cold, "{:.1f} s first call")) + ", "
         + ("" if m.compile_s_warm is None else f"{m.compile_s_warm:.1f} s warm, ")
         + ("" if m.compile_s_artifacts is None
            else f"{m.compile_s_artifacts:.1f} s from saved artifacts, ")
         + _fmt(m.time_to_steady_s, "{:.1f} s until steady")
         + ("" if m.break_even_calls is None
            else f", pays back after {m.break_even_calls:,.0f} calls")),
        ("memory", _fmt(m.peak_memory_bytes, "bytes") + f" serving ({m.memory_kind}), "
         + _fmt(m.memory_needed_bytes, "bytes") + " at most"),
        ("measured on", describe_fingerprint(rec.fingerprint)),
    ]
    if rec.cuda_graphs:
        rows.insert(5, ("cuda graphs", "call torch.compiler.cudagraph_mark_step_begin() before "
                        "each call, as the study did; the next call overwrites the outputs: "
                        ".clone() any you keep"))
    if w.dtype != "float32":  # what the precision costs in accuracy
        rows.insert(-1, ("precision", _precision(w.dtype) + _fmt(
            rec.row.get("max_abs_error_vs_fp32"), ", max abs error {:.3g} against float32 eager")
            if rec.row.get("max_abs_error_vs_fp32") is not None else _precision(w.dtype)))
    if m.latency_ms_p50_ci_low is not None:
        rows.insert(6, ("noise", f"p50 {m.latency_ms_p50_ci_low:.3f}-"
                        f"{m.latency_ms_p50_ci_high:.3f} ms (95% interval over fresh "
                        f"processes), spread {_fmt(m.latency_spread_pct, '{:.1f}%')}"))
    if rec.vs_plain is not None:  # the headline beside vs eager: right under the latency
        at = next(i for i, (k, _) in enumerate(rows) if k == "latency") + 1
        rows.insert(at, ("vs plain", describe_gain(rec.vs_plain)))
    replay = rec.row.get("schedule_total_s")
    if replay is not None and w.shape_schedule:
        shapes = ",".join(shape_label(s) for s in w.shape_schedule)
        recompiles = rec.row.get("schedule_recompiles")
        rows.insert(-1, ("traffic", f"{replay:.2f} s for {SCHEDULE_REPEATS} replays of "
                                    f"{shapes}" + ("" if recompiles is None else
                                                   f", {plural(int(recompiles), 'recompile')}")))
    return rows


def _notes(rec: Recommended, called: Callable[[str], str]) -> list[tuple[str, str]]:
    """The rows beneath the figures: configs within noise of it, the warm start, and what to
    beware of (noise, the correctness check, a limit of the search, one process, a short p99)."""
    rows: list[tuple[str, str]] = []
    if rec.within_noise:
        rows.append(("note", f"within noise of {', '.join(rec.within_noise)}: their fresh "
                             "processes' p50s overlap, so neither is faster; choose on the "
                             "other columns"))
    if rec.undecided:
        rows.append(("note", _undecided(rec)))
    if rec.artifacts_found:
        saved_by = rec.row.get("artifacts_torch") or rec.fingerprint.get("torch")
        rows.append(("warm start", f"apply() loads {rec.artifacts_path} (saved by torch "
                                   f"{saved_by}; another torch skips it)"))
    elif rec.artifacts_path is not None:  # a copy of the study folder without its artifacts/
        rows.append(("warm start", f"none: the study saved compile artifacts for it, but "
                                   f"{rec.artifacts_path} is missing (copy the study folder's "
                                   "artifacts/ along); apply() compiles cold"))
    if rec.measured.noisy:
        rows.append(("note", "the latency was noisy (IQR above 10% of the median)"))
    checked = rec.row.get("correctness_note")
    if isinstance(checked, str) and checked:  # what the check against eager could not show
        rows.append(("correctness", checked))
    if broken := rec.breaks_search_limits(called):
        given = ", ".join(f"{called(k)}={v:g}" for k, v in rec.search_limits.to_dict().items()
                          if v is not None)
        rows.append(("note", f"it breaks a limit the study's search was given: "
                             f"{'; '.join(broken)} (give {given} here too to recommend within "
                             "it)"))
    if not rec.confirmed and rec.config.compiled:
        rows.append(("note", f"measured in one process: `tuner confirm {rec.path.parent}` "
                             "measures the finalists again in fresh processes; until then, a "
                             "config within noise of eager cannot be told from it"))
    if p99_of_few_calls(calls := rec.row.get("measure_calls") or 0):
        rows.append(("note", f"its p99 is of {int(calls)} calls a process: about the slowest "
                             "one, not a tail (--min-calls 100 or a longer --min-seconds "
                             "times more)"))
    return rows


def _undecided(rec: Recommended) -> str:
    """The note on configs the recommendation is undecided against, and what would decide."""
    n = rec.processes_to_decide
    command = f"`tuner confirm {rec.path.parent} --repeats {n - 1 if n else 'N'}`"
    return (f"undecided against {', '.join(rec.undecided)}: every process of one was faster, but too few "
            "processes to say so beyond noise, so this one is chosen by its median; "
            f"{command} measures the finalists "
            + (f"in {n} processes each, which would decide if their figures hold" if n else
               "in more processes (N above the present count), which may decide"))


def _precision(dtype: str) -> str:
    """``torch.bfloat16``, or for tf32 the float32 it holds tensors in."""
    return "torch.float32 with TF32 matmuls" if dtype == "tf32" else f"torch.{dtype}"


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "bytes":
        return f"{fmt_bytes(value)}"
    return fmt.format(value)


def _ms(value: float | None, quantile: str) -> str:
    """``5.100 ms p90``, or ``p90 not measured`` (a bare "-" beside the p50 named nothing)."""
    return f"{quantile} not measured" if value is None else f"{value:.3f} ms {quantile}"


def _latency(m: Measured) -> str:
    """p50, p90 and p99 per request; for a finalist measured again, the medians over its
    processes, which it was chosen and limited by, and then its search trial's own."""
    own = ", ".join(_ms(v, q) for v, q in ((m.latency_ms_p50, "p50"), (m.latency_ms_p90, "p90"),
                                           (m.latency_ms_p99, "p99")))
    if m.latency_ms_p50_ci_low is None or m.latency_ms_p50_median is None:
        return own.replace(" ms p50", " ms p50 per request", 1)
    if (m.tail_processes or 0) < 2:  # re-measured before the processes kept their tails
        return (f"{m.latency_ms_p50_median:.3f} ms p50 per request (median over fresh "
                f"processes; its search trial: {own})")
    return (f"{m.latency_ms_p50_median:.3f} ms p50 per request, "
            f"{_ms(m.latency_ms_p90_median, 'p90')}, {_ms(m.latency_ms_p99_median, 'p99')}"
            f" (medians over fresh processes; its search trial: {own})")


def _summary(m: Measured) -> str:
    p50 = m.latency_ms_p50 if m.latency_ms_p50_median is None else m.latency_ms_p50_median
    parts = [f"p50 {p50:.3f} ms"]
    if m.speedup_vs_eager is not None:
        parts.append(f"{m.speedup_vs_eager:.2f}x vs eager")
    if m.compile_s_cold is not None:
        parts.append(f"first call {m.compile_s_cold:.1f} s")
    if m.peak_memory_bytes is not None:
        parts.append(f"memory {fmt_bytes(m.peak_memory_bytes)}")
    return ", ".join(parts)
