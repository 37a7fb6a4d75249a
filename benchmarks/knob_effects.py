"""A knob's effect in a recorded study: the ratio of a config with the knob to the same config
without it (the knob at torch's value), for the report of benchmarks/knobs.py. A :class:`Study`
is one grid (``benchmarks/landscapes/NAME/``), one arm of a screen
(``benchmarks/screens/NAME/ARM/``) or one sweep (``benchmarks/sweeps/NAME/``), read with torch's
settings where it was recorded. In a sweep, each config is the base with one candidate set (its
held options too, one of them perhaps at a value other than torch's), so each is read against
the base at its batch size (:func:`sweep_effects`): the median of the base's processes where it
was measured in several (its noise floor), and a config whose p50 lies among theirs is within
noise."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import pandas as pd

from benchmarks import knob_catalogue as catalogue
from benchmarks import knob_sweep
from benchmarks.knob_catalogue import CATALOGUE, TorchSettings
from tuner.data import files
from tuner.data.derive import listed
from tuner.data.plain import plain_mask
from tuner.data.rows import config_of, num, plain
from tuner.data.select import eligible
from tuner.domain.config import INDUCTOR, OptionValue, TrialConfig
from tuner.domain.records import NOT_RUN
from tuner.domain.space import SearchSpace
from tuner.errors import UserError


@dataclasses.dataclass(frozen=True)
class Study:
    """One recorded study: a grid (a landscape), one arm of a screen, or a sweep."""

    kind: str  # "grid", "screen" or "sweep"
    name: str  # the landscape's or sweep's name, or SCREEN/ARM
    trials: pd.DataFrame
    space: SearchSpace
    settings: TorchSettings
    recorded_settings: bool  # torch's settings from the study's design.json (else this torch's)
    arm: str | None  # a screen arm's candidate
    model: str
    dtype: str
    gpu: str
    # A sweep's configs (its design.json's), of those of its space; None: every one
    planned: frozenset[str] | None = None
    # Its rows' configs that are plain modes, by the tuner's one rule (tuner.data.plain)
    plain_keys: frozenset[str] = frozenset()

    def is_plain(self, config: TrialConfig) -> bool:
        """Whether ``config``, one of its rows', is inductor in a mode as
        ``torch.compile(mode=...)`` gives it (:func:`tuner.data.plain.is_plain`)."""
        return config.key in self.plain_keys

    def keys(self) -> set[str]:
        """The configs it measures: those planned, else every config of its space."""
        return set(self.planned) if self.planned is not None else \
            {c.key for c in self.space.configs()}

    @property
    def whole(self) -> bool:
        """Whether every config it measures has a row, and a sweep its noise floor."""
        return self.keys() <= set(self.trials["config_key"]) and not self.floor_left

    @property
    def floor_left(self) -> bool:
        """A sweep's: whether a base that finished ok lacks its processes
        (:data:`knob_sweep.NOISE_PROCESSES`, measured after the sweep's configs)."""
        if self.kind != "sweep":
            return False
        ok = eligible(self.trials)
        return any(listed(row.get("latency_ms_p50_repeats")) < knob_sweep.NOISE_PROCESSES
                   for _, row in ok[ok["config_key"].isin(self.keys())].iterrows()
                   if self.is_plain(config_of(row)))


@dataclasses.dataclass(frozen=True)
class Effect:
    """One ratio: a config with a knob against the same config without it."""

    candidate: str  # the catalogue's name, or KNOB=VALUE outside it
    model: str
    gpu: str
    batch_size: int
    kind: str  # "grid", "screen" or "sweep"
    p50_ratio: float | None  # None where the config with the knob failed
    compile_ratio: float | None
    failed: str | None = None  # its status where it failed
    # A sweep's: whether the config's p50 lies within its base's, measured in several processes
    # (the noise floor, :func:`sweep_effects`); None where the base was measured once
    within_noise: bool | None = None


def load_studies(root: Path, here: TorchSettings) -> list[Study]:
    """The grids, sweeps and screens under ``root`` (the benchmarks folder), in that order."""
    found = [(kind, path, path.parent.name, path.parent / catalogue.DESIGN_FILE)
             for kind, folder in (("grid", "landscapes"), ("sweep", "sweeps"))
             for path in sorted((root / folder).glob("*/trials.parquet"))]
    found += [("screen", path, f"{path.parent.parent.name}/{path.parent.name}",
               path.parent.parent / catalogue.DESIGN_FILE)
              for path in sorted((root / "screens").glob("*/*/trials.parquet"))]
    studies = []
    for kind, path, name, design_file in found:
        df, meta, _ = files.load(path)
        if "space" not in meta or "workload" not in meta:
            raise UserError(f"{path}: no search space or workload in its metadata")
        design = json.loads(design_file.read_text()) if design_file.is_file() else {}
        recorded = "settings" in design
        arm = (design.get("studies") or {}).get(path.parent.name) if kind == "screen" else None
        planned = (design.get("planned") or {}).get(path.parent.name)
        gpus = df["fp_gpu_name"].dropna() if "fp_gpu_name" in df else pd.Series(dtype=object)
        studies.append(Study(
            kind, name, df, SearchSpace.from_dict(meta["space"]),
            TorchSettings.from_dict(design["settings"]) if recorded else here, recorded, arm,
            str(meta["workload"]["model"]), str(meta["workload"].get("dtype")),
            catalogue.gpu_short(str(gpus.iloc[0]) if len(gpus) else None),
            None if planned is None else frozenset(planned),
            frozenset(df.loc[plain_mask(df, meta), "config_key"])))
    return studies


def varied(space: SearchSpace) -> list[str]:
    """The knobs a study measures both ways: its options with several values, and
    channels_last and dynamic where it searched them."""
    knobs = [name for name, values in space.options if len(values) > 1]
    knobs += ["channels_last"] if len(space.channels_last) > 1 else []
    return knobs + (["dynamic"] if len(space.dynamic) > 1 else [])


def knob_value(config: TrialConfig, knob: str) -> OptionValue:
    if knob in catalogue.FORMAT_KNOBS:
        return bool(getattr(config, knob))  # None (not searched) is the static, contiguous one
    return config.option_dict.get(knob)


def with_value(config: TrialConfig, knob: str, value: OptionValue) -> TrialConfig:
    if knob == "channels_last":
        return dataclasses.replace(config, channels_last=bool(value))
    if knob == "dynamic":
        return dataclasses.replace(config, dynamic=None if value is None else bool(value))
    return dataclasses.replace(config, options=tuple({**config.option_dict, knob: value}.items()))


def candidate_of(study: Study, config: TrialConfig, knob: str, value: OptionValue) -> str:
    """The catalogue's candidate a knob's value stands for: a screen arm's own; in a grid, the
    one setting that value whose held options the config has too; else KNOB=VALUE."""
    if study.arm is not None:
        return study.arm
    held = set(config.options)
    for candidate in CATALOGUE:
        if (candidate.knob, candidate.value) == (knob, value) and set(candidate.fixed) <= held \
                and not candidate.slow:
            return candidate.name
    return f"{knob}={value}"


def effects(study: Study) -> list[Effect]:
    """Every ratio the study holds (see the module's docstring)."""
    if study.kind == "sweep":
        return sweep_effects(study)
    rows = {config_of(row).key: row for _, row in study.trials.iterrows()}
    ok = set(eligible(study.trials)["config_key"])
    out = []
    for row in rows.values():
        config = config_of(row)
        if config.backend != INDUCTOR:
            continue
        for knob in varied(study.space):
            value = knob_value(config, knob)
            torch_value = study.settings.value(knob, config.mode)
            partner = with_value(config, knob, torch_value)
            if value == torch_value or partner.key not in rows:
                continue
            out.append(_effect(study, candidate_of(study, config, knob, value), row,
                               rows[partner.key], ok))
    return out


def sweep_effects(study: Study) -> list[Effect]:
    """A sweep's ratios: each of its inductor configs against the base (its mode with torch's
    settings) at its batch size, named by the candidate its differences stand for."""
    planned = study.keys()  # not the union's not-run rows where the model failed in eager
    rows = [row for _, row in study.trials.iterrows() if row["config_key"] in planned]
    bases = {int(row["batch_size"]): row for row in rows
             if study.is_plain(config_of(row))}
    ok = set(eligible(study.trials)["config_key"])
    out = []
    for row in rows:
        config = config_of(row)
        base = bases.get(config.batch_size)
        if config.backend != INDUCTOR or base is None or base is row:
            continue
        out.append(_noise_floor(
            _effect(study, sweep_candidate(config, config_of(base)), row, base, ok), row, base))
    return out


def _noise_floor(effect: Effect, row: pd.Series, base: pd.Series) -> Effect:
    """A sweep's effect against its base measured in several processes: the ratio to their
    median p50, within noise where the config's one p50 lies between their fastest and their
    slowest."""
    p50s = [float(v) for v in base.get("latency_ms_p50_repeats")
            if pd.notna(v)] if listed(base.get("latency_ms_p50_repeats")) else []
    mine = num(row.get("latency_ms_p50"))
    if len(p50s) < 2 or effect.p50_ratio is None or mine is None:
        return effect
    return dataclasses.replace(effect, p50_ratio=mine / statistics.median(p50s),
                               within_noise=min(p50s) <= mine <= max(p50s))


def sweep_candidate(config: TrialConfig, base: TrialConfig) -> str:
    """The catalogue's candidate a sweep's config stands for: one whose knob it sets and whose
    held options it holds, differing from ``base`` in nothing else; else what differs,
    KNOB=VALUE each."""
    names = set(config.option_dict) | set(base.option_dict) | set(catalogue.FORMAT_KNOBS)
    differ = {k: knob_value(config, k) for k in sorted(names)
              if knob_value(config, k) != knob_value(base, k)}
    for candidate in CATALOGUE:
        wanted = {candidate.knob: candidate.value, **dict(candidate.fixed)}
        if differ.get(candidate.knob, object()) == candidate.value and set(differ) <= set(wanted) \
                and all(knob_value(config, k) == v for k, v in wanted.items()):
            return candidate.name
    return ", ".join(f"{k}={v}" for k, v in differ.items()) or "the base again"


def _effect(study: Study, candidate: str, row: pd.Series, base: pd.Series,
            ok: set[str]) -> Effect:
    """One ratio of ``row`` to ``base``, or the status of the one that failed."""
    key, base_key = str(row["config_key"]), str(base["config_key"])
    good = key in ok and base_key in ok
    failed = None if good else _status(row) if key not in ok else f"its base: {_status(base)}"
    return Effect(candidate, study.model, study.gpu, int(row["batch_size"]), study.kind,
                  _ratio(row, base, "latency_ms_p50") if good else None,
                  _ratio(row, base, "compile_s_cold") if good else None, failed)


def _ratio(row: pd.Series, base: pd.Series, column: str) -> float | None:
    mine, theirs = num(row.get(column)), num(base.get(column))
    return mine / theirs if mine is not None and theirs else None


def _status(row: pd.Series) -> str:
    """Why a row is not eligible, in short: its status (not run: skipped after another
    config's compile ran past the budget), or a wrong result."""
    status = str(plain(row.get("status")) or "?")
    if str(plain(row.get("message")) or "").startswith(NOT_RUN):
        return f"{status}, not run"
    return "wrong result" if status == "ok" else status
