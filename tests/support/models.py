"""Tiny model factories for tests (``--model tests.support.models:NAME``). Contract: see
tuner.workload."""

from __future__ import annotations

import os
import sys
import time

import torch
from torch import nn


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.head(x)


def tiny_cnn(batch_size: int):
    return TinyCNN(), torch.randn(batch_size, 3, 16, 16)


class Block(nn.Module):
    """A transformer-like block: a residual MLP behind a layer norm."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class TinyStack(nn.Module):
    """An input layer, three identical Blocks in a ModuleList, a head: the repeated blocks a
    regional compile compiles once and reuses."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def three_blocks(batch_size: int):
    return TinyStack(), torch.randn(batch_size, 5, 8)


def raises(batch_size: int):
    raise RuntimeError("this factory is broken on purpose")


def returns_wrong_thing(batch_size: int):
    return "not a model"


class _Aborts(nn.Module):
    def forward(self, x):
        print("tiny model: about to abort", file=sys.stderr, flush=True)
        os.abort()


def aborts(batch_size: int):
    return _Aborts(), torch.randn(batch_size, 4)


class _Sleeps(nn.Module):
    def forward(self, x):
        time.sleep(600)
        return x


def sleeps(batch_size: int):
    return _Sleeps(), torch.randn(batch_size, 4)


class _SpawnsAndHangs(nn.Module):
    """Starts a child process (as inductor's compile workers are), writes its pid to the file
    named by TUNER_TEST_CHILD_PID_FILE, then hangs."""

    def forward(self, x):
        import subprocess

        child = subprocess.Popen(["sleep", "600"])
        with open(os.environ["TUNER_TEST_CHILD_PID_FILE"], "w") as f:
            f.write(str(child.pid))
        time.sleep(600)
        return x


def spawns_and_hangs(batch_size: int):
    return _SpawnsAndHangs(), torch.randn(batch_size, 4)


class _DiffersWhenCompiled(nn.Module):
    """Returns x + 1 when traced by dynamo, x in eager: compiled output is wrong."""

    def forward(self, x):
        if torch.compiler.is_compiling():
            return x + 1.0
        return x * 1.0


def differs_when_compiled(batch_size: int):
    return _DiffersWhenCompiled(), torch.randn(batch_size, 4)


class _GraphBreak(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        x = self.a(x)
        torch._dynamo.graph_break()
        return self.b(x)


def graph_break(batch_size: int):
    return _GraphBreak(), torch.randn(batch_size, 4)


FAILING_BACKEND = "tuner_fails_TESTING_ONLY"


def _failing_backend(gm, example_inputs):
    raise RuntimeError("this backend is broken on purpose")


def falls_back_to_eager(batch_size: int):
    """TinyCNN, for a backend that always fails (``FAILING_BACKEND``) under
    ``suppress_errors``: dynamo swallows the error and every call runs eager."""
    from torch._dynamo.backends.registry import list_backends, register_backend

    if FAILING_BACKEND not in list_backends(exclude_tags=()):
        register_backend(_failing_backend, name=FAILING_BACKEND)
    torch._dynamo.config.suppress_errors = True
    return tiny_cnn(batch_size)


class _SlowInEager(TinyCNN):
    """tiny_cnn that sleeps 200 ms per call in eager only (dynamo traces the branch away): its
    compiled configs are reliably faster than eager, so they are finalists and recommended.
    The margin is wide: on the 2-core CI box, running two test workers, the compiled config of
    this model once measured 57 ms a call (2026-11-30; why, not known)."""

    def forward(self, x):
        if not torch.compiler.is_compiling():
            time.sleep(0.2)
        return super().forward(x)


def slow_in_eager(batch_size: int):
    return _SlowInEager(), torch.randn(batch_size, 3, 16, 16)


# What CUDA's sticky errors say (torch appends CUDA's advice as more lines).
CUDA_ASSERT_TEXT = ("CUDA error: device-side assert triggered\n"
                    "CUDA kernel errors might be asynchronously reported at some other API call, "
                    "so the stacktrace below might be incorrect.\n"
                    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")


class _CudaErrorAtBatch2(TinyCNN):
    """tiny_cnn that raises what a device-side assert raises, on any device, at batch size 2."""

    def forward(self, x):
        if x.shape[0] == 2:
            raise RuntimeError(CUDA_ASSERT_TEXT)
        return super().forward(x)


def cuda_error_at_batch_2(batch_size: int):
    return _CudaErrorAtBatch2(), torch.randn(batch_size, 3, 16, 16)


class _FailsWhenMoved(TinyCNN):
    """tiny_cnn whose ``to`` raises ``text`` when asked for ``dtype`` (on any device)."""

    def __init__(self, dtype: torch.dtype, text: str) -> None:
        super().__init__()
        self.fail_dtype, self.text = dtype, text

    def to(self, *args, **kwargs):
        if kwargs.get("dtype") == self.fail_dtype:
            raise RuntimeError(self.text)
        return super().to(*args, **kwargs)


def cuda_error_when_moved(batch_size: int):
    """Moving it to the device in float32 raises what a device-side assert raises."""
    return _FailsWhenMoved(torch.float32, CUDA_ASSERT_TEXT), torch.randn(batch_size, 3, 16, 16)


def cuda_error_when_cast(batch_size: int):
    """Casting it to bfloat16 raises what a device-side assert raises."""
    return _FailsWhenMoved(torch.bfloat16, CUDA_ASSERT_TEXT), torch.randn(batch_size, 3, 16, 16)


def oom_when_cast(batch_size: int):
    """Casting it to bfloat16 raises what the CUDA allocator raises when the device is full."""
    return (_FailsWhenMoved(torch.bfloat16, "CUDA out of memory. Tried to allocate 2.00 GiB"),
            torch.randn(batch_size, 3, 16, 16))


def reports_visible_gpus(batch_size: int):
    """Raises, naming the GPUs the trial process was shown: the record's message carries what
    this process saw back to the parent."""
    raise RuntimeError(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}")


# -- real faults, for the GPU tests: each only at batch size 2 -----------------------------------

class _OomAtBatch2(TinyCNN):
    def forward(self, x):
        if x.shape[0] == 2:  # 1 PiB: more than any GPU has
            torch.empty(2**50, dtype=torch.uint8, device=x.device)
        return super().forward(x)


def oom_at_batch_2(batch_size: int):
    return _OomAtBatch2(), torch.randn(batch_size, 3, 16, 16)


class _DeviceAssertAtBatch2(TinyCNN):
    def forward(self, x):
        y = super().forward(x)
        if x.shape[0] == 2:  # index 10**6 of 4 columns: CUDA's gather kernel asserts
            index = torch.full((2, 1), 10**6, dtype=torch.long, device=x.device)
            y = torch.gather(y, 1, index)
        return y


def device_assert_at_batch_2(batch_size: int):
    return _DeviceAssertAtBatch2(), torch.randn(batch_size, 3, 16, 16)


class _CudaErrorFromCall10(TinyCNN):
    """tiny_cnn that raises what a device-side assert raises from its 10th call on: after the
    eager reference, while the trial warms up or measures."""

    calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls >= 10:
            raise RuntimeError(CUDA_ASSERT_TEXT)
        return super().forward(x)


def cuda_error_from_call_10(batch_size: int):
    return _CudaErrorFromCall10(), torch.randn(batch_size, 3, 16, 16)


def _compiles_for_ever(graph) -> None:
    """An inductor post-grad pass that never ends: inductor runs it while it compiles."""
    time.sleep(600)


def slow_to_compile(batch_size: int):
    """tiny_cnn whose inductor compile hangs (a post-grad pass that sleeps; eager is as fast as
    ever), with a child process, as inductor's compile workers are, whose pid goes to the file
    named by TUNER_TEST_CHILD_PID_FILE (a line each). The child is started here, not in the pass, so that it
    exists whenever the compile budget runs out."""
    import subprocess

    import torch._inductor.config as inductor_config

    child = subprocess.Popen(["sleep", "600"])
    with open(os.environ["TUNER_TEST_CHILD_PID_FILE"], "a") as f:  # a line per process
        f.write(f"{child.pid}\n")
    inductor_config.post_grad_custom_post_pass = _compiles_for_ever
    return tiny_cnn(batch_size)


class _DiffersAtOtherShapes(nn.Module):
    """Right at the batch size it is built at (2), wrong by +100 when compiled at any other:
    only the shape schedule's recompiles are wrong."""

    def forward(self, x):
        if torch.compiler.is_compiling() and x.shape[0] != 2:
            return x + 100.0
        return x * 1.0


def differs_at_other_shapes(batch_size: int):
    return _DiffersAtOtherShapes(), torch.randn(batch_size, 4)


class _InfWhenCompiled(nn.Module):
    """Its first column is +inf when compiled, finite in eager."""

    def forward(self, x):
        out = x * 1.0
        if torch.compiler.is_compiling():
            out = torch.cat([torch.full_like(out[:, :1], float("inf")), out[:, 1:]], dim=1)
        return out


def inf_when_compiled(batch_size: int):
    return _InfWhenCompiled(), torch.randn(batch_size, 4)


class _Output(dict):
    """A dict subclass torch's pytree does not know (as an unregistered ModelOutput is)."""


class _ReturnsUnknownType(nn.Module):
    def forward(self, x):
        return _Output(logits=x * 2.0)


def returns_unknown_type(batch_size: int):
    return _ReturnsUnknownType(), torch.randn(batch_size, 4)


class _Random(nn.Module):
    def forward(self, x):
        return nn.functional.dropout(x, p=0.5, training=True)


def random_in_eager(batch_size: int):
    return _Random(), torch.randn(batch_size, 64)


def needs_two_arguments(batch_size: int, seq_len: int):
    return tiny_cnn(batch_size)


def takes_no_argument():
    return tiny_cnn(1)


class _ShortSequencesOnly(nn.Module):
    """Raises, in eager as compiled, for a sequence longer than 64 (as a model past its
    position embeddings does)."""

    def forward(self, x):
        if x.shape[1] > 64:
            raise ValueError(f"sequence length {x.shape[1]} is more than 64")
        return x * 2.0


def short_sequences_only(batch_size: int, seq_len: int = 32):
    return _ShortSequencesOnly(), torch.randn(batch_size, seq_len)


def meta_weights(batch_size: int):
    with torch.device("meta"):
        model = TinyCNN()
    return model, torch.randn(batch_size, 3, 16, 16)


def meta_inputs(batch_size: int):
    return TinyCNN(), torch.empty(batch_size, 3, 16, 16, device="meta")


def batch_size_keyword_only(*, batch_size: int = 1):
    return tiny_cnn(batch_size)


def seq_len_keyword_only(batch_size: int, *, seq_len: int = 16):
    return short_sequences_only(batch_size, seq_len)


def needs_a_keyword(batch_size: int, *, device: str):
    return tiny_cnn(batch_size)


def exits(batch_size: int):
    sys.exit(3)


def touches_cuda(batch_size: int):
    """Asks for a CUDA tensor when called: on a machine without CUDA (or with --device cpu) this
    raises torch's "Torch not compiled with CUDA enabled" or "no NVIDIA driver"."""
    return TinyCNN(), torch.zeros(batch_size, 3, 16, 16, device="cuda")
