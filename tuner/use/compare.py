"""Studies side by side: the same model measured on different GPUs (or torch versions, or CPU).

Per batch size, each study's best config per objective with its numbers and their ratios to the
first study's, the speedup over each study's own eager baseline, and transfer: does one study's
fastest config stay on another's Pareto front, how much slower than that study's own best is it
there, is it within noise of that best, and which knob values do the two bests share
(:mod:`tuner.use.transfer`). Differences that confound a hardware comparison (torch version, workload, cold vs
warm compile, kind of memory) are named; where the studies' workloads differ in precision or
memory format, each label says which its config ran (``inductor:default bf16``). The same study
given twice, or studies none of which has a verified config, is a :class:`UserError`.

Rows count as :func:`tuner.data.select.eligible` says and the best is
:func:`tuner.data.select.best`'s, as for :func:`tuner.recommend` and ``tuner show``; a best
config's latency, and the fronts', is :data:`tuner.data.select.LATENCY` (a finalist's median
over its processes).
"""

from __future__ import annotations

import dataclasses
import os
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from tuner.data import files
from tuner.data.comparison import Best, Comparison, Point, StudyRef, Transfer
from tuner.data.derive import listed
from tuner.data.equivalent import RAN, Ran, ran_keys
from tuner.data.plain import PlainGain, gain_against, plain_mask
from tuner.data.rows import NAME, basis_of, config_of, num
from tuner.data.select import (
    LATENCY,
    OBJECTIVES,
    TAIL_P99,
    best,
    eligible,
    left_out_counts,
    pareto,
)
from tuner.domain.config import EAGER
from tuner.domain.naming import NameBasis, config_names
from tuner.errors import UserError
from tuner.use.transfer import transfer
from tuner.words import plural

_WORKLOAD_KEYS = ("model", "dtype", "image_size", "channels_last", "cudnn_benchmark", "seed",
                  "shape_schedule")
# The workload's keys a config may set itself (tuner.domain.config.TrialConfig): a label leaves
# them out where the config did not.
_RAN_WITH = ("dtype", "channels_last", "cudnn_benchmark")
SCHEDULE = OBJECTIVES["traffic"].column
IS_PLAIN = "is_plain"  # the column each study's rows get: a plain mode (tuner.data.plain)


def compare(paths: Iterable[str | Path]) -> Comparison:
    """Compare two or more studies (folders or Parquet files); A is the first."""
    paths = _study_paths(paths)
    rans: dict[str, Ran] = {}
    bases: dict[str, NameBasis] = {}  # what each study's config names are relative to
    loaded = [_load(tag, path, rans, bases) for tag, path in zip(string.ascii_uppercase, paths)]
    refs = [ref for ref, _, _ in loaded]
    same = duplicates([(ref, df) for ref, df, _ in loaded])
    if same:  # every ratio would be 1: a mistake, not a comparison
        raise UserError(same[0])
    if not any(ref.verified for ref in refs):
        raise UserError("nothing to compare: no study has a verified config (" + "; ".join(
            f"{ref.tag}: {_none_verified(ref)}" for ref in refs) + ")")
    # A precision or memory format the studies ran with differently, or one study searched
    # several of: named in every label.
    differ = [k for k in _RAN_WITH if len({ref.ran(k) for ref in refs}) > 1
              or any(len(ref.ran_with.get(k) or ()) > 1 for ref in refs)]
    if differ:
        for i, (ref, df, ok) in enumerate(loaded):
            df = _labelled(df, ref.workload, differ)
            loaded[i] = (ref, df, df.loc[ok.index])
    # Every study's configs named against A's workload: "default" is the same run in each.
    apart = [k for k in _RAN_WITH if len({repr(ref.workload.get(k)) for ref in refs}) > 1]
    if apart:
        for i, (ref, df, ok) in enumerate(loaded):
            df = _named_as_a(df, ref.workload, apart, dataclasses.replace(
                bases[ref.tag], **{k: getattr(bases["A"], k) for k in apart}))
            loaded[i] = (ref, df, df.loc[ok.index])

    # Every batch size any study tried: one that failed everywhere is said so, not left out.
    sizes = sorted({int(b) for _, df, _ in loaded for b in df["batch_size"].dropna().unique()})
    bests: list[Best] = []
    transfers: list[Transfer] = []
    fronts: dict[str, dict[int, list[Point]]] = {ref.tag: {} for ref in refs}
    absent: dict[int, list[str]] = {}
    for bs in sizes:
        at = {ref.tag: ok[ok["batch_size"] == bs] for ref, _, ok in loaded}
        tried = {ref.tag: df[df["batch_size"] == bs] for ref, df, _ in loaded}
        front = {tag: pareto(rows) if not rows.empty else rows for tag, rows in at.items()}
        for tag, rows in front.items():
            if not rows.empty:
                fronts[tag][bs] = [Point(str(r["label"]), float(r[LATENCY]),
                                         num(r["peak_memory_bytes"]), str(r[NAME]))
                                   for _, r in rows.iterrows()]
        # A study with no verified config here is not in the table: why, in words.
        absent[bs] = [_absent(bs, ref.tag, tried[ref.tag]) for ref in refs if at[ref.tag].empty]
        for objective in OBJECTIVES:
            first: pd.Series | None = None
            for ref in refs:
                rows = at[ref.tag]
                if rows.empty or not _measured(rows, objective):
                    continue
                row = best(rows, objective)
                if ref.tag == "A":
                    first = row
                bests.append(_best(bs, objective, ref.tag, row, first,
                                   gain_against(row, rows[rows[IS_PLAIN]])))
        for source in refs:
            for target in refs:
                if source.tag != target.tag and not at[source.tag].empty:
                    transfers.append(_named(transfer(bs, source.tag, target.tag, at, tried,
                                                     front, rans), at))
    return Comparison(refs, sizes, bests, transfers, confounders(refs), fronts,
                      {bs: lines for bs, lines in absent.items() if lines})


def _study_paths(paths: Iterable[str | Path]) -> list[str | Path]:
    """``paths`` as a list, refused where it is no list of two studies or more in order."""
    if isinstance(paths, (str, bytes, os.PathLike)):  # a str is a sequence: of its characters
        raise UserError(f"give a list of studies to compare, e.g. compare([{str(paths)!r}, "
                        "'studies/other']), not one path")
    if isinstance(paths, (set, frozenset)):  # the first is A, the reference: a set has no first
        raise UserError("give the studies to compare in order, as a list: the first is the "
                        "reference (A) for every ratio, and a set has no order")
    if not isinstance(paths, Iterable):
        raise UserError(f"give a list of studies to compare, e.g. compare(['studies/a', "
                        f"'studies/b']), not {paths!r}")
    paths = list(paths)  # a generator, a tuple, a pandas Series
    if len(paths) < 2:
        raise UserError("give at least two studies to compare (folders or trials.parquet files)")
    if len(paths) > len(string.ascii_uppercase):
        raise UserError(f"at most {len(string.ascii_uppercase)} studies at once")
    return paths


def _load(tag: str, path: str | Path, rans: dict[str, Ran], bases: dict[str, NameBasis]
          ) -> tuple[StudyRef, pd.DataFrame, pd.DataFrame]:
    """One study, tagged: what the comparison says of it, its rows and its eligible rows;
    how its rows read goes to ``rans`` (:class:`tuner.data.equivalent.Ran`), what its config
    names are relative to to ``bases``."""
    df, meta, file = files.load(path)
    rans[tag], bases[tag] = Ran(meta), basis_of(meta)
    df = df.assign(**{RAN: ran_keys(df, meta), IS_PLAIN: plain_mask(df, meta)})
    ok = eligible(df)
    kinds = ok["memory_kind"].dropna().unique()
    protocol = meta.get("protocol") or {}
    ref = StudyRef(tag=tag, name=str(meta.get("study") or file.parent.name), path=str(file),
                   workload=dict(meta.get("workload") or {}),
                   fingerprints=list(meta.get("fingerprints") or files.fingerprints(df)),
                   warm_cache=protocol.get("warm_cache"),
                   memory_kind=str(kinds[0]) if len(kinds) == 1 else None,
                   measured_again=bool(ok["latency_ms_p50_repeats"].map(
                       lambda v: listed(v) > 1).any()),
                   trials=len(df), verified=len(ok),
                   ran_with=_ran_with(df, dict(meta.get("workload") or {})))
    return ref, df, ok


def duplicates(studies: list[tuple[StudyRef, pd.DataFrame]]) -> list[str]:
    """A study given twice, by the same file or as a copy: every ratio between them is 1 and
    says nothing about the hardware."""
    out = []
    for i, (a, df_a) in enumerate(studies):
        for b, df_b in studies[i + 1:]:
            if Path(a.path).resolve() == Path(b.path).resolve():
                out.append(f"{a.tag} and {b.tag} are the same file ({a.path}): the study would "
                           "be compared with itself; give two different studies")
            elif df_a.equals(df_b):
                out.append(f"{a.tag} and {b.tag} hold the same trials ({a.path}, {b.path}): one "
                           "is a copy of the other; give two different studies")
    return out


def confounders(studies: list[StudyRef]) -> list[str]:
    """Differences other than the hardware that make a comparison unfair, in words."""
    out = []

    def values(get) -> dict[str, Any]:
        return {s.tag: get(s) for s in studies}

    torch = values(lambda s: ", ".join(sorted({str(fp.get("torch")) for fp in s.fingerprints}))
                   or None)
    if len(set(torch.values())) > 1:
        out.append(f"torch differs ({_pairs(torch)}): part of any difference may come from torch, "
                   "not the hardware; compare studies made with the same torch to isolate the GPU")
    for key in _WORKLOAD_KEYS:
        seen = values(lambda s, k=key: s.ran(k) if k in _RAN_WITH else s.workload.get(k))
        if len({repr(v) for v in seen.values()}) > 1:
            out.append(f"workload differs, {key}: {_pairs(seen)}: the studies measured "
                       "different things")
    cache = values(lambda s: None if s.warm_cache is None else ("warm" if s.warm_cache else "cold"))
    if len(set(cache.values()) - {None}) > 1:
        out.append(f"compile times were measured with different caches ({_pairs(cache)})")
    kind = values(lambda s: s.memory_kind)
    if len(set(kind.values()) - {None}) > 1:
        out.append(f"memory is not the same quantity ({_pairs(kind)}): cuda_reserved is device "
                   "memory, host_max_rss the process's resident memory")
    for s in studies:
        if not s.verified:
            out.append(f"study {s.tag} has no verified config: {_none_verified(s)}")
    # Only a study with verified configs has finalists, measured once or again.
    again = {s.tag: s.measured_again for s in studies if s.verified}
    if len(set(again.values())) > 1:
        once = ", ".join(tag for tag, v in again.items() if not v)
        twice = ", ".join(tag for tag, v in again.items() if v)
        out.append(f"the finalists of {once} were measured once each and those of {twice} again "
                   "in fresh processes, whose median stands for them: a ratio between them "
                   f"holds one process's noise on {once}'s side; `tuner confirm` on {once} evens "
                   "this out")
    for s in studies:
        if len(s.fingerprints) > 1:
            out.append(f"study {s.tag} was measured on {len(s.fingerprints)} different machines")
    return out


# -- pieces ------------------------------------------------------------------------------------
def _none_verified(study: StudyRef) -> str:
    return ("it holds no trial yet" if not study.trials else
            f"none of its {plural(study.trials, 'trial')} finished and matched eager")


def _labelled(df: pd.DataFrame, workload: dict[str, Any], keys: list[str]) -> pd.DataFrame:
    """``df`` with each label naming the workload's value of each of ``keys`` its config did not
    set: between a float32 and a bfloat16 study, "inductor:default" names two different runs."""
    def label(row: pd.Series) -> str:
        config = config_of(row)
        unset = {k: workload[k] for k in keys
                 if getattr(config, k) is None and workload.get(k) is not None}
        return dataclasses.replace(config, **unset).label if unset else str(row["label"])

    return df.assign(label=df.apply(label, axis=1)) if len(df) else df


def _named_as_a(df: pd.DataFrame, workload: dict[str, Any], keys: list[str],
                basis: NameBasis) -> pd.DataFrame:
    """``df`` with each config named against ``basis`` (A's workload for each of ``keys``),
    the study's own workload's value standing where a config left one of them unset."""
    configs = []
    for _, row in df.iterrows():
        config = config_of(row)
        configs.append(dataclasses.replace(config, **{
            k: workload[k] for k in keys if getattr(config, k) is None
            and workload.get(k) is not None}))
    return df.assign(**{NAME: config_names(configs, basis)}) if len(df) else df


def _named(t: Transfer, at: dict[str, pd.DataFrame]) -> Transfer:
    """A transfer with its configs' names (:func:`tuner.domain.naming.config_name`)."""
    top = best(at[t.target], "latency") if not at[t.target].empty else None
    return dataclasses.replace(t, name=str(best(at[t.source], "latency")[NAME]),
                               target_best_name=None if top is None else str(top[NAME]))


def _ran_with(df: pd.DataFrame, workload: dict[str, Any]) -> dict[str, list[Any]]:
    """Per key of :data:`_RAN_WITH`, the values the rows of ``df`` ran with, in the order first
    seen: the config's own, else the workload's."""
    seen: dict[str, list[Any]] = {key: [] for key in _RAN_WITH}
    for _, row in df.iterrows():
        config = config_of(row)
        for key, values in seen.items():
            value = getattr(config, key)
            value = workload.get(key) if value is None else value
            if value is not None and value not in values:
                values.append(value)
    return seen


def _absent(bs: int, tag: str, tried: pd.DataFrame) -> str:
    """Why study ``tag`` has no verified config at batch size ``bs``, in a line."""
    if tried.empty:
        return f"{tag} did not measure batch size {bs}"
    return (f"{tag} has no verified config at batch size {bs}: of its "
            f"{plural(len(tried), 'trial')} there, {left_out_counts(tried)}")


def _measured(rows: pd.DataFrame, objective: str) -> bool:
    """Whether any row has the objective's value: a study without a shape schedule has no
    traffic time, and a best row picked from blanks would be a guess."""
    column = OBJECTIVES[objective].column
    return column in rows and pd.to_numeric(rows[column], errors="coerce").notna().any()


def _best(bs: int, objective: str, tag: str, row: pd.Series, first: pd.Series | None,
          vs_plain: PlainGain) -> Best:
    def ratio(column: str) -> float | None:
        if first is None or tag == "A":
            return None
        a, b = num(first.get(column)), num(row.get(column))
        return None if a in (None, 0) or b is None else b / a

    # Eager's first call compiles nothing: no compile time, on either side of a ratio.
    compiled = str(row["backend"]) != EAGER
    compiles = compiled and first is not None and str(first["backend"]) != EAGER
    # Device memory against a process's resident memory is no ratio (the notes say so).
    same_memory = first is not None and first.get("memory_kind") == row.get("memory_kind")
    return Best(
        batch_size=bs, objective=objective, study=tag, label=str(row["label"]),
        name=str(row[NAME]),
        config_key=str(row["config_key"]), trial_number=int(row["trial_number"]),
        latency_ms_p50_median=num(row[LATENCY]), throughput_per_s=num(row["throughput_per_s"]),
        peak_memory_bytes=num(row["peak_memory_bytes"]), compile_s_cold=num(row["compile_s_cold"]),
        time_to_steady_s=num(row["time_to_steady_s"]), speedup_vs_eager=num(row["speedup_vs_eager"]),
        latency_vs_a=ratio(LATENCY), throughput_vs_a=ratio("throughput_per_s"),
        memory_vs_a=ratio("peak_memory_bytes") if same_memory else None,
        compile_vs_a=ratio("compile_s_cold") if compiles else None,
        latency_ms_p99_median=num(row[TAIL_P99]), p99_vs_a=ratio(TAIL_P99),
        schedule_total_s=num(row.get(SCHEDULE)), schedule_vs_a=ratio(SCHEDULE),
        compiled=compiled, vs_plain=vs_plain)


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{tag} {v}" for tag, v in values.items())

