"""The PostgreSQL server the postgres tests use: 127.0.0.1:5432 (trust auth, database ``test``)
or TUNER_TEST_POSTGRES_URL, and why they skip where there is none."""

from __future__ import annotations

import os

URL = os.environ.get("TUNER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
PASSWORD = "s3cret-Pw9"  # trust auth ignores it; it must show up nowhere


def _unavailable() -> str | None:
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 is not installed: pip install -e '.[postgres]'"
    import sqlalchemy
    from sqlalchemy.engine import make_url

    try:
        engine = sqlalchemy.create_engine(make_url(URL).set(drivername="postgresql+psycopg2"),
                                          connect_args={"connect_timeout": 2})
        with engine.connect():
            pass
        engine.dispose()
    except sqlalchemy.exc.SQLAlchemyError as exc:
        first = str(exc.orig if hasattr(exc, "orig") else exc).strip().splitlines()[0]
        return f"no PostgreSQL server at {URL.split('@')[-1]}: {first}"
    return None


REASON = _unavailable()


def with_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=PASSWORD).render_as_string(hide_password=False)
