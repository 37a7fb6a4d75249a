"""What went wrong in a trial, as its record says it: the error told apart (oom, a sticky CUDA
error, anything else) and the failure record with its message in one line."""

from __future__ import annotations

from tuner.domain.records import Status, TrialResult


class TrialStopped(Exception):
    """Raised by a step that ended the trial early: ``record`` says why (the protocol returns
    it, as it returns a finished trial's)."""

    def __init__(self, record: TrialResult) -> None:
        super().__init__(record.message)
        self.record = record


def fail(result: TrialResult, status: Status, message: str) -> TrialResult:
    result.status = status
    result.message = one_line(message)
    return result


def device_failure(result: TrialResult, where: str, exc: Exception) -> TrialResult:
    """The record of an oom or a CUDA error raised while the model is placed or cast, its
    message prefixed with ``where``; any other error is raised again (a crash, with its
    traceback)."""
    if is_oom(exc):
        return fail(result, Status.OOM, f"{where}{describe_error(exc)}")
    if is_cuda_error(exc):
        return cuda_failure(result, where, exc)
    raise exc


def raised(result: TrialResult, where: str, exc: BaseException) -> TrialResult:
    """The record of an error raised while compiling, measuring or replaying: oom, cuda_error
    or compile_error, its message prefixed with ``where``."""
    if is_oom(exc):
        return fail(result, Status.OOM, f"{where}{describe_error(exc)}")
    if is_cuda_error(exc):
        return cuda_failure(result, where, exc)
    return fail(result, Status.COMPILE_ERROR, f"{where}{describe_error(exc)}")


def one_line(message: str) -> str:
    """A failure's message as one line for the table: its first line and, where the error ran
    over several (inductor's wrapped errors, CUDA's advice), its last, at most 300 characters.
    The whole text goes to stderr, whose tail the runner keeps as ``stderr_tail``."""
    import sys

    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return message.strip()
    print(message, file=sys.stderr, flush=True)
    text = f"{lines[0]} ... {lines[-1]}"
    return text if len(text) <= 300 else text[:297] + "..."


# How an exhausted host says so through torch: the CPU allocator's RuntimeError, a C++
# std::bad_alloc, or the OS's ENOMEM from a compile worker or a fork.
_HOST_OOM = ("out of memory", "can't allocate memory", "cannot allocate memory", "bad_alloc",
             "errno 12")


def is_oom(exc: BaseException) -> bool:
    import torch

    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None),
                                  getattr(torch.cuda, "OutOfMemoryError", None), MemoryError) if t)
    text = str(exc).lower()
    return isinstance(exc, oom_types) or any(words in text for words in _HOST_OOM)


# A sticky CUDA error poisons the process's CUDA context: every later CUDA call fails too.
# torch 2.8+ raises torch.AcceleratorError; before, a RuntimeError that says so.
_CUDA_ERROR = ("cuda error", "device-side assert", "illegal memory access",
               "unspecified launch failure")


def is_cuda_error(exc: BaseException) -> bool:
    """A CUDA error (check :func:`is_oom` first: "CUDA error: out of memory" is an oom)."""
    import torch

    accelerator_error = getattr(torch, "AcceleratorError", None)
    text = str(exc).lower()
    return (accelerator_error is not None and isinstance(exc, accelerator_error)) or any(
        words in text for words in _CUDA_ERROR)


def cuda_failure(result: TrialResult, where: str, exc: BaseException) -> TrialResult:
    """A cuda_error record. Its message is one line, the one that names the error (CUDA
    appends lines of advice); the whole text goes to stderr, which the runner keeps as the
    record's stderr_tail."""
    import sys
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.stderr.flush()
    lines = [line.strip() for line in describe_error(exc).splitlines() if line.strip()]
    line = next((ln for ln in lines if any(w in ln.lower() for w in _CUDA_ERROR)), lines[0])
    if line != lines[0]:  # a wrapper's message (a compile error, say) names it further down
        line = f"{type(exc).__name__}: {line}"
    return fail(result, Status.CUDA_ERROR, f"{where}{line}"[:300])


def describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text[:4000]
