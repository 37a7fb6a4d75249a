"""What else shares this host's CPU or GPUs as a search starts, in words: timings of launch-bound
configs depend on it (every row records it too: host_other_cpu_cores)."""

from __future__ import annotations

import os
import socket

from optuna.trial import TrialState

from tuner.study.fronts import Fronts
from tuner.study.storage import OWNER_ATTR
from tuner.words import plural


def host_warnings(fronts: Fronts, device: str, gpus: str | None) -> list[str]:
    """What to say of the study's trials running in other processes on this host (on CUDA,
    those on the same ``gpus``: CUDA_VISIBLE_DEVICES), and of a busy host; nothing where
    neither."""
    said: list[str] = []
    host = socket.gethostname()
    owners = [t.frozen.user_attrs.get(OWNER_ATTR) or {}
              for t in fronts.trials(states=(TrialState.RUNNING,))]
    here = [o for o in owners if o.get("host") == host]
    if here and not device.startswith("cuda"):
        said.append(f"{plural(len(here), 'trial')} of this study "
                    f"{'runs' if len(here) == 1 else 'run'} in other processes "
                    "on this host: they share its CPU cores with this search's trials")
    # On CUDA a fleet's workers each see one other GPU; a search beside another on the same
    # GPUs (the same command started twice) times its trials against the other's.
    beside = [o for o in here if "gpus" in o and o["gpus"] == gpus]
    if beside and device.startswith("cuda"):
        same = f"same GPU{'s' if gpus is None or ',' in gpus else ''}"
        said.append(f"{plural(len(beside), 'trial')} of this study "
                    f"{'runs' if len(beside) == 1 else 'run'} in other "
                    f"processes on this host's {same} "
                    f"(CUDA_VISIBLE_DEVICES={gpus or 'unset'}): their timings and this "
                    "search's disturb each other")
    try:
        load = os.getloadavg()[0]
    except OSError:
        return said
    if load >= 1.0:
        said.append(f"the host is busy (load average {load:.1f} on {os.cpu_count()} "
                    "cores): latency of launch-bound configs will be noisy; rows say "
                    "how much CPU other processes took while they measured")
    return said
