"""A recommendation as a notebook shows it (:meth:`tuner.Recommendation._repr_html_`): a small
table of what was chosen and how it measured."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from tuner.render.plain import describe as describe_gain
from tuner.render.text import fmt_bytes

if TYPE_CHECKING:
    from tuner.render.recommendation import Recommended


def html_table(rec: Recommended) -> str:
    """Study, batch size, config, objective, p50, the gains over eager and over the best plain
    mode, warm-up and memory, one row each."""
    m = rec.measured
    p50 = m.latency_ms_p50 if m.latency_ms_p50_median is None else m.latency_ms_p50_median
    rows = [
        ("study", rec.study), ("batch size", str(rec.config.batch_size)),
        ("config", rec.name), ("objective", rec.objective),
        ("p50 per request", f"{p50:.3f} ms"),
        ("vs eager", "-" if m.speedup_vs_eager is None else f"{m.speedup_vs_eager:.2f}x"),
        ("vs plain", "-" if rec.vs_plain is None else describe_gain(rec.vs_plain)),
        ("warm-up", "-" if m.time_to_steady_s is None else f"{m.time_to_steady_s:.1f} s"),
        ("memory", "-" if m.peak_memory_bytes is None else
         f"{fmt_bytes(m.peak_memory_bytes)} ({m.memory_kind})"),
    ]
    body = "".join(f"<tr><th style=\"text-align:left\">{html.escape(k)}</th>"
                   f"<td style=\"text-align:left\">{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table><caption>tuner.Recommendation</caption>{body}</table>"
