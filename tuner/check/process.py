"""What the check process does, in order: choose the recommendation (``tuner.recommend``), build
the study's model and inputs as its trial did, take eager's output, ``apply`` the
recommendation, time the first call with the cache counters read around it, compare its output
with the study's eager reference, and time calls per request as the study did."""

from __future__ import annotations

import json
import statistics
import warnings
from pathlib import Path
from typing import Any

from tuner.files import write_json_atomic
from tuner.use.check import CheckRecord

WARMUP_CALLS = 10  # CUDA graphs record on the first calls after the compile
MIN_CALLS, MIN_SECONDS, MAX_SECONDS = 30, 1.0, 30.0


def run_request(path: Path) -> None:
    """Read the request, run the check, write the record where it says."""
    request = json.loads(path.read_text())
    record = run(Path(request["study"]), request["options"])
    write_json_atomic(Path(request["out"]), record.to_dict())


def run(study: Path, options: dict[str, Any]) -> CheckRecord:
    import torch

    import tuner
    from tuner.runtime import artifacts
    from tuner.runtime.knobs import apply_global_knobs
    from tuner.trial import build
    from tuner.trial.device import Device

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the parent tells of the machine
        rec = tuner.recommend(study, **options)
    work, dev = rec.workload, Device(rec.workload.device)
    model, inputs = build.build_float32(work, rec.config.batch_size)
    kept, note = _kept_reference(rec, model, inputs)
    apply_global_knobs(work)  # before eager's call, as in the trial
    model, inputs = build.finish(work, model, inputs)
    fields: dict[str, Any] = {"trial_number": rec.trial_number, "label": rec.config.label,
                              "device": work.device, "compiled": rec.config.compiled,
                              "torch": torch.__version__}
    with torch.no_grad():
        eager = _clone(model(*inputs))
        # apply and the first call as production makes them; their warnings kept
        with warnings.catch_warnings(record=True) as caught, artifacts.watched_loads() as loads:
            warnings.simplefilter("always")
            call = _one_step(rec.apply(model), inputs, rec.cuda_graphs)
            before = artifacts.cache_counts()
            fields["first_call_s"] = dev.time_call_s(call)
            after = artifacts.cache_counts()
        fields["warnings"] = [str(w.message) for w in caught
                              if issubclass(w.category, tuner.WarmStartMissed)]
        fields.update(_counts(loads, before, after))
        fields.update(_output_check(_clone(call()), eager, kept, note, work.dtype))
        for _ in range(WARMUP_CALLS):
            call()
        samples, _, _ = dev.time_requests_ms(call, MIN_CALLS, MIN_SECONDS, MAX_SECONDS)
    fields.update(latency_ms_p50=statistics.median(samples), calls=len(samples))
    if rec.config.compiled:
        from tuner.trial.health import compile_health

        health = compile_health()
        fields.update(recompiles=health.recompiles, recompile_reasons=health.recompile_reasons)
    return CheckRecord(**fields)


def _counts(loads: list[Any], before: Any, after: Any) -> dict[str, Any]:
    """What the artifacts loaded, and what the first call found and compiled."""
    found: dict[str, Any] = {}
    if loads and loads[-1].seconds is not None:
        found.update(artifacts_loaded=True, artifacts_entries=loads[-1].entries,
                     artifacts_load_s=loads[-1].seconds)
    if before is not None and after is not None:
        made = after.since(before)
        found.update(counted=True, fxgraph_hits=made.fxgraph_hits,
                     fxgraph_misses=made.fxgraph_misses, aot_hits=made.aot_hits,
                     aot_misses=made.aot_misses)
    return found


def _kept_reference(rec: Any, model: Any, inputs: Any) -> tuple[list[Any] | None, str]:
    """The eager output the study kept for this workload and batch size (its file named as the
    study's trials named it, from the study's fingerprint), if it was made from the very
    weights and inputs built here; else None and why."""
    from tuner.trial.reference import Store

    store = Store(str(rec.path.parent / "references"), rec.workload, rec.config.batch_size,
                  rec.fingerprint)
    kept = store.load(model, inputs)
    if kept is None or kept.float32_outputs is None or rec.workload.dtype != "float32":
        why = store.note or ("the study kept no float32 eager output for it" if rec.workload.dtype
                             == "float32" else f"the study ran {rec.workload.dtype}")
        return None, f"{why}: checked against eager run here on the study's model and inputs"
    return kept.float32_outputs, ""


def _output_check(output: Any, eager: Any, kept: list[Any] | None, note: str,
                  dtype: str) -> dict[str, Any]:
    from tuner.trial import checks

    expected = eager if kept is None else kept
    found = checks.compare_outputs(output, expected, dtype)
    return {"correct": found.correct, "max_abs_error": found.max_abs_error,
            "tolerance": found.tolerance, "reference": "here" if kept is None else "study",
            "reference_note": "; ".join(n for n in (found.note, note) if n)}


def _one_step(fn: Any, inputs: Any, mark_step: bool) -> Any:
    import torch

    def call() -> Any:
        if mark_step:
            torch.compiler.cudagraph_mark_step_begin()
        return fn(*inputs)

    return call


def _clone(output: Any) -> Any:
    from tuner.trial.checks import clone_output

    return clone_output(output, to_cpu=True)
