"""The checks a run makes before it measures, shared by a search, a worker and a confirm run:
a --timeout a trial can finish within, a compile budget below it, factory models imported
from the current folder, and --study given as a name."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tuner.domain.records import TrialProtocol
from tuner.errors import UserError


def warn_of_compile_budget(say: Callable[[str], None], compile_timeout_s: float | None,
                           timeout_s: float, whose: str, advice: str) -> None:
    """A warning where the compile budget is not below the trial's --timeout: the budget then
    never ends a compile, and its mode is never skipped. ``whose``: after the budget, what
    set it (" (study 'x')" for a worker)."""
    if compile_timeout_s is not None and compile_timeout_s >= timeout_s:
        say(f"warning: --compile-timeout {compile_timeout_s:g} s{whose} is not below --timeout "
            f"{timeout_s:g} s: a long compile ends as timeout, not compile_timeout, so its "
            f"mode's other configs at that batch size are each tried up to --timeout; {advice}")


def import_from_here() -> None:
    """Factory models import from the current folder, as they do in the trial processes
    (``python -m`` started here puts this folder on their path)."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))


def check_timeout(timeout_s: float, protocol: TrialProtocol, whose: str) -> None:
    """A --timeout no trial can finish within is refused: every trial would end as a timeout,
    which reads as a model that hangs. Each trial times its steady state twice (per request,
    then back to back), each for the protocol's seconds, after building and compiling."""
    floor = 2 * min(protocol.min_seconds, protocol.max_seconds)
    if timeout_s <= floor:
        raise UserError(f"--timeout {timeout_s:g} s leaves no trial time to finish: each trial "
                        f"times its steady state twice, {floor / 2:g} s each{whose}, after "
                        "building and compiling; give more, e.g. --timeout 30m")


def check_study_option(name: str) -> None:
    """``--study`` takes a study's name: a path gets the name and --studies-dir it stands for."""
    from tuner.domain.layout import check_name

    try:
        check_name(name)
    except UserError:
        if "/" not in name:
            raise UserError(f"--study {name!r} is not a folder name: give a study's name "
                            "(letters, digits, '_', '.' and '-')") from None
        path = Path(name)
        folder = path.parent if path.is_file() else path
        raise UserError(f"--study {name!r} is not a folder name: --study takes a study's name; "
                        f"for {folder} give --study {folder.name} --studies-dir "
                        f"{folder.parent}") from None
