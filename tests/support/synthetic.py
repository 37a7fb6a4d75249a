"""Synthetic studies for recommend/compare tests: FakeRunner numbers, written as real Parquet.

No Optuna and no processes: each config's result comes from :class:`FakeRunner` (or is edited
afterwards), and the rows go through the same ``results`` code as a real study's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tuner.data import files
from tuner.data.rows import frame, trial_row
from tuner.domain.records import Status, TrialRequest
from tuner.domain.space import TrialConfig
from tuner.domain.workload import Workload
from tuner.fake import FakeRunner

GPU_WORKLOAD = Workload(model="resnet18", device="cuda")
BATCH_SIZES = (1, 8)


def configs(batch_sizes: Iterable[int] = BATCH_SIZES,
            labels: Iterable[str] = ("eager", "inductor:default", "inductor:reduce-overhead",
                                     "inductor:max-autotune", "cudagraphs")) -> list[TrialConfig]:
    out = []
    for bs in batch_sizes:
        for label in labels:
            backend, _, mode = label.partition(":")
            if backend == "eager":
                out.append(TrialConfig("eager", bs))
            else:
                out.append(TrialConfig(backend, bs, mode or None, False))
    return out


def write_study(root: Path, name: str, *, gpu: str = "NVIDIA H200", speed: float = 1.0,
                torch_version: str = "2.11.0", workload: Workload = GPU_WORKLOAD,
                trial_configs: list[TrialConfig] | None = None,
                fail: dict[str, Status] | None = None,
                changes: dict[str, dict[str, Any]] | None = None,
                protocol: dict[str, Any] | None = None,
                columns: dict[str, dict[str, Any]] | None = None,
                storage: str | None = None, meta: dict[str, Any] | None = None) -> Path:
    """Write ``root/name/{trials,pareto}.parquet``; ``storage``: where the files say the study
    lives (as tuner.study.export.storage_label writes it); ``changes`` edits a config's result (by key
    or label) after FakeRunner made it, ``columns`` sets a row's columns (by key or label) as
    the finalists' re-measurements would; ``meta``, more of the files' metadata (a search
    space, say). Returns the study folder."""
    runner = FakeRunner(fail=fail, gpu_name=gpu, speed=speed, torch_version=torch_version)
    rows = []
    for number, config in enumerate(trial_configs or configs()):
        result = runner.run(TrialRequest(config, workload), root)
        edit = (changes or {}).get(config.key) or (changes or {}).get(config.label) or {}
        result = dataclasses.replace(result, **edit)
        row = trial_row(name, number, config, workload, result)
        # Before the derived columns, as an export sets the finalists' (tuner.study.export).
        row.update((columns or {}).get(config.key) or (columns or {}).get(config.label) or {})
        rows.append(row)
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    df = frame(rows)
    files.export(directory, df, {
        "study": name, "workload": workload.to_dict(),
        "protocol": protocol or {"warm_cache": False},
        **({} if storage is None else {"storage": storage}), **(meta or {})})
    return directory


def fingerprint(gpu: str = "NVIDIA H200", torch_version: str = "2.11.0") -> dict[str, Any]:
    """What FakeRunner records, as ``tuner.runtime.fingerprint.collect`` would report it."""
    fp = dict.fromkeys(("device_kind", "gpu_name", "gpu_compute_capability", "gpu_memory_bytes",
                        "driver", "cuda", "torch", "triton", "torchvision", "python", "tuner",
                        "host", "cpu"))
    fp.update(device_kind="cuda", gpu_name=gpu, gpu_compute_capability="9.0", driver="580.0",
              cuda="13.0", torch=torch_version, python="3.12.0", tuner="fake", host="fakehost")
    return fp
