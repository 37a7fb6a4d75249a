"""Print two lists of this process's cores for `taskset -c`, the first half and the second half
in core order, split so that hyperthread siblings stay in one list."""

import os
from pathlib import Path

allowed = sorted(os.sched_getaffinity(0))
groups: list[list[int]] = []
seen: set[int] = set()
for cpu in allowed:
    if cpu in seen:
        continue
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text()
        sib = []
        for part in text.strip().split(","):
            lo, _, hi = part.partition("-")
            sib += range(int(lo), int(hi or lo) + 1)
    except OSError:
        sib = [cpu]
    group = [c for c in sib if c in allowed]
    seen.update(group)
    groups.append(group)
half = len(groups) // 2
first = sorted(c for g in groups[:half] for c in g)
second = sorted(c for g in groups[half:] for c in g)
print(",".join(map(str, first)), ",".join(map(str, second)))
