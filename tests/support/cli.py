"""The command line run in this process (click's ``CliRunner``), as the CLI tests run it: a small
search's arguments, the call, the one-line error every bad input must give, and finished studies
to read (the fake runner behind them: the ``fake_cli`` fixtures of tests/conftest.py)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from tuner.cli.app import main

STUDY = "resnet18-cpu"  # the study search_args makes
OTHER = "other"  # a second study, for compare


def search_args(tmp_path, *extra: str, **options: str | None) -> list[str]:
    """``search`` on a 4-config space: (eager, inductor default) x batch sizes 1, 8.
    ``options`` replace those defaults (``backend=None`` drops the option)."""
    chosen = {"model": "resnet18", "device": "cpu", "backend": "eager,inductor",
              "mode": "default", "batch_sizes": "1,8", "studies_dir": str(tmp_path), **options}
    args = ["search"]
    for name, value in chosen.items():
        if value is not None:
            args += [f"--{name.replace('_', '-')}", value]
    return args + list(extra)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *words: str) -> None:
    assert result.exit_code != 0 and result.exit_code != 130
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def two_studies(root: Path) -> Path:
    """``root`` with two finished studies (fake runner), STUDY and OTHER, over batch sizes 1, 8,
    their finalists confirmed once."""
    for options in ({}, {"name": OTHER}):
        result = invoke(*search_args(root, "--confirm", "1", **options))
        assert result.exit_code == 0, result.stderr
    return root


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under ``root`` and its SHA-256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def missing(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(importlib.util.find_spec(module) is not None,
                              reason=f"{module} is installed here")
