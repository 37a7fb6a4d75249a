"""The verdict under each batch size of ``tuner show``: one plain sentence on whether compiling
pays, and the ``tuner confirm`` command such a sentence suggests."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data.derive import baseline_of, listed, ran_eager_only
from tuner.data.noise import UNDECIDED, p50s_of, verdict
from tuner.data.plain import PlainGain, gain_over_plain
from tuner.data.rows import NAME
from tuner.data.select import LATENCY, best, comparable, left_out_counts
from tuner.domain.layout import DB_FILE
from tuner.domain.records import Status


def _flag(value: Any) -> bool:
    """A boolean cell that is set and true (None, NaN and False are not)."""
    return value is not None and not pd.isna(value) and bool(value)


def confirm_command(folder: Path | None = None, storage: str | None = None) -> str:
    """``tuner confirm`` for the study in ``folder`` (STUDY where the caller does not know it),
    to paste as it is. ``storage``: where the study lives, as its files say it (the study
    folder's study.db, or a URL without its password): any other than study.db is given with
    --storage, as URL where its password was taken out of the files."""
    command = "tuner confirm " + ("STUDY" if folder is None else shlex.quote(str(folder)))
    if storage is None or storage == DB_FILE:
        return command
    return f"{command} --storage {'URL' if '***' in storage else shlex.quote(storage)}"


def _eager_alone(bs: int, eager: pd.DataFrame, trials: pd.DataFrame) -> str:
    """The verdict where eager is the only eligible config at batch size ``bs``."""
    e = float(best(eager, "latency")[LATENCY])
    tried = trials[(trials["batch_size"] == bs) & (trials["backend"] != "eager")]
    return (f"batch size {bs}: only eager has been measured ({e:.3f} ms), "
            "nothing compiled to compare it with yet." if tried.empty else
            f"compiling did not work at batch size {bs}: no compiled config "
            f"finished and matched eager ({left_out_counts(tried)}). Use eager "
            f"({e:.3f} ms).")


def _undecided(top: pd.Series, eager: pd.Series, eager_name: str, confirm: str) -> str:
    """Where the best compiled config and eager, both measured in fresh processes, are
    undecided (:func:`tuner.data.noise.verdict`): a sentence that says so and the ``tuner
    confirm`` that would decide; "" otherwise. The pick stands by its median meanwhile."""
    mine, theirs = p50s_of(top), p50s_of(eager)
    v = verdict(mine, theirs)
    if v.outcome != UNDECIDED or len(mine) < 2 or len(theirs) < 2:
        return ""
    n = v.processes or max(len(mine), len(theirs)) + 3
    each = (f"in {n} processes each, which would decide if their figures hold" if v.processes
            else "in more processes, which may decide")
    return (f"Undecided beyond noise: every process of one was faster, but {len(mine)} and "
            f"{len(theirs)} processes are too few to tell {top[NAME]} and {eager_name} "
            f"apart for sure; `{confirm} --repeats {n - 1}` measures both {each}.")


def _sides(compiled: pd.DataFrame, eager: pd.DataFrame
           ) -> tuple[pd.Series, pd.Series, str, pd.Series] | None:
    """What a batch size's verdict weighs (its comparable compiled and eager rows): the best
    compiled config, the fastest eager of its precision, that eager's name in the sentence,
    and the winner of the two (a compiled config within noise of eager loses to it); the
    compiled config is the winner where that is compiled. None without eager of its precision."""
    if eager.empty:
        return None
    top = best(compiled, "latency")
    # Another precision is another model's accuracy, never the baseline.
    baseline = baseline_of(compiled)[top.name]
    same = pd.Series([key == baseline for key in baseline_of(eager)], index=eager.index)
    if not same.any():
        return None
    fastest_eager = best(eager[same], "latency")
    # Where eager ran in several precisions, the sentence names the one it compares with.
    eager_name = "eager" if same.all() else str(fastest_eager[NAME])
    winner = best(pd.concat([compiled, eager[same]]), "latency")
    if winner["backend"] != "eager":  # the fastest compiled one may be within noise of eager
        top = winner
    return top, fastest_eager, eager_name, winner


def vs_plain(trials: pd.DataFrame, meta: dict[str, Any]) -> dict[int, PlainGain]:
    """Per batch size, the config its verdict is about (the winner; eager where nothing
    compiled counts; the best compiled config where no eager of its precision does) against
    the best plain mode (:func:`tuner.data.plain.gain_over_plain`)."""
    out: dict[int, PlainGain] = {}
    for bs, group in comparable(trials).groupby("batch_size"):
        eager = group[group["backend"] == "eager"]
        compiled = group[group["backend"] != "eager"]
        sides = None if compiled.empty else _sides(compiled, eager)
        pick = (best(eager, "latency") if compiled.empty else
                best(compiled, "latency") if sides is None else sides[3])
        out[int(bs)] = gain_over_plain(pick, trials, meta)
    return out


def verdicts(trials: pd.DataFrame, folder: Path | None = None,
             storage: str | None = None) -> dict[int, str]:
    """Per batch size, one plain sentence: does compiling pay, and after how many calls.
    ``folder`` and ``storage``: the study's, named in the ``tuner confirm`` command a sentence
    suggests (:func:`confirm_command`).

    The rules are the ones ``recommend`` and ``compare`` apply (:mod:`tuner.data.select`): only
    eligible rows count (those the front is chosen from, so a config said to pay is on the
    table), a compiled config within noise of eager is no faster than it, one undecided against
    eager (:func:`tuner.data.noise.verdict`) is said to be, with the ``tuner confirm`` that
    would decide, and eager is that of the compiled config's precision, as its ``vs eager`` is
    (:func:`baseline_of`).
    """
    out: dict[int, str] = {}
    confirm = confirm_command(folder, storage)
    ok = comparable(trials)
    for bs, group in ok.groupby("batch_size"):
        eager = group[group["backend"] == "eager"]
        compiled = group[group["backend"] != "eager"]
        if compiled.empty:  # eager alone: say so, and why no compiled config counts
            out[int(bs)] = _eager_alone(bs, eager, trials)
            continue
        sides = _sides(compiled, eager)
        if sides is None:
            continue
        top, fastest_eager, eager_name, winner = sides
        t, e = float(top[LATENCY]), float(fastest_eager[LATENCY])
        warmup = f"{top['time_to_steady_s']:.1f} s"
        undecided = _undecided(top, fastest_eager, eager_name, confirm)
        if winner["backend"] == "eager" and t < e:
            # More processes sharpen the test: say how many would be the next step.
            done = max(listed(r.get("latency_ms_p50_repeats")) for r in (top, fastest_eager)) - 1
            out[int(bs)] = (f"compiling does not measurably pay at batch size {bs}: the best "
                            f"compiled config, {top[NAME]} ({t:.3f} ms), "
                            f"and {eager_name} ({e:.3f} ms) are within noise of each other "
                            "(their fresh processes' p50s overlap), and it costs "
                            f"{warmup} to warm up; `{confirm} --repeats {max(5, done + 3)}` "
                            "measures both again in more processes, which may tell them "
                            "apart. Use eager.")
        elif winner["backend"] == "eager":
            out[int(bs)] = (f"compiling does not pay at batch size {bs}: {eager_name} ({e:.3f} ms) is "
                            f"faster than the best compiled config, {top[NAME]} "
                            f"({t:.3f} ms), and that one costs {warmup} to "
                            f"warm up. {'Use eager.' if not undecided else undecided}")
        else:
            calls = top["break_even_calls"]
            payback = f"; its {warmup} warm-up pays back after {calls:,.0f} calls" \
                if not pd.isna(calls) else ""
            unconfirmed = pd.isna(top.get("latency_ms_p50_ci_low")) and pd.isna(
                fastest_eager.get("latency_ms_p50_ci_low"))
            caution = (" Both rows are flagged noisy and were measured once each: "
                       f"`{confirm}` measures them again before you rely on this."
                       if unconfirmed and _flag(top.get("noisy"))
                       and _flag(fastest_eager.get("noisy")) else "")
            out[int(bs)] = (f"batch size {bs}: {top[NAME]} is "
                            f"{e / t:.2f}x faster than {eager_name} "
                            f"({t:.3f} vs {e:.3f} ms){payback}.{caution}"
                            + (f" {undecided}" if undecided else ""))
    # Configs that ran eager under a compiled label are named, never counted as compiled.
    done = trials[(trials["status"] == Status.OK.value) & ran_eager_only(trials)]
    for bs, group in done.groupby("batch_size"):
        labels = ", ".join(sorted(set(group[NAME])))
        note = (f"{labels} produced no compiled graph (every call ran eager), so "
                f"{'it is' if len(group) == 1 else 'they are'} not counted as compiled.")
        out[int(bs)] = f"{out[int(bs)]} {note}" if int(bs) in out else f"batch size {bs}: {note}"
    return out
