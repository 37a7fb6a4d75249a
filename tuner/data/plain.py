"""Plain torch.compile: what ``torch.compile(model, mode=M)`` gives with torch's own settings,
and a pick's gain over the best of those modes, the tuner's headline figure beside the gain
over eager.

A row is **plain** (:func:`is_plain`, the one definition) when its config is:

* backend ``inductor`` in one of :data:`PLAIN_MODES` (``default``, ``reduce-overhead``,
  ``max-autotune``);
* static shapes, ``dynamic=False`` (what the search runs first, and the tuner's default);
* no inductor option at a value other than torch's: each option it sets holds the value its
  mode runs without it, as the config's name reads it (:func:`plain_defaults`: torch's values
  as the search recorded them, else as known of torch), and for an option neither knows,
  the first value the study listed (:func:`tuner.data.equivalent.option_defaults`). A plain
  config is one whose name is its mode alone;
* in the workload's precision, memory format and cudnn.benchmark: the config leaves them
  unset or sets the workload's value.

The search measures these first at every batch size (its baselines), so a study has them
unless they failed or were not run (a mode past ``--compile-timeout``).

The gain over plain of a pick (:func:`gain_over_plain`): against the best plain row of its
batch size among the rows that may be recommended (:func:`tuner.data.select.eligible`; the
fastest by :data:`tuner.data.select.LATENCY`), the ratio of their latencies, plain over pick
(above 1, the pick is faster), and whether that is beyond noise by the one rule,
:func:`tuner.data.noise.verdict`, over the p50s of their fresh processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pandas as pd

from tuner.data.equivalent import option_defaults
from tuner.data.noise import FASTER, SAME, SLOWER, WITHIN, p50s_of, verdict
from tuner.data.rows import NAME, basis_of, config_of, num
from tuner.data.select import LATENCY, eligible, rank
from tuner.domain.config import INDUCTOR, TrialConfig

PLAIN_MODES = ("default", "reduce-overhead", "max-autotune")
# What PlainGain.noise says: the pick against the best plain mode.
BEYOND, WITHIN_NOISE, UNDECIDED = "beyond noise", WITHIN, "undecided"
NONE = "no plain mode measured"  # none verified at the pick's batch size
_RAN_WITH = ("dtype", "channels_last", "cudnn_benchmark")


def is_plain(config: TrialConfig, workload: dict[str, Any],
             defaults: Callable[[str | None], dict[str, Any]]) -> bool:
    """Whether ``config`` is a plain mode (see the module's docstring): ``workload`` is the
    study's (its files' ``workload``), ``defaults`` what each option takes per mode where a
    config leaves it unset (:func:`tuner.data.equivalent.option_defaults`)."""
    if (config.backend != INDUCTOR or config.mode not in PLAIN_MODES
            or config.dynamic is not False):
        return False
    if any(getattr(config, k) is not None and getattr(config, k) != workload.get(k)
           for k in _RAN_WITH):
        return False
    unset = defaults(config.mode) if config.options else {}
    return all(name in unset and unset[name] == value for name, value in config.options)


def plain_defaults(meta: dict[str, Any]) -> Callable[[str | None], dict[str, Any]]:
    """What each option is under each mode with torch's settings, for one study (its files'
    metadata): the values its config names are relative to (:func:`tuner.data.rows.basis_of`:
    what its search recorded of torch, else the values known of torch), and for an option
    neither knows, the first value the study listed. So a config is plain exactly where its
    name is its mode alone, even where the study listed a non-default value first."""
    basis, listed = basis_of(meta), option_defaults(meta)
    return lambda mode: {**listed(mode), **(basis.defaults.of_mode(mode) or {})}


def plain_mask(df: pd.DataFrame, meta: dict[str, Any]) -> pd.Series:
    """Per row of one study (its rows and files' metadata), whether it is a plain mode."""
    workload, defaults = dict(meta.get("workload") or {}), plain_defaults(meta)
    return pd.Series([is_plain(config_of(row), workload, defaults) for _, row in df.iterrows()],
                     index=df.index, dtype=bool)


@dataclasses.dataclass(frozen=True)
class PlainGain:
    """A pick against the best plain mode at its batch size. ``speedup_vs_plain``: the plain
    mode's latency over the pick's (:data:`tuner.data.select.LATENCY`), above 1 when the pick
    is faster; ``noise``: :data:`BEYOND`, :data:`WITHIN_NOISE` or :data:`UNDECIDED` by
    :func:`tuner.data.noise.verdict`, :data:`SAME` where the pick is that plain mode, or
    :data:`NONE` where no plain mode was measured; ``processes``: how many fresh processes
    each config was measured in (the pick's, the plain mode's); ``processes_to_decide``:
    where undecided, the processes each would need, if known."""

    batch_size: int
    label: str  # the pick's
    noise: str
    plain_label: str | None = None
    plain_mode: str | None = None
    plain_trial_number: int | None = None
    latency_ms_p50_median: float | None = None
    plain_latency_ms_p50_median: float | None = None
    speedup_vs_plain: float | None = None
    processes: tuple[int, int] = (0, 0)
    processes_to_decide: int | None = None
    # label and plain_label as people read them (tuner.domain.naming)
    name: str = ""
    plain_name: str | None = None

    @property
    def faster(self) -> bool:
        """Whether the pick is faster than the plain mode beyond noise."""
        return self.noise == BEYOND and (self.speedup_vs_plain or 0) > 1

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["processes"] = list(self.processes)
        return data


def gain_over_plain(pick: pd.Series, rows: pd.DataFrame, meta: dict[str, Any]) -> PlainGain:
    """``pick`` (a row of one study) against the best plain mode among ``rows`` (the study's,
    any batch size: those of the pick's that may be recommended count), ``meta`` the study's
    files' metadata."""
    at = eligible(rows[rows["batch_size"] == pick["batch_size"]])
    return gain_against(pick, at[plain_mask(at, meta)] if len(at) else at)


def gain_against(pick: pd.Series, plain: pd.DataFrame) -> PlainGain:
    """``pick`` against the fastest of ``plain``: the eligible plain rows of its batch size."""
    bs = int(pick["batch_size"])
    if plain.empty:
        return PlainGain(bs, str(pick["label"]), NONE,
                         latency_ms_p50_median=num(pick.get(LATENCY)), name=_name(pick))
    top = rank(plain, "latency").iloc[0]
    mine, theirs = p50s_of(pick), p50s_of(top)
    t, p = num(pick.get(LATENCY)), num(top.get(LATENCY))
    if int(top["trial_number"]) == int(pick["trial_number"]):
        noise, to_decide = SAME, None
    else:
        v = verdict(mine, theirs)
        noise = BEYOND if v.outcome in (FASTER, SLOWER) else v.outcome
        to_decide = v.processes
    return PlainGain(
        bs, str(pick["label"]), noise, plain_label=str(top["label"]),
        plain_mode=str(top["mode"]), plain_trial_number=int(top["trial_number"]),
        latency_ms_p50_median=t, plain_latency_ms_p50_median=p,
        speedup_vs_plain=p / t if t and p is not None else None,
        processes=(max(len(mine), 1), max(len(theirs), 1)), processes_to_decide=to_decide,
        name=_name(pick), plain_name=_name(top))


def _name(row: pd.Series) -> str:
    """A row's config as people read it: the readers' column, else its label."""
    return str(row.get(NAME) or row["label"])
