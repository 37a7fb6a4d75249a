"""Tiny model factories for tests (``--model tests.models:NAME``). Contract: see tuner.workload."""

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
    """tiny_cnn that sleeps 50 ms per call in eager only (dynamo traces the branch away): its
    compiled configs are reliably faster than eager, so they are finalists."""

    def forward(self, x):
        if not torch.compiler.is_compiling():
            time.sleep(0.05)
        return super().forward(x)


def slow_in_eager(batch_size: int):
    return _SlowInEager(), torch.randn(batch_size, 3, 16, 16)
