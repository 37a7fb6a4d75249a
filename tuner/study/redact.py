"""Secrets of a storage URL kept out of every message, log and file."""

from __future__ import annotations

import re


def redact(url: str) -> str:
    """Hide the password of a storage URL: ``postgresql://u:***@host/db`` (and ``password=``
    in its query). A password with an unescaped ``@`` (SQLAlchemy ends it at the first one)
    is hidden up to the last ``@``."""
    from sqlalchemy.engine import make_url

    secret = password_of(url)
    if secret is None:  # nothing before an @ to hide: the URL as given, not re-encoded
        text = url      # (SQLAlchemy writes sqlite:///:memory: as sqlite:///%3Amemory%3A)
    elif "@" in secret:
        text = _mask_userinfo(url)
    else:
        try:
            text = make_url(url).render_as_string(hide_password=True)
        except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask what looks secret
            text = _mask_userinfo(url)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def password_of(url: str) -> str | None:
    """The password of ``scheme://user:password@host...``, read up to the last ``@`` before
    the query: a password may hold ``@``, ``:`` or ``/`` unescaped."""
    match = re.match(r"[^:/?#\s]+://([^:/@?#\s]*):(.+)@", url.split("?", 1)[0])
    return match.group(2) if match else None


def scrub(text: str, url: str) -> str:
    """``text`` (an error message, say) with the secrets of the storage ``url`` masked."""
    from urllib.parse import unquote

    text = text.replace(url, redact(url))
    password = password_of(url)
    for raw in ([] if password is None else [password]) + [
            v for _, v in re.findall(r"(?i)([a-z_]*password)=([^&;\s]+)", url)]:
        for secret in {raw, unquote(raw)}:
            # Where it stands alone: a password "p" replaced inside every word made "port 1
            # failed" read "***ort 1 failed". A letter or digit beside it would make it part of
            # a longer word, which is not this password.
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    text = _mask_userinfo(text)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def _mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` (or ``user:secret@host``) → ``...user:***@host``."""
    if "://" in text:  # up to the last @ of the URL: a password may hold one
        return re.sub(r"(://[^:/@\s]*:)\S+@", r"\1***@", text)
    return re.sub(r"^([^:/@\s]*:)\S+@", r"\1***@", text)


_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&;\s])[a-z_]*password=)[^&;\s]*")
