"""Secrets of a storage URL kept out of every message, log and file."""

from __future__ import annotations

import re


def redact(url: str) -> str:
    """Hide the password of a storage URL: ``postgresql://u:***@host/db`` (and ``password=``
    in its query)."""
    from sqlalchemy.engine import make_url

    try:
        text = make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: mask what looks secret
        text = _mask_userinfo(url)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def scrub(text: str, url: str) -> str:
    """``text`` (an error message, say) with the secrets of the storage ``url`` masked."""
    from urllib.parse import unquote

    text = text.replace(url, redact(url))
    for raw in re.findall(r"://[^:/@?#\s]*:([^@/?#\s]+)@", url) + [
            v for _, v in re.findall(r"(?i)([a-z_]*password)=([^&;\s]+)", url)]:
        for secret in {raw, unquote(raw)}:
            text = text.replace(secret, "***")
    text = _mask_userinfo(text)
    return _QUERY_PASSWORD.sub(r"\1***", text)


def _mask_userinfo(text: str) -> str:
    """``scheme://user:secret@host`` (or ``user:secret@host``) → ``...user:***@host``."""
    if "://" in text:
        return re.sub(r"(://[^:/@\s]*:)[^@\s]+@", r"\1***@", text)
    return re.sub(r"^([^:/@\s]*:)[^@\s]+@", r"\1***@", text)


_QUERY_PASSWORD = re.compile(r"(?i)((?:^|[?&;\s])[a-z_]*password=)[^&;\s]*")
