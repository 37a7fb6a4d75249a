"""Transfer between studies (``tuner compare``): one study's fastest config at a batch size,
looked up in another study at the same batch size.

Found there by what it ran (:mod:`tuner.data.equivalent`), whatever dimensions either study
searched: on that study's Pareto front or not, what using it there would cost (its latency
there over the best there, :data:`tuner.data.select.LATENCY`), whether it is within noise of
that best by the one rule of :func:`tuner.data.noise.verdict` (over the p50 of each process
each config ran in there), and which knob values the two studies' fastest configs share and
which they differ in. A config the other study did not measure is said so, not guessed.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tuner.data.comparison import Transfer
from tuner.data.equivalent import RAN, Ran
from tuner.data.noise import SAME, UNDECIDED, p50s_of, row_verdict
from tuner.data.rows import num
from tuner.data.select import LATENCY, best, why_left_out
from tuner.domain.config import EAGER, INDUCTOR, WHOLE
from tuner.domain.records import NOT_RUN


def transfer(bs: int, source: str, target: str, at: dict[str, pd.DataFrame],
             tried: dict[str, pd.DataFrame], front: dict[str, pd.DataFrame],
             rans: dict[str, Ran]) -> Transfer:
    """Study ``source``'s fastest config at batch size ``bs`` in study ``target``; ``at``,
    ``tried`` and ``front``: each study's verified rows, every row and Pareto front there;
    ``rans``: how each study's rows read (its metadata)."""
    mine = best(at[source], "latency")
    key, label = str(mine["config_key"]), str(mine["label"])
    ran = mine[RAN]  # what it ran, matched whatever dimensions the target study searched
    theirs = at[target]
    top = best(theirs, "latency") if not theirs.empty else None
    best_label = None if top is None else str(top["label"])
    best_ms = None if top is None else num(top[LATENCY])
    measured = not tried[target].empty
    shared, differ = ({}, {}) if top is None else knobs_split(
        (source, mine, rans[source]), (target, top, rans[target]))
    knobs: dict[str, Any] = {"knobs_shared": shared, "knobs_differ": differ}
    same = theirs[theirs[RAN] == ran]
    if same.empty:
        # Not verified on the target: did it fail there, was it not run, or never tried?
        there = tried[target][tried[target][RAN] == ran]
        if not there.empty:
            why = sorted(set(why_left_out(there)))
            if all(w.startswith(NOT_RUN) for w in why):
                return Transfer(bs, source, target, label, key, "not_run",
                                "; ".join(w[len(NOT_RUN):] for w in why), None,
                                best_label, best_ms, None, measured, **knobs)
            return Transfer(bs, source, target, label, key, "failed", ", ".join(why), None,
                            best_label, best_ms, None, measured, **knobs)
        return Transfer(bs, source, target, label, key, "not_measured", "", None,
                        best_label, best_ms, None, measured, **knobs)
    there_row = same.loc[pd.to_numeric(same[LATENCY], errors="coerce").idxmin()]
    latency = float(there_row[LATENCY])
    on_front = ran in set(front[target][RAN])
    assert top is not None  # the config is verified there, so the target has a best
    if top[RAN] == ran:
        verdict, processes = SAME, None
    else:
        found = row_verdict(there_row, top)
        verdict, processes = found.outcome, found.processes if found.outcome == UNDECIDED else None
    return Transfer(bs, source, target, label, key, "on_front" if on_front else "off_front",
                    "", latency, best_label, best_ms, latency / best_ms if best_ms else None,
                    measured, verdict=verdict, verdict_processes=processes,
                    processes_there=max(len(p50s_of(there_row)), 1),
                    best_processes=max(len(p50s_of(top)), 1), **knobs)


def knobs_split(a: tuple[str, pd.Series, Ran], b: tuple[str, pd.Series, Ran]
                ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The knob values two rows (each with its study's tag and :class:`Ran`) share, and, for
    the knobs they differ in, each one's value by tag. An inductor option one config leaves
    unset takes the value its mode runs without it, as its study (else the other) knows it;
    None where neither does, and for mode and dynamic of eager; a compiled config without a
    compile scope compiled the whole model."""
    (tag_a, row_a, ran_a), (tag_b, row_b, ran_b) = a, b
    knobs_a, knobs_b = ran_a.knobs(row_a), ran_b.knobs(row_b)

    def value(knobs: dict[str, Any], ran: Ran, other: Ran, name: str) -> Any:
        if name in knobs:
            return knobs[name]
        if name == "compile_scope":  # a compiled config without one compiled the whole model
            return WHOLE if knobs["backend"] != EAGER else None
        mode = knobs.get("mode")
        return ran.unset(mode).get(name, other.unset(mode).get(name)) \
            if knobs["backend"] == INDUCTOR else None

    shared: dict[str, Any] = {}
    differ: dict[str, dict[str, Any]] = {}
    for name in [*knobs_a, *(k for k in knobs_b if k not in knobs_a)]:
        va, vb = value(knobs_a, ran_a, ran_b, name), value(knobs_b, ran_b, ran_a, name)
        if va == vb:
            shared[name] = va
        else:
            differ[name] = {tag_a: va, tag_b: vb}
    return shared, differ

