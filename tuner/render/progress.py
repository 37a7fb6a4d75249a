"""The line a search prints on stderr after each trial (on a terminal, the live bar of
:mod:`tuner.render.progress_bar` instead)."""

from __future__ import annotations

from tuner.domain.records import TrialEvent
from tuner.words import fmt_s


def progress_line(event: TrialEvent) -> str:
    best = ", ".join(f"bs={bs}: {name} {ms:.3f} ms" for bs, (name, ms) in sorted(event.best.items()))
    eta = (f" | ETA {'at least ' if event.eta_at_least else ''}{fmt_s(event.eta_s)}"
           if event.eta_s is not None else "")
    return f"{trial_outcome(event)} | best {best or '-'}{eta}"


def trial_outcome(event: TrialEvent) -> str:
    """The trial and how it ended: ``[3/8] trial 5 default bs=1: p50 1.234 ms, ...``
    (the progress bar prints it above itself; the plain line goes on with the best so far)."""
    r, c = event.result, event.config
    where = f"[{event.number}/{event.target}]" if event.target else f"[{event.number}]"
    if event.trial_number is not None:
        where += f" trial {event.trial_number}"
    if r.ok:
        what = (f"p50 {r.latency_ms_p50:.3f} ms, warm-up {r.time_to_steady_s:.1f} s"
                + (" (noisy)" if r.noisy else ""))
    else:
        what = f"{r.status.value}: {r.message[:120]}"
    return f"{where} {event.name} bs={c.batch_size}: {what}"
