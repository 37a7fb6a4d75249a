"""The recording plan of the knob studies (issue 53): which designs of which models, in which
order, each one GPU command run again until its studies are whole; the "Recording" section of
benchmarks/results/knobs.md, with each unit's status and its exact command."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Container, Mapping
from pathlib import Path

from benchmarks import knob_catalogue as catalogue
from benchmarks import knob_sweep
from benchmarks.knob_catalogue import StudyPlan, TorchSettings
from tuner.domain.config import EAGER, TrialConfig

MODELS = ("resnet50", "vit_b_16", "tuner.examples:text_transformer")
GPU = "h100"  # the lent kind the plan names (nvidia-h100-x1): a study's name holds its GPU
CALL_S = 8.5 * 60 - 30  # a call's usable seconds (scripts/gpu_landscape.sh LIMIT, its start)
# Seconds a trial took on the H100 (resnet50 bf16, studies/h100-resnet50-bf16-extended): eager
# 5-10 s, inductor default or reduce-overhead 16-24 s, with coordinate descent 40-50 s; a search
# process starts in about 12 s. An autotuning config is counted at its 4-minute compile budget.
EAGER_S, INDUCTOR_S, DESCENT_S, SLOW_S, START_S = 8.0, 20.0, 45.0, 270.0, 12.0
# A re-measurement of a sweep's base (its noise floor): a fresh process, a warm compile, 1 s of
# calls; the H100 start-from study of 2026-12-07 made ten of resnet50's in about 90 s.
REMEASURE_S = 12.0


@dataclasses.dataclass(frozen=True)
class Unit:
    """One design of one model at some batch sizes: one command, run until it is whole."""

    design: str  # grid, sweep or screen
    model: str
    batch_sizes: tuple[int, ...]
    arms: str = "cheap"  # a screen's

    @property
    def name(self) -> str:
        return catalogue.default_name(self.model, self.batch_sizes, GPU)

    @property
    def folder(self) -> str:
        return f"{FOLDERS[self.design]}/{self.name}"

    def env(self) -> str:
        arms = f" ARMS={self.arms}" if self.design == "screen" and self.arms != "cheap" else ""
        return (f"MODEL={self.model} BATCH_SIZES={','.join(map(str, self.batch_sizes))} "
                f"DESIGN={self.design}{arms}")

    def plans(self, settings: TorchSettings) -> list[StudyPlan]:
        if self.design == "screen":
            return catalogue.screen(self.model, self.batch_sizes, self.name, settings,
                                    self.arms)[0]
        make = catalogue.grid if self.design == "grid" else knob_sweep.sweep
        return make(self.model, self.batch_sizes, self.name, settings)[0]

    def what(self) -> str:
        sizes = ("batch sizes " if len(self.batch_sizes) > 1 else "batch size ") + \
            " and ".join(map(str, self.batch_sizes))
        short = self.model.rsplit(":", 1)[-1]
        if self.design != "screen":
            return f"{short} {self.design}, {sizes}"
        return f"{short} screen, {self.arms} arms, {sizes}"


FOLDERS = {"grid": "landscapes", "sweep": "sweeps", "screen": "screens"}  # under benchmarks/
PLAN: tuple[Unit, ...] = (
    *(Unit("sweep", m, (1, 16)) for m in MODELS),
    *(Unit("grid", m, (bs,)) for m in MODELS for bs in (16, 1)),
    *(Unit("screen", m, (16,), "slow") for m in MODELS),
    *(Unit("screen", m, (1,), "slow") for m in MODELS),
)


def trial_s(config: TrialConfig) -> float:
    """A trial's estimated seconds (the constants above)."""
    if config.backend == EAGER:
        return EAGER_S
    options = config.option_dict
    if options.get("max_autotune_gemm") or str(config.mode).startswith("max-autotune"):
        return SLOW_S
    return DESCENT_S if options.get("coordinate_descent_tuning") else INDUCTOR_S


def estimate_calls(plans: list[StudyPlan]) -> int:
    seconds = sum(START_S + sum(trial_s(c) for c in p.configs()) for p in plans)
    floors = sum(len(knob_sweep.base_keys(p.space)) for p in plans if p.queue)
    seconds += floors * (knob_sweep.NOISE_PROCESSES - 1) * REMEASURE_S
    return max(1, math.ceil(seconds / CALL_S))


def status(unit: Unit, plans: list[StudyPlan], root: Path,
           left: Mapping[str, tuple[int, int]], floor_left: Container[str] = ()) -> str:
    """How far the unit is: the configs the repository holds of those its studies hold in
    their spaces, or, for those not started, of those it plans (without the candidates its
    design.json says the recording torch lacked); a sweep in ``floor_left`` (folders under
    benchmarks/) still has its bases' noise floor to measure."""
    design = root / unit.folder / catalogue.DESIGN_FILE
    said = json.loads(design.read_text()).get("left_out", []) if design.is_file() else []
    skipped = {line.split(":")[0].removeprefix("skipped ") for line in said}
    if unit.design != "screen":  # one study, in the unit's folder
        done, total = left.get(unit.folder, (0, sum(len(p.keys()) for p in plans)))
        plans = []
    else:
        done = total = 0
    for plan in plans:
        if plan.candidate in skipped:
            continue
        got, planned = left.get(f"{unit.folder}/{plan.name}", (0, len(plan.keys())))
        done, total = done + got, total + planned
    if done == 0:
        return "not started"
    if done >= total and unit.design == "sweep" and unit.folder in floor_left:
        return "every config; the bases' noise floor left"
    return "whole" if done >= total else f"{done} of {total} configs"


def recording(root: Path, left: Mapping[str, tuple[int, int]],
              settings: TorchSettings | None = None, floor_left: Container[str] = ()
              ) -> list[str]:
    """The page's "Recording" section: the plan, each unit's status and command."""
    settings = settings or TorchSettings.installed()
    lines = [
        "## Recording", "",
        "What is still to record, in order: each row is one command for the GPU machine, run "
        "again (it resumes) until its status is whole; one call gets up to 8.5 minutes of work. "
        f"The estimates count the {GPU.upper()} trial times of resnet50 bf16 ({EAGER_S:g} s "
        f"eager, {INDUCTOR_S:g} s inductor, {DESCENT_S:g} s with coordinate descent, "
        f"{SLOW_S:g} s for an autotuning config at its 4-minute compile budget).", "",
        "Once, here: `make gpu-wheels` (optuna's wheels in `.whl/`, which the GPU machine "
        "installs). Each call, from a session (the same kind every time: a study's name holds "
        "its GPU):", "",
        "```",
        'run(command="MODEL=... BATCH_SIZES=... DESIGN=... bash scripts/gpu_landscape.sh",',
        '    carry=[".whl"], kind="nvidia-h100-x1")',
        "```", "",
        "or, the same command every time, `DESIGN=plan bash scripts/gpu_landscape.sh`: the "
        "units below in their order: a call that makes one whole goes on with the next (on an "
        "H200 it records the same units, named `...-h200`).", "",
        "Then, at the repository root here: `tar -xzf FILES_AT/knobs.tgz` (FILES_AT: the "
        "reply's `files_at`), `.venv/bin/python benchmarks/knobs.py`, and commit "
        "`benchmarks/landscapes`, `benchmarks/sweeps`, `benchmarks/screens` and this page. The archive holds only "
        "`study.db`, the Parquet files and `design.json`; once a grid is whole it also holds "
        "`benchmarks/landscapes/NAME.parquet`: then run `.venv/bin/python "
        "benchmarks/search_quality.py` too. The searches' output is `knobs.log` beside it.", "",
        "| # | unit | the command of each call | studies | configs | calls, estimated | "
        "status |",
        "|---:|---|---|---:|---:|---:|---|"]
    calls = []
    for number, unit in enumerate(PLAN, 1):
        plans = unit.plans(settings)
        configs = sum(len(p.keys()) for p in plans)
        calls.append(estimate_calls(plans))
        lines.append(f"| {number} | {unit.what()} | `{unit.env()} bash scripts/gpu_landscape.sh` "
                     f"| {len(plans)} | {configs} | {calls[-1]} | "
                     f"{status(unit, plans, root, left, floor_left)} |")
    optional = len(MODELS)  # the slow arms at batch size 1, the last rows
    lines += [
        "", f"In all about {sum(calls)} calls; the last {optional} rows (the slow arms at batch "
        f"size 1, where the models are launch-bound and CUDA graphs decide) are optional: "
        f"{sum(calls[:-optional])} calls without them.", "",
        "Sweeps first: every cheap candidate's effect on each model, one knob at a time on "
        "reduce-overhead, in one study per model that measures eager once per batch size and "
        "the base in three processes, its noise floor (on the H100 plain reduce-overhead's p50 "
        "spread 24 % over three processes at resnet50 batch size 1, 5 % at 16: a knob measured "
        "once must fall outside the base's processes to count; a screen of the same candidates "
        "measures eager and the base again in each arm, two of every three configs). Then "
        "the grids, five cheap knobs each "
        "(`knob_catalogue.GRID_KNOBS`; `KNOBS=a,b,c,d,e` picks others, e.g. the five that "
        "moved most in the sweeps, before a grid's first call), for search_quality.py and "
        "the gains. The slow arms last, as screens (each arm's base measured again: the "
        "noise above): the GEMM search, persistent TMA matmul and plain "
        "max-autotune compile for minutes (a 4-minute budget each; one past it is a "
        "`compile_timeout` row, its effect \"compile > 4 min\"). Not in the plan yet: `compile_scope` "
        "(regional compile, `tuner search --compile-scope whole,regional`), for the transformer "
        "models, and the H200 (`kind=\"nvidia-h200\"`: "
        "the same commands make `...-h200` studies)."]
    return lines
