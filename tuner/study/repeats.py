"""How often each finalist is measured again (``--confirm``, ``tuner confirm --repeats``): a
fixed count, or ``auto``, which stops once a finalist's 95 % interval is narrow."""

from __future__ import annotations

import dataclasses
import statistics

from tuner.data.noise import interval
from tuner.errors import UserError

# More re-measurements than this are a typo: each is a whole trial, and every one rewrites the
# finalist's stored list.
MAX_REPEATS = 100

@dataclasses.dataclass(frozen=True)
class Repeats:
    """How often each finalist is measured again: ``fixed`` times, or (``fixed`` None, the
    default ``auto``) at least ``least`` and at most ``most`` times, stopping as soon as its 95 %
    interval is narrower than ``width`` times its p50."""

    fixed: int | None = None
    least: int = 2
    most: int = 6
    width: float = 0.05

    @classmethod
    def parse(cls, text: str | int, option: str = "--confirm") -> Repeats:
        """``auto`` or a whole number of repeats; ``option``, the option that gave it, is what
        an error names (``tuner search --confirm``, ``tuner confirm --repeats``)."""
        if isinstance(text, int) or str(text).strip().isdigit():
            if int(text) > MAX_REPEATS:
                raise UserError(f"{option} {int(text)}: at most {MAX_REPEATS} re-measurements a "
                                "finalist (each is a whole trial in a fresh process; auto stops "
                                "once the interval is narrow)")
            return cls(fixed=int(text))
        if str(text).strip().lower() == "auto":
            return cls()
        raise UserError(f"{option} {text!r}: give auto or a whole number, e.g. {option} 3")

    @property
    def any(self) -> bool:
        return self.fixed != 0

    @property
    def each(self) -> int:
        """The re-measurements a finalist gets: ``fixed``, else auto's fewest."""
        return self.least if self.fixed is None else self.fixed

    def describe(self) -> str:
        return (f"{self.fixed}" if self.fixed is not None else
                f"{self.least} to {self.most} each, until the 95% interval is within "
                f"{self.width:.0%} of the p50")

    def more(self, p50s: list[float], records: int) -> bool:
        """Whether a finalist with these p50s (its trial's and its repeats') and ``records``
        re-measurements (failed ones included) needs another."""
        if self.fixed is not None:
            return records < self.fixed
        if records < self.least:
            return True
        return records < self.most and not narrow(p50s, self.width)


def narrow(p50s: list[float], width: float) -> bool:
    """Whether the 95 % interval of ``p50s`` spans less than ``width`` of their median."""
    bounds = interval(p50s)
    return bounds is not None and (bounds[1] - bounds[0]) < width * statistics.median(p50s)
