"""The names of the tuner's attributes in the Optuna storage: each trial's (its record lives in
them) and the study's (what defines it)."""

# User attributes of each trial: its config's key (set when claimed, or when queued), the
# config, the full record, its status, the process that owns it while it runs, and why it ended
# without a record.
KEY_ATTR = "tuner.key"
CONFIG_ATTR = "tuner.config"
RESULT_ATTR = "tuner.result"
STATUS_ATTR = "tuner.status"
MESSAGE_ATTR = "tuner.message"  # why a trial failed, cut to what optuna-dashboard shows whole
OWNER_ATTR = "tuner.owner"
DUPLICATE_ATTR = "tuner.duplicate_of"
INTERRUPTED_ATTR = "tuner.interrupted"
RETRY_ATTR = "tuner.retry_of"  # on a queued trial: the dead trial whose config it measures again
# On a queued baseline given up unrun (failed), its config queued again behind a baseline before
# it that was queued anew (tuner.study.baselines)
REQUEUED_ATTR = "tuner.requeued"
# On a queued trial: the study (its name) whose finalists or front it comes from
# (tuner search --start-from): the row's started_from
STARTED_FROM_ATTR = "tuner.started_from"
# User attributes of the study: what defines it.
WORKLOAD_ATTR, SPACE_ATTR, PROTOCOL_ATTR = "tuner.workload", "tuner.space", "tuner.protocol"
# ... and how it samples: the sampler's kind (tuner.study.sampler), the limits its trials'
# constraints were set under (tuner.data.select.Constraints, as a dict).
SAMPLER_ATTR, LIMITS_ATTR = "tuner.sampler", "tuner.limits"
# ... and the studies it started from, with the configs they gave (tuner.study.start_plan.StartFrom,
# as a dict); a study made without --start-from has none.
START_FROM_ATTR = "tuner.start_from"
# ... and what its configs are named against: the value each searched inductor option takes in
# each searched mode where a config leaves it unset (tuner.domain.naming.OptionDefaults, as a
# dict), stored by the first run of tuner 0.3.0 or later; the files carry it as option_defaults.
OPTION_DEFAULTS_ATTR = "tuner.option_defaults"
