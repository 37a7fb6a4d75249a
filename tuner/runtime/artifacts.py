"""torch's compile-cache artifacts: save them after a compile, load them before the next one.

``torch.compiler.save_cache_artifacts()`` (torch 2.7 and later) packs the cache entries this
process wrote or hit (FX graphs, AOTAutograd entries and, on CUDA, the Triton kernels) into
bytes; ``torch.compiler.load_cache_artifacts`` in another process writes them into that
process's caches, so its compile hits them instead of starting cold. A study keeps one file per
finalist (:meth:`tuner.domain.layout.StudyLayout.artifacts_file`), and
:meth:`tuner.Recommendation.apply` loads it in production.

On the CPU the artifacts hold inductor's generated C++ source, not the built library: a process
that starts from them skips tracing and lowering (its FX-graph and AOTAutograd lookups hit) but
still runs the C++ compiler.

:func:`cache_start` says what a trial's first call started from: empty caches, caches that held
entries, or loaded artifacts.

Only the standard library is imported at module level: the trial and ``apply`` use this.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tuner.files import write_bytes_atomic


def supported() -> bool:
    """Whether the installed torch can save and load compile artifacts."""
    import torch

    compiler = getattr(torch, "compiler", None)
    return hasattr(compiler, "save_cache_artifacts") and hasattr(compiler, "load_cache_artifacts")


def save(path: Path) -> tuple[int | None, str]:
    """Write this process's compile artifacts to ``path`` atomically.

    Returns (bytes written, note); bytes is None with the reason in the note when nothing was
    written. Never raises: a trial must not fail because its artifacts could not be kept.
    """
    if not supported():
        import torch

        return None, f"torch {torch.__version__} has no torch.compiler.save_cache_artifacts"
    import torch

    try:
        saved = torch.compiler.save_cache_artifacts()
    except Exception as exc:  # noqa: BLE001 - an optional extra; the note says what went wrong
        return None, f"save_cache_artifacts failed: {type(exc).__name__}: {exc}"[:300]
    if not saved or not saved[0]:
        return None, "save_cache_artifacts returned nothing (no cache entries in this process)"
    data = saved[0]
    try:
        write_bytes_atomic(Path(path), data)
    except OSError as exc:
        return None, f"cannot write {path}: {exc.strerror}"
    return len(data), ""


def load(path: Path) -> tuple[float | None, str]:
    """Load the artifacts in ``path`` into this process's compile caches.

    Returns (seconds it took, note); seconds is None when nothing was loaded. Never raises.
    """
    loaded = load_entries(path)
    return loaded.seconds, loaded.note


@dataclasses.dataclass(frozen=True)
class Loaded:
    """What :func:`load_entries` put into this process's compile caches.

    ``seconds`` is None when nothing was loaded, with the reason in ``note``; ``entries``
    counts the cache entries written, per kind as torch names them (``inductor``: FX graphs,
    ``aot_autograd``, ``autotune``, ``pgo`` ...).
    """

    seconds: float | None
    note: str = ""
    entries: dict[str, int] = dataclasses.field(default_factory=dict)


_watchers: list[list[Loaded]] = []


@contextlib.contextmanager
def watched_loads() -> Iterator[list[Loaded]]:
    """A list that gets what each :func:`load_entries` returns in this block: how ``tuner
    check`` sees what :meth:`tuner.Recommendation.apply` loaded, apply called as production
    calls it."""
    seen: list[Loaded] = []
    _watchers.append(seen)
    try:
        yield seen
    finally:
        _watchers.remove(seen)


def load_entries(path: Path) -> Loaded:
    """Load the artifacts in ``path`` into this process's compile caches, and count what they
    held. Loading unpickles what the file holds (torch's cached graphs): a file from someone
    else is code from them. Never raises."""
    loaded = _load_entries(path)
    for seen in _watchers:
        seen.append(loaded)
    return loaded


def _load_entries(path: Path) -> Loaded:
    if not supported():
        import torch

        return Loaded(None, f"torch {torch.__version__} has no torch.compiler.load_cache_artifacts")
    import torch

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return Loaded(None, f"cannot read {path}: {exc.strerror}")
    started = time.perf_counter()
    try:
        info = torch.compiler.load_cache_artifacts(data)
    except Exception as exc:  # noqa: BLE001 - a stale or foreign file: compile cold instead
        return Loaded(None, f"load_cache_artifacts failed: {type(exc).__name__}: {exc}"[:300])
    if info is None:  # torch logs why and returns None for bytes it cannot read
        return Loaded(None, f"load_cache_artifacts failed: torch {torch.__version__} cannot read {path}")
    kinds = getattr(info, "artifacts", {}) or {}
    return Loaded(time.perf_counter() - started, "",
                  {str(kind): len(keys) for kind, keys in kinds.items() if keys})


# What a compiled trial's first call started from (TrialResult.cache_start).
COLD, WARM, ARTIFACTS = "cold", "warm", "artifacts"


def cache_start(held_entries: bool, loaded_artifacts: bool) -> str:
    """``artifacts`` when saved artifacts were loaded; else ``warm`` when the compile caches
    held entries before anything compiled (:func:`caches_hold_entries`), else ``cold``."""
    return ARTIFACTS if loaded_artifacts else WARM if held_entries else COLD


def caches_hold_entries() -> bool:
    """Whether the inductor or triton cache folder this process compiles into holds any file
    yet. A compile that starts from such a cache may hit entries of earlier compiles (another
    trial's, with ``--warm-cache``): its first call is not a cold compile."""
    for folder in _cache_folders():
        try:
            if any(path.is_file() for path in folder.rglob("*")):
                return True
        except OSError:  # unreadable: nothing of it can be hit either
            continue
    return False


def _cache_folders() -> list[Path]:
    """Where inductor puts its compile caches (its Triton kernels too, under the inductor
    folder unless TRITON_CACHE_DIR says otherwise); the runner sets both for every trial."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not inductor:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir

            inductor = default_cache_dir()
        except ImportError:  # an older torch: its default, spelt out
            import getpass

            inductor = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    triton = os.environ.get("TRITON_CACHE_DIR")
    return [Path(inductor)] + ([Path(triton)] if triton else [])


def cache_counters() -> tuple[int | None, int | None]:
    """(hits, misses) of inductor's FX-graph cache in this process so far; (None, None) if
    this torch does not count them. A warm compile has hits and no misses."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None, None
    inductor: dict[str, int] = counters.get("inductor", {})
    if "fxgraph_cache_hit" not in inductor and "fxgraph_cache_miss" not in inductor:
        return None, None  # no inductor graph was looked up (another backend, or eager)
    return int(inductor.get("fxgraph_cache_hit", 0)), int(inductor.get("fxgraph_cache_miss", 0))


@dataclasses.dataclass(frozen=True)
class CacheCounts:
    """Lookups of inductor's FX-graph cache and of AOTAutograd's cache so far in this process
    (torch's own counters); :meth:`since` gives those made between two readings. A compile
    that starts from loaded artifacts hits both and misses neither."""

    fxgraph_hits: int = 0
    fxgraph_misses: int = 0
    aot_hits: int = 0
    aot_misses: int = 0

    def since(self, before: CacheCounts) -> CacheCounts:
        return CacheCounts(*(getattr(self, f.name) - getattr(before, f.name)
                             for f in dataclasses.fields(self)))

    @property
    def compiled(self) -> int:
        """Graphs compiled rather than found: the FX-graph cache's misses (inductor compiles
        each graph it misses; a backend other than inductor counts none)."""
        return self.fxgraph_misses


def cache_counts() -> CacheCounts | None:
    """This process's :class:`CacheCounts` now; None if this torch keeps no such counters."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    inductor: dict[str, int] = counters.get("inductor", {})
    aot: dict[str, int] = counters.get("aot_autograd", {})
    return CacheCounts(int(inductor.get("fxgraph_cache_hit", 0)),
                       int(inductor.get("fxgraph_cache_miss", 0)),
                       int(aot.get("autograd_cache_hit", 0)), int(aot.get("autograd_cache_miss", 0)))
