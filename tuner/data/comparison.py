"""The records of a comparison of studies (:func:`tuner.use.compare.compare` makes them)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.data.json_contract import document
from tuner.data.plain import PlainGain


@dataclasses.dataclass(frozen=True)
class StudyRef:
    tag: str  # A, B, C ... in the order given; ratios are against A
    name: str
    path: str
    workload: dict[str, Any]
    fingerprints: list[dict[str, Any]]
    warm_cache: bool | None
    memory_kind: str | None
    # whether any of its finalists was measured again in fresh processes (tuner confirm)
    measured_again: bool = False
    trials: int = 0  # rows in its trials file
    verified: int = 0  # of them, those that finished and matched eager (eligible)
    # precision, memory format, cudnn.benchmark: the values its rows ran with, in order (a
    # study that searched several has them all; its workload holds only the first)
    ran_with: dict[str, list[Any]] = dataclasses.field(default_factory=dict)

    def ran(self, key: str) -> str | None:
        """What the study's rows ran with for ``key``, as text (``float32,bfloat16``), else
        its workload's value."""
        values = self.ran_with.get(key)
        if values:
            return ",".join(str(v) for v in values)
        value = self.workload.get(key)
        return None if value is None else str(value)


@dataclasses.dataclass(frozen=True)
class Best:
    """One study's best config for one objective at one batch size; ``*_vs_a`` = this / A's."""

    batch_size: int
    objective: str
    study: str  # tag
    label: str
    config_key: str
    trial_number: int
    # tuner.data.select.LATENCY, named as in show --json and trials.parquet: a finalist's median
    # p50 over its processes, any other row's own p50
    latency_ms_p50_median: float | None
    throughput_per_s: float | None
    peak_memory_bytes: float | None
    compile_s_cold: float | None
    time_to_steady_s: float | None
    speedup_vs_eager: float | None
    latency_vs_a: float | None = None
    throughput_vs_a: float | None = None
    memory_vs_a: float | None = None  # None where A's memory is another kind (memory_kind)
    compile_vs_a: float | None = None  # None where either config is eager: it compiles nothing
    # the tail per request, tuner.data.select.TAIL_P99 (a finalist's median over processes)
    latency_ms_p99_median: float | None = None
    p99_vs_a: float | None = None
    # the whole shape schedule, recompiles included (the traffic objective); None without one
    schedule_total_s: float | None = None
    schedule_vs_a: float | None = None
    compiled: bool = True  # False for eager, whose first call compiles nothing
    # against the best plain mode of the same study and batch size (tuner.data.plain)
    vs_plain: PlainGain | None = None
    name: str = ""  # the config as people read it (tuner.domain.naming); label: the files'


@dataclasses.dataclass(frozen=True)
class Transfer:
    """The fastest config of ``source``, looked up in ``target`` at the same batch size."""

    batch_size: int
    source: str
    target: str
    label: str
    config_key: str
    # on_front | off_front | failed | not_run (the search skipped it there) | not_measured
    outcome: str
    detail: str  # failed: why (its status, or what an ok row lacks); not_run: why not
    target_latency_ms: float | None  # tuner.data.select.LATENCY, as latency_ms_p50_median
    target_best_label: str | None
    target_best_latency_ms: float | None
    # target_latency / target best; 1.0 = it is the best; below 1, a lower median than the
    # best, which is noise-aware (tuner.data.select.best): not faster than eager beyond noise
    slowdown_vs_target_best: float | None
    target_measured_batch_size: bool = True  # False: the target ran no trial at this batch size
    # This config against the target's best, on the target, by the one rule of "within noise"
    # (tuner.data.noise.verdict, over the p50 of each process each ran in there): "within
    # noise", "slower", "faster" or "undecided"; "same config" where it is the target's best;
    # None where the target has no verified row of it (outcome not on_front / off_front).
    verdict: str | None = None
    verdict_processes: int | None = None  # undecided: the processes each would need, if known
    # The processes this config and the target's best ran in there (the verdict's p50s)
    processes_there: int | None = None
    best_processes: int | None = None
    # The knob values this config and the target's best share (knob -> value), and those they
    # differ in (knob -> {study tag: value}); an option a config leaves unset has the value its
    # mode runs without it (None where unknown, and mode and dynamic of eager).
    knobs_shared: dict[str, Any] = dataclasses.field(default_factory=dict)
    knobs_differ: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    name: str = ""  # label and target_best_label as people read them (tuner.domain.naming)
    target_best_name: str | None = None


@dataclasses.dataclass(frozen=True)
class Point:
    label: str
    latency_ms_p50_median: float  # tuner.data.select.LATENCY, as the front is chosen
    peak_memory_bytes: float | None
    name: str = ""  # the config as people read it (tuner.domain.naming)


@dataclasses.dataclass(frozen=True)
class Comparison:
    studies: list[StudyRef]
    batch_sizes: list[int]
    best: list[Best]
    transfers: list[Transfer]
    confounders: list[str]
    fronts: dict[str, dict[int, list[Point]]]  # tag -> batch size -> Pareto points
    # batch size -> why each study without a verified config there is not in its table
    absent: dict[int, list[str]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON data under the contract (:mod:`tuner.data.json_contract`): per batch size as
        lists, ``study`` a study's name (``tag`` its letter)."""
        names = {s.tag: s.name for s in self.studies}
        data = dataclasses.asdict(self)
        data["best"] = [{**b, "study": names[b["study"]], "tag": b["study"]}
                        for b in data["best"]]
        data["fronts"] = [{"study": names[tag], "tag": tag, "batch_size": bs,
                           "points": [dataclasses.asdict(p) for p in points]}
                          for tag, by_bs in self.fronts.items()
                          for bs, points in sorted(by_bs.items())]
        data["absent"] = [{"batch_size": bs, "text": line}
                          for bs, lines in sorted(self.absent.items()) for line in lines]
        return document(data)
