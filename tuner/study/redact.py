"""Secrets of a storage URL kept out of every message, log and file."""

from __future__ import annotations

import re


def redact(url: str) -> str:
    """Hide the password of a storage URL: ``postgresql://u:***@host/db`` (and ``password=``
    in its query), whatever it holds: a space, ``:``, ``/``, or an unescaped ``@`` (SQLAlchemy
    ends it at the first one; it is hidden up to the last). The rest stays as given."""
    span = _password_span(url)
    text = url if span is None else f"{url[:span[0]]}***{url[span[1]:]}"
    return _QUERY_PASSWORD.sub(r"\1***", _URL_QUERY_PASSWORD.sub(r"\1***", text))


def password_of(url: str) -> str | None:
    """The password of ``scheme://user:password@host...``, read up to the last ``@`` before
    the query: a password may hold ``@``, ``:``, ``/`` or a space unescaped (and ``?`` or
    ``#``: then it ends at the first ``@`` a host follows)."""
    span = _password_span(url)
    return None if span is None else url[span[0]:span[1]]


def scrub(text: str, url: str) -> str:
    """``text`` (an error message, say) with the secrets of the storage ``url`` masked."""
    from urllib.parse import unquote

    text = text.replace(url, redact(url))
    password = password_of(url)
    for raw in ([] if password is None else [password]) + [
            v for _, v in re.findall(r"(?i)([a-z_]*password)=([^&;#]+)", url)]:
        for secret in {raw, unquote(raw)}:
            # Where it stands alone: a password "p" replaced inside every word made "port 1
            # failed" read "***ort 1 failed". A letter or digit beside it would make it part of
            # a longer word, which is not this password.
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    text = _mask_userinfo(text)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def _password_span(url: str) -> tuple[int, int] | None:
    """Where the password of ``url`` starts and ends; None where it has none."""
    head = _USER.match(url)
    if head is None:
        return None
    start = head.end()
    query = re.compile(r"[?#]").search(url, start)
    end = url.rfind("@", start, len(url) if query is None else query.start())
    if end < 0:  # no @ before the query: a password holding ? or # ends where a host follows
        host = _AT_HOST.search(url, start)
        end = -1 if host is None else host.start()
    return (start, end) if end > start else None


def _mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` (or ``user:secret@host``) → ``...user:***@host``."""
    if "://" in text:  # up to the last @ of the URL (a password may hold one), unless masked
        return re.sub(r"(://[^:/@\s]*:)(?!\*\*\*@)\S+@", r"\1***@", text)
    return re.sub(r"^([^:/@\s]*:)(?!\*\*\*@)\S+@", r"\1***@", text)


_USER = re.compile(r"[^:/?#\s]+://[^:/@?#\s]*:")  # scheme://user:
_AT_HOST = re.compile(r"@(?:\[[^\]/?#@\s]*\]|[^:/?#@\s]*)(?::\d*)?(?=[/?#]|$)")
_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&;\s])[a-z_]*password=)[^&;\s]*")
# In a URL's own query the value runs to the next parameter, spaces and all.
_URL_QUERY_PASSWORD = re.compile(r"(?i)([?&;][a-z_]*password=)[^&;#]*")
