"""``tuner check``: does a study's recommendation warm-start here, as production would?

:func:`check` chooses the recommendation here (``tuner.recommend``'s options and errors), then
starts ``python -m tuner.check`` in a fresh process with empty inductor and Triton caches (temp
folders). That process does what production does (``tuner.recommend``, then ``apply`` on the
study's model, built as a trial builds it) and writes one :class:`CheckRecord`: what the
artifacts loaded, what the first call compiled, the output against the study's eager
reference, and the per-request p50. :class:`Check` holds both, says whether it passed
(:attr:`Check.passed`: a warm start and the study's output) and why not (:meth:`Check.reasons`).

The worker's contract: one JSON record written atomically to the path its request names; exit
0 when it wrote one, anything else when it did not (its stderr then says why).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tuner.errors import UserError
from tuner.use.recommend import Recommendation
from tuner.use.recommend import recommend as recommend_

STDERR_TAIL_CHARS = 3000


@dataclasses.dataclass(frozen=True)
class CheckRecord:
    """What the check process saw. Counts are of torch's own counters (FX-graph and AOTAutograd
    caches) during the first call; ``warnings`` are those ``apply`` and the first call gave
    (:class:`tuner.WarmStartMissed`, :class:`tuner.MismatchWarning`)."""

    trial_number: int
    label: str
    device: str
    compiled: bool
    torch: str
    artifacts_loaded: bool = False
    artifacts_entries: dict[str, int] = dataclasses.field(default_factory=dict)
    artifacts_load_s: float | None = None
    first_call_s: float | None = None
    counted: bool = False  # whether this torch counts cache lookups at all
    fxgraph_hits: int = 0
    fxgraph_misses: int = 0
    aot_hits: int = 0
    aot_misses: int = 0
    recompiles: int = 0
    recompile_reasons: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    correct: bool | None = None
    max_abs_error: float | None = None
    tolerance: float | None = None
    reference: str = ""  # "study": the study's kept eager output; "here": eager, run here
    reference_note: str = ""
    latency_ms_p50: float | None = None
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclasses.dataclass(frozen=True)
class Check:
    """A recommendation checked in a fresh process: ``record`` is None when the process wrote
    none (``failure`` says why)."""

    rec: Recommendation
    record: CheckRecord | None
    failure: str = ""

    @property
    def warm_started(self) -> bool:
        """The first call found its compiled code in the caches the artifacts filled, and
        nothing compiled again after it; an eager config needs no warm start."""
        r = self.record
        if r is None:
            return False
        if not r.compiled:
            return True
        return (r.artifacts_loaded and r.counted and r.fxgraph_misses == 0
                and r.aot_misses == 0 and r.recompiles == 0)

    @property
    def matches(self) -> bool:
        return self.record is not None and self.record.correct is True

    @property
    def passed(self) -> bool:
        return self.warm_started and self.matches

    def reasons(self) -> list[str]:
        """Why it did not pass, one sentence each; empty when it passed."""
        r = self.record
        if r is None:
            return [self.failure]
        found = [] if self.warm_started else self._misses(r)
        if r.correct is False:
            found.append(f"the output differs from the study's eager reference: {r.reference_note}")
        elif r.correct is None:
            found.append(f"the output could not be checked: {r.reference_note}")
        return found

    def _misses(self, r: CheckRecord) -> list[str]:
        found = list(dict.fromkeys(r.warnings))  # apply's and the first call's, once each
        if not r.artifacts_loaded and self.rec.artifacts_path is None:
            found.append("the study saved no compile artifacts for this config")
        elif r.artifacts_loaded and not r.counted:
            found.append(f"torch {r.torch} counts no cache lookups: whether the first call "
                         "compiled cannot be told")
        elif r.artifacts_loaded and (r.fxgraph_misses or r.aot_misses) and not r.warnings:
            found.append(f"the first call compiled {r.fxgraph_misses} FX graph(s) after the "
                         "artifacts were loaded: their cache keys did not match")
        if r.recompiles:
            found.append(f"dynamo recompiled {r.recompiles} time(s) after the first call: "
                         + "; ".join(r.recompile_reasons[:3]))
        found += list(self.rec.mismatch)  # another torch, GPU or driver than the study's
        return found or ["the first call did not start from the artifacts"]

    def to_dict(self) -> dict[str, Any]:
        from tuner.render.check import as_json

        return as_json(self)

    def lines(self) -> list[str]:
        from tuner.render.check import lines

        return lines(self)


def check(study: str | Path, timeout_s: float = 1800.0, **options: Any) -> Check:
    """Check the recommendation of ``study`` (``options``: those of :func:`tuner.recommend`)
    in a fresh process with empty compile caches.

    Raises:
        UserError: what ``tuner.recommend`` refuses, or a study on a device this machine lacks.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mismatch is one of the check's reasons
        rec = recommend_(study, **options)
    _check_device(rec)
    with tempfile.TemporaryDirectory(prefix="tuner-check-") as folder:
        request = Path(folder) / "request.json"
        out = Path(folder) / "record.json"
        request.write_text(json.dumps({"study": str(rec.path), "options": options,
                                       "out": str(out)}))
        failure = _run(request, Path(folder), timeout_s)
        if failure:
            return Check(rec, None, failure)
        return Check(rec, CheckRecord.from_dict(json.loads(out.read_text())))


def _check_device(rec: Recommendation) -> None:
    if not rec.workload.device.startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise UserError(f"study {rec.study!r} ran on {rec.workload.device}, and this machine has "
                        "no CUDA device: check it on a machine like the study's")


def _run(request: Path, folder: Path, timeout_s: float) -> str:
    """Run the check process on empty caches; '' when it wrote its record, else why not."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"),
           "TRITON_CACHE_DIR": str(folder / "triton")}
    stderr = folder / "stderr.txt"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tuner.check", str(request)], env=env,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"the check process did not finish in {timeout_s:.0f} s (--timeout)"
    if code == 0 and (folder / "record.json").exists():
        return ""
    tail = stderr.read_text(errors="replace")[-STDERR_TAIL_CHARS:].strip()
    last = tail.splitlines()[-1] if tail else "no output"
    return f"the check process ended with exit code {code} and no record: {last}"
