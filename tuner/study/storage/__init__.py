"""Opening a study's Optuna storage: the embedded SQLite file (several processes on one host)
or any storage URL (PostgreSQL, for many hosts); the study's own attributes; refusing to resume
with another workload or space.

Optuna's storage is the source of truth while searching: each trial's record lives in its user
attributes (:mod:`~tuner.study.storage.attrs`), so a study resumes from any host that can reach
the storage. A search opens its study (:mod:`~tuner.study.storage.opening`) in its folder
(:mod:`~tuner.study.storage.folder`), checked against what the study was made with
(:mod:`~tuner.study.storage.resume`); a worker joins one (:mod:`~tuner.study.storage.join`).
Both make the storage itself in :mod:`~tuner.study.storage.engine`, look at a SQLite file
before they open it (:mod:`~tuner.study.storage.sqlite_file`), and a storage that fails is told
in one line by :mod:`~tuner.study.storage.errors`.
"""

from tuner.study.storage.attrs import (
    CONFIG_ATTR,
    DUPLICATE_ATTR,
    INTERRUPTED_ATTR,
    KEY_ATTR,
    LIMITS_ATTR,
    MESSAGE_ATTR,
    OPTION_DEFAULTS_ATTR,
    OWNER_ATTR,
    PROTOCOL_ATTR,
    REQUEUED_ATTR,
    RESULT_ATTR,
    RETRY_ATTR,
    SAMPLER_ATTR,
    SPACE_ATTR,
    START_FROM_ATTR,
    STARTED_FROM_ATTR,
    STATUS_ATTR,
    WORKLOAD_ATTR,
)
from tuner.study.storage.engine import (
    HEARTBEAT_GRACE_S,
    HEARTBEAT_INTERVAL_S,
    import_ahead,
    make_storage,
)
from tuner.study.storage.errors import storage_failure
from tuner.study.storage.folder import ensure_folder
from tuner.study.storage.join import join_spec
from tuner.study.storage.opening import open_study
from tuner.study.storage.resume import (
    resumed_option_defaults,
    resumed_protocol,
    resumed_space,
    resumed_spec,
)

__all__ = [
    "CONFIG_ATTR", "DUPLICATE_ATTR", "HEARTBEAT_GRACE_S", "HEARTBEAT_INTERVAL_S",
    "INTERRUPTED_ATTR", "KEY_ATTR", "LIMITS_ATTR", "MESSAGE_ATTR", "OPTION_DEFAULTS_ATTR",
    "OWNER_ATTR", "PROTOCOL_ATTR", "REQUEUED_ATTR", "RESULT_ATTR", "RETRY_ATTR", "SAMPLER_ATTR",
    "SPACE_ATTR", "START_FROM_ATTR", "STARTED_FROM_ATTR", "STATUS_ATTR",
    "WORKLOAD_ATTR",
    "ensure_folder", "import_ahead", "join_spec", "make_storage", "open_study",
    "resumed_option_defaults", "resumed_protocol", "resumed_space", "resumed_spec", "storage_failure",
]
