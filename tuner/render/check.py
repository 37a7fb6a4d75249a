"""``tuner check`` for people and scripts: one line each for where the artifacts came from,
the warm start, why it missed, the output and the latency, then the verdict; or the same as
JSON."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any, Protocol

from tuner.render.text import describe_fingerprint
from tuner.words import plural


class Check(Protocol):
    """What is rendered of a check (:class:`tuner.use.check.Check`), which sits above this
    package: the recommendation, the fresh process's record (None where it wrote none), and
    the verdict."""

    @property
    def rec(self) -> Any: ...

    @property
    def record(self) -> Any: ...

    @property
    def warm_started(self) -> bool: ...

    @property
    def matches(self) -> bool: ...

    @property
    def passed(self) -> bool: ...

    def reasons(self) -> list[str]: ...

CODE_WARNING = ("compile artifacts are code: loading them unpickles torch's cached graphs and "
                "the first call runs the Python inductor generated; warm-start only from studies "
                "you trust")


def lines(check: Check) -> list[str]:
    rec, r = check.rec, check.record
    out = [f"study {rec.study}: trial {rec.trial_number} {rec.name} at batch size "
           f"{rec.config.batch_size} on {rec.workload.device}"]
    if rec.config.compiled:
        out.append(f"artifacts: {provenance(check)}; {CODE_WARNING}")
    if r is not None:
        out.append(f"warm start: {_warm_start(check)}")
    out += [f"missed: {reason}" for reason in check.reasons()]
    if r is not None:
        out.append(f"output: {_output(check)}")
        out.append(f"latency: {_latency(check)}")
    problems = [problem for problem, bad in (("no warm start", not check.warm_started),
                                             ("output not as the study's", not check.matches))
                if bad]
    out.append("verdict: " + ("FAILED: " + " and ".join(problems) if problems
                              else "warm start and output as the study's"))
    return out


def provenance(check: Check) -> str:
    """Where the study's artifacts of this config came from: the machine, torch, the file's
    date."""
    rec = check.rec
    path = rec.artifacts_path
    if path is None:
        return "none saved for this config"
    written = _written(path)
    return (f"{path} from {describe_fingerprint(rec.fingerprint)}, saved by torch "
            f"{rec.row.get('artifacts_torch') or rec.fingerprint.get('torch')}"
            + (f", written {written}" if written else ", missing"))


def _written(path: Path) -> str:
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    except OSError:
        return ""


def _warm_start(check: Check) -> str:
    r = check.record
    assert r is not None
    if not r.compiled:
        return "none needed: the recommended config is eager (nothing compiles)"
    said = "yes" if check.warm_started else "no"
    loaded = ("loaded " + ", ".join(f"{n} {kind} {'entry' if n == 1 else 'entries'}"
                                    for kind, n in sorted(r.artifacts_entries.items()))
              + f" in {r.artifacts_load_s:.2f} s" if r.artifacts_loaded else "nothing loaded")
    counted = (f"first call: {plural(r.fxgraph_hits, 'graph')} from the cache, "
               f"{plural(r.fxgraph_misses, 'graph')} compiled" if r.counted
               else "cache lookups not counted by this torch")
    study = ", ".join(f"{name} {_s(rec_value)}" for name, rec_value in (
        ("cold", check.rec.row.get("compile_s_cold")), ("warm", check.rec.row.get("compile_s_warm")),
        ("from artifacts", check.rec.row.get("compile_s_artifacts"))) if _number(rec_value))
    return (f"{said}: {loaded}; {counted}, in {_s(r.first_call_s)}"
            + (f" (the study's first call: {study})" if study else ""))


def _output(check: Check) -> str:
    r = check.record
    assert r is not None
    against = ("the study's eager output" if r.reference == "study"
               else "eager, run here on the study's model and inputs")
    said = {True: "matches", False: "DIFFERS from", None: "not checked against"}[r.correct]
    # the tolerance is relative: to each value and to the output's largest (tuner.trial.checks)
    error = (f" (max abs error {r.max_abs_error:.3g}, tolerance {r.tolerance:g} of the "
             "output's scale)"
             if r.max_abs_error is not None and r.tolerance is not None else "")
    return f"{said} {against}{error}" + (f"; {r.reference_note}" if r.reference_note else "")


def _latency(check: Check) -> str:
    r = check.record
    assert r is not None
    if r.latency_ms_p50 is None:
        return "not measured"
    study = check.rec.measured.latency_ms_p50_median or check.rec.measured.latency_ms_p50
    versus = (f" (study {study:.3f} ms, {100 * (r.latency_ms_p50 / study - 1):+.1f} %"
              f"{_spread(check.rec.row.get('latency_ms_p50_repeats'), r.latency_ms_p50)})"
              if _number(study) and study > 0 else "")
    return f"p50 {r.latency_ms_p50:.3f} ms per request{versus}, over {plural(r.calls, 'call')}"


def _spread(repeats: Any, p50: float) -> str:
    """The study's processes where it measured the config in several: their range, and whether
    this one p50 lies within it (a difference within it is the machine's noise)."""
    values = [float(v) for v in repeats] if hasattr(repeats, "__len__") and \
        not isinstance(repeats, str) else []
    values = [v for v in values if math.isfinite(v)]
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    where = "within them" if low <= p50 <= high else "outside them"
    return f"; its {len(values)} processes {low:.3f}-{high:.3f} ms, this one {where}"


def as_json(check: Check) -> dict[str, Any]:
    """The check under the JSON contract (:mod:`tuner.data.json_contract`)."""
    from tuner.data.json_contract import document

    rec = check.rec
    path = rec.artifacts_path
    return document({
        "study": rec.study, "path": str(rec.path),
        "trial_number": rec.trial_number, "label": rec.config.label,
        "name": rec.name, "batch_size": rec.config.batch_size, "device": rec.workload.device,
        "passed": check.passed, "warm_started": check.warm_started, "matches": check.matches,
        "reasons": check.reasons(),
        "artifacts": None if path is None else {
            "path": str(path), "found": path.exists(), "written": _written(path) or None,
            "torch": rec.row.get("artifacts_torch"), "made_on": rec.fingerprint,
            "note": CODE_WARNING},
        "study_compile_s": {k: _float(rec.row.get(f"compile_s_{k}"))
                            for k in ("cold", "warm", "artifacts")},
        "study_latency_ms_p50": rec.measured.latency_ms_p50_median or rec.measured.latency_ms_p50,
        "check": None if check.record is None else check.record.to_dict(),
    })


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _float(value: Any) -> float | None:
    return float(value) if _number(value) else None


def _s(seconds: Any) -> str:
    return f"{seconds:.1f} s" if _number(seconds) else "-"
