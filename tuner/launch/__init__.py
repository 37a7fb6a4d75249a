"""Starting trial processes: one fresh process per trial in its own process group, a deadline,
how it ended (:mod:`~tuner.launch.runner`); the next trial's process started early
(:mod:`~tuner.launch.prestart`); which GPU a process sees (:mod:`~tuner.launch.gpus`); Ctrl-C
and SIGTERM while a run is in the foreground (:mod:`~tuner.launch.signals`)."""


