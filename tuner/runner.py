"""Run one trial in a fresh process, enforce its deadline, and classify how it ended.

:class:`ProcessRunner` is the real thing; :class:`FakeRunner` returns made-up numbers instantly
so the study, results and CLI can be tested in milliseconds (its numbers are never real).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import Protocol as TypingProtocol

from tuner.records import Status, TrialRequest, TrialResult, write_bytes_atomic, write_json_atomic
from tuner.worker import PARENT_PID_ENV, QUIET_FILE_ENV

STDERR_TAIL_CHARS = 4000


class Runner(TypingProtocol):
    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        """Run one trial; files for it may be kept under ``workdir``. Never raises for a
        failed trial. Setting ``abort`` ends the trial early as ``interrupted``.
        ``cache_dir``: the inductor and triton caches to use and keep (see ProcessRunner)."""
        ...

    def close(self) -> None:
        """Release what the runner keeps between trials (a pre-started process)."""
        ...


class ProcessRunner:
    """Each trial in its own process group, killed whole at the deadline.

    ``cache_dir``: where inductor and triton keep compiled artifacts when the protocol asks
    for a warm cache; otherwise every trial gets fresh, empty cache folders (a cold compile),
    deleted after it, unless :meth:`run` is given a ``cache_dir`` of the trial's own: that one
    is used as it is (empty for a cold compile, filled for a warm one) and kept.
    ``env``: extra environment for the worker (``CUDA_VISIBLE_DEVICES`` to pin a GPU).

    ``prestart``: hide the seconds a fresh process spends importing torch. While a trial runs,
    the process for the next one is already started and importing (``tuner.worker --wait``;
    CUDA untouched); the next :meth:`run` hands it its request. Still one process per trial.
    The running trial waits after its first call until that import is done (``quiet_wait_s``),
    so its warm-up and measurement never share the machine with it. :meth:`close` ends the
    waiting process (it also dies with this one).
    """

    def __init__(self, timeout_s: float, cache_dir: Path | None = None,
                 env: dict[str, str] | None = None, python: str = sys.executable,
                 prestart: bool = False) -> None:
        self.timeout_s = timeout_s
        self.cache_dir = cache_dir
        self.env = dict(env or {})
        self.python = python
        self.prestart = prestart
        self._spare: _Spare | None = None  # started, importing or waiting for its request

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        workdir.mkdir(parents=True, exist_ok=True)
        request_path, result_path = workdir / "request.json", workdir / "result.json"
        log_path = workdir / "worker.log"
        result_path.unlink(missing_ok=True)
        write_json_atomic(request_path, request.to_dict())

        fresh_cache = None
        if cache_dir is not None:
            cache = Path(cache_dir)
            cache.mkdir(parents=True, exist_ok=True)
        elif request.protocol.warm_cache and self.cache_dir is not None:
            cache = self.cache_dir
        else:
            cache = fresh_cache = Path(tempfile.mkdtemp(prefix="tuner-cache-"))
        trial_env = {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
                     "TRITON_CACHE_DIR": str(cache / "triton")}

        started = time.perf_counter()
        if self.prestart:
            spare = self._hand_over(request_path, result_path, trial_env)
            proc = spare.proc
            outcome = _wait(proc, self.timeout_s, abort, result_path, tick=self._spare.watch)
        else:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [self.python, "-m", "tuner.worker", str(request_path), str(result_path)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env={**self._env(), **trial_env},
                    start_new_session=True,  # own process group: Ctrl-C in the terminal skips it
                )
                outcome = _wait(proc, self.timeout_s, abort, result_path)
        wall_s = time.perf_counter() - started
        _kill_group(proc.pid)  # inductor's compile workers die with the trial, whatever happened
        proc.wait()
        if self.prestart:
            spare.finish(log_path)
        if fresh_cache is not None:
            shutil.rmtree(fresh_cache, ignore_errors=True)

        tail = _tail(log_path)
        if outcome == "timeout":
            result = TrialResult.failure(
                Status.TIMEOUT, f"no result after {self.timeout_s:.0f} s; process group killed")
        elif outcome == "aborted":
            result = TrialResult.failure(Status.INTERRUPTED, "stopped by the user")
        else:
            result = _read_result(result_path, proc.returncode)
        result.wall_s = wall_s
        if not result.ok:
            result.stderr_tail = tail
        return result

    def close(self) -> None:
        if self._spare is not None:
            self._spare.discard()
            self._spare = None

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env, "PYTHONUNBUFFERED": "1",
                PARENT_PID_ENV: str(os.getpid())}  # the trial dies with this process

    def _hand_over(self, request_path: Path, result_path: Path,
                   trial_env: dict[str, str]) -> _Spare:
        """The trial's process: the pre-started one (a new one if none is alive), given the
        request; the next trial's process is started at once."""
        spare, self._spare = self._spare, None
        if spare is None or spare.proc.poll() is not None:
            if spare is not None:
                spare.discard()
            spare = _Spare.start(self.python, self._env())
        self._spare = _Spare.start(self.python, self._env())
        spare.give(request_path, result_path, {**trial_env, QUIET_FILE_ENV: str(self._spare.ready)})
        return spare


class _Spare:
    """A pre-started ``tuner.worker --wait`` process, its ready file and its log, in a folder
    of its own until :meth:`finish` moves the log into the trial's folder."""

    def __init__(self, proc: subprocess.Popen, folder: Path) -> None:
        self.proc, self.folder = proc, folder
        self.ready, self.log = folder / "ready", folder / "worker.log"

    @classmethod
    def start(cls, python: str, env: dict[str, str]) -> _Spare:
        folder = Path(tempfile.mkdtemp(prefix="tuner-spare-"))
        with open(folder / "worker.log", "wb") as log:
            proc = subprocess.Popen(
                [python, "-m", "tuner.worker", "--wait", str(folder / "ready")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env,
                start_new_session=True)
        return cls(proc, folder)

    def give(self, request_path: Path, result_path: Path, env: dict[str, str]) -> None:
        job = {"request": str(request_path), "result": str(result_path), "env": env,
               "sent_at": time.time()}
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died while importing: the trial ends as a crash, with its log

    def watch(self) -> None:
        """Called while the trial before this one runs: if this process died before it was
        ready, say ready anyway, so that trial does not wait for it."""
        if not self.ready.exists() and self.proc.poll() is not None:
            self.ready.touch()

    def finish(self, log_path: Path) -> None:
        """After the trial (process killed and waited for): its log goes to the trial's folder."""
        with contextlib.suppress(OSError):
            shutil.move(str(self.log), str(log_path))
        shutil.rmtree(self.folder, ignore_errors=True)

    def discard(self) -> None:
        _kill_group(self.proc.pid)
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _wait(proc: subprocess.Popen, timeout_s: float, abort: threading.Event | None,
          result_path: Path, tick: Callable[[], None] | None = None) -> str:
    """How the trial ended: exited; recorded (its record is written, whole: the process is not
    waited for while it tears torch down, a second or two, since the record is the truth);
    aborted; or timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            proc.wait(timeout=0.05)
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        if result_path.exists():  # written atomically: complete once it exists
            return "recorded"
        if tick is not None:
            tick()
        if abort is not None and abort.is_set():
            _kill_group(proc.pid)
            proc.wait()
            return "aborted"
        if time.monotonic() >= deadline:
            _kill_group(proc.pid)
            proc.wait()
            return "timeout"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_result(path: Path, returncode: int) -> TrialResult:
    if path.exists():
        try:
            return TrialResult.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            return TrialResult.failure(Status.CRASH, f"unreadable result record: {exc}")
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() else "?"
        hint = " (the host may have run out of memory)" if name == "SIGKILL" else ""
        return TrialResult.failure(Status.CRASH, f"worker killed by {name}{hint}")
    return TrialResult.failure(Status.CRASH, f"worker exited with code {returncode} and no result")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - STDERR_TAIL_CHARS))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


class FakeRunner:
    """Deterministic made-up results for tests: no process, no torch, milliseconds.

    ``fail`` maps a config key or label to the status that trial should end with;
    ``delay_s`` sleeps per trial (to test interruption and kills); ``base_ms`` overrides
    :data:`BASE_MS` per label; ``jitter`` moves each call's latency by up to that fraction,
    differently on each call of a config but the same from one test run to the next.

    Compile caches and artifacts are faked with files: a ``cache_dir`` that an earlier call
    filled makes the first call warm (:data:`WARM_FACTOR` of the cold time, a cache hit), a
    request's ``save_artifacts`` file is written, and a ``load_artifacts`` file that exists
    makes the first call :data:`ARTIFACTS_FACTOR` of the cold time.
    """

    BASE_MS = {"eager": 10.0, "inductor:default": 8.0, "inductor:reduce-overhead": 6.0,
               "inductor:max-autotune-no-cudagraphs": 7.0, "inductor:max-autotune": 5.5,
               "cudagraphs": 7.5, "aot_eager": 11.0}
    COMPILE_S = {"eager": 0.0, "inductor:default": 15.0, "inductor:reduce-overhead": 17.0,
                 "inductor:max-autotune-no-cudagraphs": 60.0, "inductor:max-autotune": 90.0,
                 "cudagraphs": 3.0, "aot_eager": 5.0}
    WARM_FACTOR = 0.15
    ARTIFACTS_FACTOR = 0.4
    CACHE_MARK = "fake-cache"

    def __init__(self, fail: dict[str, Status] | None = None, delay_s: float = 0.0,
                 gpu_name: str = "Fake GPU", speed: float = 1.0, torch_version: str = "2.11.0",
                 jitter: float = 0.0, base_ms: dict[str, float] | None = None) -> None:
        self.fail = dict(fail or {})
        self.delay_s = delay_s
        self.gpu_name = gpu_name
        self.speed = speed
        self.torch_version = torch_version
        self.jitter = jitter
        self.base_ms = {**self.BASE_MS, **(base_ms or {})}
        self.closed = 0  # how many times close() was called
        self.calls: list[str] = []
        self.requests: list[TrialRequest] = []  # every request, in order
        self.cache_dirs: list[Path | None] = []  # the cache_dir of each call

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        cfg = request.config
        self.calls.append(cfg.key)
        self.requests.append(request)
        self.cache_dirs.append(cache_dir)
        if self.delay_s:
            end = time.monotonic() + self.delay_s
            while time.monotonic() < end:
                if abort is not None and abort.is_set():
                    return TrialResult.failure(Status.INTERRUPTED, "stopped by the user")
                time.sleep(0.01)
        fingerprint = {"device_kind": "cuda", "gpu_name": self.gpu_name,
                       "gpu_compute_capability": "9.0", "driver": "580.0", "cuda": "13.0",
                       "torch": self.torch_version, "python": "3.12.0", "tuner": "fake",
                       "host": "fakehost"}
        base_label = cfg.label.split(" dynamic=")[0]
        status = self.fail.get(cfg.key) or self.fail.get(cfg.label) or self.fail.get(base_label)
        if status is not None and status is not Status.OK:
            return TrialResult.failure(status, f"fake {status.value}", fingerprint=fingerprint,
                                       stderr_tail="fake stderr\n", wall_s=0.01)
        dyn_factor = {None: 1.02, False: 1.0, True: 1.05}[cfg.dynamic] if cfg.compiled else 1.0
        p50 = self.base_ms.get(base_label, 9.0) * (0.5 + cfg.batch_size / 8) * dyn_factor / self.speed
        if self.jitter:
            nth = self.calls.count(cfg.key)
            p50 *= 1 + self.jitter * random.Random(f"{cfg.key}#{nth}").uniform(-1.0, 1.0)
        cudagraphs = "reduce-overhead" in base_label or base_label in ("inductor:max-autotune",
                                                                       "cudagraphs")
        vram = int(1e9 * (1 + cfg.batch_size / 32) * (1.3 if cudagraphs else 1.0))
        samples = [p50 * (1 + 0.01 * ((i % 5) - 2)) for i in range(50)]
        compile_s = self.COMPILE_S.get(base_label, 10.0)
        cache = self._fake_cache(request, cache_dir, compile_s) if cfg.compiled else {}
        compile_s = cache.pop("compile_s_cold", compile_s)
        schedule = self._fake_schedule(request, p50) if request.workload.shape_schedule else {}
        return TrialResult(
            status=Status.OK, import_s=8.0, build_s=0.5, compile_s_cold=compile_s, warmup_s=0.2,
            warmup_calls=10, wall_s=0.01, latency_ms_p50=p50, latency_ms_p90=p50 * 1.01,
            latency_ms_p99=p50 * 1.02, latency_ms_mean=p50, latency_ms_min=p50 * 0.98,
            latency_ms_iqr=p50 * 0.02, latency_samples_ms=samples, measure_calls=50,
            measure_s=2.0, timer="fake", noisy=False, eager_reference_ms=10.0,
            vram_bytes_baseline=int(5e8), vram_bytes_compile_allocated=vram,
            vram_bytes_compile_reserved=vram, vram_bytes_steady_allocated=vram,
            vram_bytes_steady_reserved=vram, host_rss_bytes_peak=int(3e9), correct=True,
            max_abs_error=1e-6, tolerance=1e-3, graph_breaks=0 if cfg.compiled else None,
            unique_graphs=1 if cfg.compiled else None, recompiles=0 if cfg.compiled else None,
            cudagraph_skips=0 if cfg.compiled else None, fingerprint=fingerprint, **cache,
            **schedule)

    def close(self) -> None:
        self.closed += 1

    @staticmethod
    def _fake_schedule(request: TrialRequest, p50: float) -> dict[str, Any]:
        """A made-up replay: static shapes recompile once per new shape, dynamic ones once."""
        from tuner.workload import shape_batch, shape_label

        cfg, shapes = request.config, list(dict.fromkeys(request.workload.shape_schedule))
        new = [s for s in shapes if shape_batch(s) != cfg.batch_size]
        recompiles = (0 if not new else len(new) if cfg.dynamic is False else 1) \
            if cfg.compiled else None
        return {"schedule_recompiles": recompiles,
                "schedule_recompile_s": 2.0 * recompiles if cfg.compiled else None,
                "schedule_total_s": 3 * len(request.workload.shape_schedule) * p50 / 1e3
                + 2.0 * (recompiles or 0),
                "schedule_batch_sizes": [shape_batch(s) for s in shapes],
                "schedule_shapes": [shape_label(s) for s in shapes],
                "schedule_latency_ms": [p50 * shape_batch(s) / cfg.batch_size for s in shapes]}

    def _fake_cache(self, request: TrialRequest, cache_dir: Path | None,
                    cold_s: float) -> dict[str, Any]:
        fields: dict[str, Any] = {"compile_s_cold": cold_s, "fxgraph_cache_hits": 0,
                                  "fxgraph_cache_misses": 1}
        if request.load_artifacts and Path(request.load_artifacts).exists():
            fields.update(compile_s_cold=cold_s * self.ARTIFACTS_FACTOR, artifacts_load_s=0.05,
                          fxgraph_cache_hits=1, fxgraph_cache_misses=0)
        elif cache_dir is not None and (Path(cache_dir) / self.CACHE_MARK).exists():
            fields.update(compile_s_cold=cold_s * self.WARM_FACTOR, fxgraph_cache_hits=1,
                          fxgraph_cache_misses=0)
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            (Path(cache_dir) / self.CACHE_MARK).write_text("fake compile cache\n")
        if request.save_artifacts:
            data = f"fake artifacts of {request.config.key}".encode()
            write_bytes_atomic(Path(request.save_artifacts), data)
            fields["artifacts_bytes"] = len(data)
        return fields
