"""The one exception type that means "the user asked for something we cannot do"."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: the CLI prints the message on one line and exits non-zero.

    The message names the problem and, where there is one, the fix.
    """
