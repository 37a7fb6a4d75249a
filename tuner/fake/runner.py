"""A runner that makes results up, for tests (and benchmarks that need a fleet without a GPU).

No process, no torch, milliseconds; its numbers are never real and never leave the tests and the
benchmarks' dry runs.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from tuner.domain.records import Status, TrialRequest, TrialResult
from tuner.files import write_bytes_atomic, write_json_atomic


class FakeRunner:
    """Deterministic made-up results for tests: no process, no torch, milliseconds.

    ``fail`` maps a config key or label to the status that trial should end with;
    ``delay_s`` sleeps per trial (to test interruption and kills); ``base_ms`` overrides
    :data:`BASE_MS` per label; ``jitter`` moves each call's latency by up to that fraction,
    differently on each call of a config but the same from one test run to the next.

    Compile caches and artifacts are faked with files: a ``cache_dir`` that an earlier call
    filled makes the first call warm (:data:`WARM_FACTOR` of the cold time, a cache hit), a
    request's ``save_artifacts`` file is written, and a ``load_artifacts`` file that exists
    makes the first call :data:`ARTIFACTS_FACTOR` of the cold time. Rows say which
    (``cache_start``). A compiled config whose first call (:data:`COMPILE_S`, after the cache)
    would take longer than the protocol's compile budget ends as ``compile_timeout``. A
    regional config compiles faster and runs slower (:data:`REGIONAL_COMPILE_FACTOR`).
    """

    BASE_MS = {"eager": 10.0, "inductor:default": 8.0, "inductor:reduce-overhead": 6.0,
               "inductor:max-autotune-no-cudagraphs": 7.0, "inductor:max-autotune": 5.5,
               "cudagraphs": 7.5, "aot_eager": 11.0}
    COMPILE_S = {"eager": 0.0, "inductor:default": 15.0, "inductor:reduce-overhead": 17.0,
                 "inductor:max-autotune-no-cudagraphs": 60.0, "inductor:max-autotune": 90.0,
                 "cudagraphs": 3.0, "aot_eager": 5.0}
    WARM_FACTOR = 0.15
    # A regional config (compile_scope regional): a shorter first call, a slower call, and
    # this many blocks of class FAKE_BLOCK compiled.
    REGIONAL_COMPILE_FACTOR, REGIONAL_LATENCY_FACTOR = 0.25, 1.03
    FAKE_BLOCK, FAKE_BLOCKS = "Block", 12
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
        self.spares: list[tuple[Any, int]] = []  # start_spare's (prebuild, calls before it)
        self.templates: list[str | None] = []  # start_template's factory modules

    def run(self, request: TrialRequest, workdir: Path,
            abort: threading.Event | None = None, cache_dir: Path | None = None) -> TrialResult:
        cfg = request.config
        if workdir is not None:  # as the real runner's: the trial's folder holds its request
            workdir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(workdir / "request.json", request.to_dict())
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
        base_label = cfg.label.split(" ")[0]  # without dynamic=, precision, options, ...
        status = self.fail.get(cfg.key) or self.fail.get(cfg.label) or self.fail.get(base_label)
        if status is not None and status is not Status.OK:
            return TrialResult.failure(status, f"fake {status.value}", fingerprint=fingerprint,
                                       stderr_tail="fake stderr\n", wall_s=0.01)
        dyn_factor = {None: 1.02, False: 1.0, True: 1.05}[cfg.dynamic] if cfg.compiled else 1.0
        p50 = self.base_ms.get(base_label, 9.0) * (0.5 + cfg.batch_size / 8) * dyn_factor / self.speed
        p50 *= self.REGIONAL_LATENCY_FACTOR if cfg.regional else 1.0
        if self.jitter:
            nth = self.calls.count(cfg.key)
            p50 *= 1 + self.jitter * random.Random(f"{cfg.key}#{nth}").uniform(-1.0, 1.0)
        cudagraphs = "reduce-overhead" in base_label or base_label in ("inductor:max-autotune",
                                                                       "cudagraphs")
        vram = int(1e9 * (1 + cfg.batch_size / 32) * (1.3 if cudagraphs else 1.0))
        samples = [p50 * (1 + 0.01 * ((i % 5) - 2)) for i in range(50)]
        compile_s = self.COMPILE_S.get(base_label, 10.0) * (
            self.REGIONAL_COMPILE_FACTOR if cfg.regional else 1.0)
        cache = self._fake_cache(request, cache_dir, compile_s) if cfg.compiled else {}
        compile_s = cache.pop("compile_s_cold", compile_s)
        budget = request.protocol.compile_timeout_s
        if cfg.compiled and budget is not None and compile_s > budget:
            # As the real runner does: the record so far, the first call killed at the budget.
            from tuner.launch.compile_budget import message

            return TrialResult.failure(Status.COMPILE_TIMEOUT, message(budget, budget),
                                       fingerprint=fingerprint, import_s=8.0, build_s=0.5,
                                       cache_start=cache.get("cache_start"), wall_s=budget + 9)
        schedule = self._fake_schedule(request, p50) if request.workload.shape_schedule else {}
        return TrialResult(
            status=Status.OK, import_s=8.0, build_s=0.5, compile_s_cold=compile_s, warmup_s=0.2,
            warmup_calls=10, wall_s=0.01, latency_ms_p50=p50, latency_ms_p90=p50 * 1.01,
            latency_ms_p99=p50 * 1.02, latency_ms_mean=p50, latency_ms_min=p50 * 0.98,
            latency_ms_iqr=p50 * 0.02, latency_samples_ms=samples, measure_calls=50,
            measure_s=2.0, timer="fake", noisy=False, eager_reference_ms=10.0,
            # Back to back as fast as per request: the fake has no launch overhead to hide.
            stream_ms_p50=p50, stream_ms_p90=p50 * 1.01, stream_ms_p99=p50 * 1.02,
            stream_ms_iqr=p50 * 0.02, stream_calls=50, stream_s=2.0, stream_timer="fake",
            vram_bytes_baseline=int(5e8), vram_bytes_compile_allocated=vram,
            vram_bytes_compile_reserved=vram, vram_bytes_steady_allocated=vram,
            vram_bytes_steady_reserved=vram, host_rss_bytes_peak=int(3e9), correct=True,
            max_abs_error=1e-6, tolerance=1e-3, graph_breaks=0 if cfg.compiled else None,
            unique_graphs=1 if cfg.compiled else None, recompiles=0 if cfg.compiled else None,
            cudagraph_skips=0 if cfg.compiled else None, fingerprint=fingerprint, **cache,
            **schedule, region_class=self.FAKE_BLOCK if cfg.regional else None,
            regions_compiled=self.FAKE_BLOCKS if cfg.regional else None)

    def start_spare(self, prebuild: Any = None) -> None:
        self.spares.append((prebuild, len(self.calls)))

    def start_template(self, factory_module: str | None = None) -> None:
        self.templates.append(factory_module)

    def close(self) -> None:
        self.closed += 1

    @staticmethod
    def _fake_schedule(request: TrialRequest, p50: float) -> dict[str, Any]:
        """A made-up replay: static shapes recompile once per new shape, dynamic ones once."""
        from tuner.domain.workload import shape_batch, shape_label

        cfg, shapes = request.config, list(dict.fromkeys(request.workload.shape_schedule))
        new = [s for s in shapes if shape_batch(s) != cfg.batch_size]
        recompiles = (0 if not new else len(new) if cfg.dynamic is False else 1) \
            if cfg.compiled else None
        return {"schedule_recompiles": recompiles,
                "schedule_recompile_s": 2.0 * recompiles if recompiles is not None else None,
                "schedule_total_s": 3 * len(request.workload.shape_schedule) * p50 / 1e3
                + 2.0 * (recompiles or 0),
                "schedule_batch_sizes": [shape_batch(s) for s in shapes],
                "schedule_shapes": [shape_label(s) for s in shapes],
                "schedule_latency_ms": [p50 * shape_batch(s) / cfg.batch_size for s in shapes]}

    def _fake_cache(self, request: TrialRequest, cache_dir: Path | None,
                    cold_s: float) -> dict[str, Any]:
        fields: dict[str, Any] = {"compile_s_cold": cold_s, "fxgraph_cache_hits": 0,
                                  "fxgraph_cache_misses": 1, "cache_start": "cold"}
        if request.load_artifacts and Path(request.load_artifacts).exists():
            fields.update(compile_s_cold=cold_s * self.ARTIFACTS_FACTOR, artifacts_load_s=0.05,
                          fxgraph_cache_hits=1, fxgraph_cache_misses=0, cache_start="artifacts")
        elif cache_dir is not None and (Path(cache_dir) / self.CACHE_MARK).exists():
            fields.update(compile_s_cold=cold_s * self.WARM_FACTOR, fxgraph_cache_hits=1,
                          fxgraph_cache_misses=0, cache_start="warm")
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
            (Path(cache_dir) / self.CACHE_MARK).write_text("fake compile cache\n")
        if request.save_artifacts:
            data = f"fake artifacts of {request.config.key}".encode()
            write_bytes_atomic(Path(request.save_artifacts), data)
            fields["artifacts_bytes"] = len(data)
        return fields


# -- the command line with FakeRunner behind it ---------------------------------------------------
FAKE_DELAY_ENV = "TUNER_TEST_FAKE_DELAY_S"  # seconds each fake trial takes, in every process
# What the installed torch offers, found once by the test process (tests/conftest.py) as JSON
# (:func:`offered`). With it a fake command checks --model, --backend and --mode and names its
# configs without importing torchvision, dynamo or inductor: seconds in every process it starts.
FAKE_OFFERED_ENV = "TUNER_TEST_OFFERED"
FAKE_GPUS = 8  # GPUs a fake fleet may use on a machine where torch sees none


def offered() -> str:
    """What this process's torch offers, as :data:`FAKE_OFFERED_ENV` holds it: torchvision's
    model names, torch.compile's backends and modes, and inductor's settings (those of a plain
    value: what a search's option defaults read) overall and per mode."""
    from tuner.domain.inductor_options import inductor_settings
    from tuner.domain.space import installed_backends, installed_modes
    from tuner.domain.workload import torchvision_models

    def plain(options: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in options.items()
                if v is None or isinstance(v, (bool, int, float, str))}

    modes = installed_modes()
    current, by_mode = inductor_settings(modes)
    return json.dumps({"models": torchvision_models(), "backends": installed_backends(),
                       "modes": modes, "config": plain(current),
                       "by_mode": {mode: plain(options) for mode, options in by_mode.items()}})


def _install_offered(setattr: Any, listed: str) -> None:
    """Answer what torch offers from :func:`offered`'s JSON."""
    from tuner.domain import inductor_options, space, workload

    found = json.loads(listed)
    setattr(workload, "torchvision_models", lambda: list(found["models"]))
    setattr(space, "installed_backends", lambda: list(found["backends"]))
    setattr(space, "installed_modes", lambda: list(found["modes"]))
    setattr(inductor_options, "inductor_settings", lambda modes: (
        dict(found["config"]),
        {m: dict(found["by_mode"][m]) for m in map(str, modes) if m in found["by_mode"]}))


def install(delay_s: float | None = None, setattr: Any = setattr) -> None:
    """Put FakeRunner behind the command line of this process (and of the fleet workers it
    starts): every runner the CLI makes is a FakeRunner, and a fleet may use GPUs the machine
    lacks, since the fake touches none. ``setattr``: pytest's ``monkeypatch.setattr`` to undo it
    after a test."""
    import os

    from tuner.launch import gpus, runner
    from tuner.study.fleet import Fleet

    if delay_s is not None:
        os.environ[FAKE_DELAY_ENV] = str(delay_s)

    def fake_runner(settings: Any, shared_cache: Path | None = None) -> FakeRunner:
        return FakeRunner(delay_s=float(os.environ.get(FAKE_DELAY_ENV, "0")))

    real_visible = gpus.visible_gpus
    setattr(runner, "make_runner", fake_runner)
    setattr(gpus, "visible_gpus", lambda: real_visible() or FAKE_GPUS)
    setattr(Fleet, "worker_module", "tuner.fake.fleet_worker")
    if listed := os.environ.get(FAKE_OFFERED_ENV):
        _install_offered(setattr, listed)
