"""What the fronts of ``tuner show`` do not show, in a sentence each: a batch size with no row
on its front and why, and the config that serves the most items per second where it is off the
front."""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from tuner.data.rows import NAME
from tuner.data.select import LATENCY, left_out_counts, throughput_picks_off_front
from tuner.domain.records import Status


def unranked(trials: pd.DataFrame, pareto: pd.DataFrame) -> dict[int, str]:
    """Per batch size with trials but no row on a front, one sentence on why: how many trials
    are left out for each reason and, where they finished but could not be checked, what the
    check said (an eager output of NaN alone, say), so that a report never ends without a
    word on a batch size it measured."""
    out: dict[int, str] = {}
    ranked = set(pareto["batch_size"]) if "batch_size" in pareto else set()
    for bs, group in trials.groupby("batch_size"):
        if bs in ranked:
            continue
        sentence = (f"batch size {bs}: no config to rank or recommend: none finished, matched "
                    f"eager and measured a latency ({left_out_counts(group)})")
        unchecked = group[(group["status"] == Status.OK.value) & group["correct"].isna()]
        said = [str(n) for n in dict.fromkeys(unchecked.get("correctness_note", pd.Series()))
                if isinstance(n, str) and n]
        if said:
            sentence += (f". {len(unchecked)} could not be checked against eager: "
                         f"{'; '.join(said)}")
        out[int(bs)] = sentence + ". `tuner show --all` lists every trial."
    return out


def throughput_off_front(trials: pd.DataFrame, pareto: pd.DataFrame,
                         folder: Path | None = None) -> dict[int, str]:
    """Per batch size where the config ``tuner recommend --objective throughput`` chooses (the
    most items per second back to back) is not on the front, which ranks what one request waits:
    one sentence naming it, so that a recommendation never names a config show did not list."""
    out: dict[int, str] = {}
    study = "STUDY" if folder is None else shlex.quote(str(folder))
    for _, top in throughput_picks_off_front(trials, pareto).iterrows():
        bs = int(top["batch_size"])
        out[bs] = (f"batch size {bs}: the most items/s back to back is {top[NAME]} "
                   f"(trial {int(top['trial_number'])}, {top['throughput_per_s']:,.0f} "
                   f"items/s, {top[LATENCY]:.3f} ms p50 per request): it is not on this front, "
                   "which ranks what one request waits, but it is what a server busy "
                   f"with calls back to back wants (`tuner recommend {study} "
                   f"--batch-size {bs} --objective throughput`).")
    return out

