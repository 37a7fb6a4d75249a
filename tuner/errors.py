"""The one exception type that means "the user asked for something we cannot do"."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the CLI prints the message on one line and exits non-zero.

    The message names the problem and, where there is one, the fix. ``about``: the command-line
    options whose values the check found wrong (``--mode``), so that the CLI can say where a
    value came from when the user gave it another way (a ``--space`` file), rather than guess it
    from the message.
    """

    about: tuple[str, ...] = ()

    def __init__(self, message: str, *, about: str | tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.about = (about,) if isinstance(about, str) else tuple(about)
