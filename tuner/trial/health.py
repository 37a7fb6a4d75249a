"""Compile health: what dynamo and inductor did with the model, from their own counters."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

# compile health --------------------------------------------------------------------------
# How dynamo words a refused recompile: "Dynamo recompile limit exceeded ... Limit type:
# recompile_limit" (torch 2.14, checked); older releases raised "cache_size_limit reached" or
# "<limit name> reached" (from their source, not run here).
_LIMIT_HIT = re.compile(r"(recompile|cache)[ _]?(size[ _]?)?limit", re.IGNORECASE)

_LIMIT_TYPE = re.compile(r"Limit type: (\w+)|(\w*(?:recompile|cache_size)_limit)")


@dataclasses.dataclass(frozen=True)
class Health:
    """What dynamo and inductor did with the model, from their own counters.

    ``recompiles`` counts every guard failure that made dynamo compile a frame again, including
    the ones it refused at the recompile limit; ``recompile_limit_hits`` counts those refusals
    (the frame then runs eager for the inputs that failed its guards). ``eager_fallback_frames``
    counts frames whose compilation failed otherwise (a backend error under
    ``suppress_errors``, ...). Reasons are first lines, at most 20 of each.
    """

    graph_breaks: int
    graph_break_reasons: list[str]
    unique_graphs: int
    recompiles: int
    recompile_reasons: list[str]
    cudagraph_skips: int
    eager_fallback_frames: int
    recompile_limit_hits: int = 0
    recompile_limit_reasons: list[str] = dataclasses.field(default_factory=list)
    cudagraph_skip_reasons: list[str] = dataclasses.field(default_factory=list)
    eager_fallback_reasons: list[str] = dataclasses.field(default_factory=list)

    @property
    def ran_compiled(self) -> bool:
        """False when the backend produced no compiled graph at all: every call ran eager
        under a compiled label (a backend that failed under ``suppress_errors``, a model with
        nothing dynamo could capture). Such a config must never pass for a compiled speedup."""
        return self.unique_graphs > 0


def compile_health() -> Health:
    """Read dynamo's and inductor's own counters; call after the compiled calls."""
    from torch._dynamo.utils import counters

    metrics: list[Any] = []
    try:
        from torch._dynamo.utils import get_compilation_metrics

        metrics = list(get_compilation_metrics())
    except ImportError:
        pass
    return health_from(counters, metrics)


def health_from(counters: Any, metrics: list[Any]) -> Health:
    """:class:`Health` from dynamo's ``counters`` and its ``CompilationMetrics`` records (an
    empty list on a torch without them). Every field of a record is read with ``getattr``:
    older torch has fewer."""
    recompile_reasons = [str(m.recompile_reason) for m in metrics
                         if getattr(m, "recompile_reason", None)]
    failed = [m for m in metrics if getattr(m, "fail_type", None)]
    limit_hits = [m for m in failed if _LIMIT_HIT.search(str(getattr(m, "fail_reason", "") or ""))]
    fell_back = [m for m in failed if m not in limit_hits]
    frames = counters.get("frames", {})
    if metrics:
        limit_count = len(limit_hits)
        limit_reasons = [_limit_reason(str(getattr(m, "fail_reason", "")),
                                       getattr(m, "recompile_reason", None)) for m in limit_hits]
        fallback = len(fell_back)
    else:  # no records: dynamo's ``unimplemented`` counter still names a refused recompile
        limits = {k: v for k, v in counters.get("unimplemented", {}).items() if _LIMIT_HIT.search(k)}
        limit_count = int(sum(limits.values()))
        limit_reasons = [_limit_reason(k, None) for k in limits]
        fallback = max(0, frames.get("total", 0) - frames.get("ok", 0) - limit_count)
    skip_reasons = [str(getattr(m, "cudagraph_skip_reason", None)) for m in metrics
                    if getattr(m, "cudagraph_skip_reason", None)]
    return Health(
        graph_breaks=int(sum(counters.get("graph_break", {}).values())),
        graph_break_reasons=[_first_line(r) for r in counters.get("graph_break", {})][:20],
        unique_graphs=int(counters.get("stats", {}).get("unique_graphs", 0)),
        recompiles=len(recompile_reasons),
        recompile_reasons=[_first_line(r) for r in recompile_reasons][:20],
        cudagraph_skips=int(counters.get("inductor", {}).get("cudagraph_skips", 0)),
        eager_fallback_frames=fallback,
        recompile_limit_hits=limit_count,
        recompile_limit_reasons=_unique(limit_reasons),
        # Inductor counts skips on the CPU without a reason: fewer reasons than skips is normal.
        cudagraph_skip_reasons=_unique(_first_line(r) for r in skip_reasons),
        eager_fallback_reasons=_unique(
            f"{getattr(m, 'fail_type', '')}: {_one_line(str(getattr(m, 'fail_reason', '') or ''))}"
            for m in fell_back),
    )


def reset_compile_health() -> None:
    """Forget what dynamo compiled and counted in this process. A trial's own process starts
    clean; tests that compile in-process call this first (``torch._dynamo.reset()`` alone keeps
    the counters and the compilation records)."""
    import torch
    from torch._dynamo import utils

    torch._dynamo.reset()
    utils.counters.clear()
    clear = getattr(utils, "clear_compilation_metrics", None)
    if clear is not None:
        clear()


def _limit_reason(fail_reason: str, recompile_reason: str | None) -> str:
    match = _LIMIT_TYPE.search(fail_reason)
    limit = (match.group(1) or match.group(2)) if match else "recompile limit"
    return _first_line(f"{limit}: {recompile_reason}" if recompile_reason else limit)


def _unique(texts: Any, limit: int = 20) -> list[str]:
    return list(dict.fromkeys(texts))[:limit]


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:limit]
