"""A storage URL's password is hidden whole in every message, whatever it holds."""

from __future__ import annotations

import pytest

from tuner.study.redact import password_of, redact, scrub

# The password of each URL, as the user meant it: SQLAlchemy would end it at its first @.
HELD = [
    pytest.param("postgresql://u:se cr@et@127.0.0.1/x", "se cr@et", id="space-and-at"),
    pytest.param("postgresql://u:p@ss word@127.0.0.1/x", "p@ss word", id="at-then-space"),
    pytest.param("postgresql://u:s:e c/r@t@127.0.0.1:5432/x", "s:e c/r@t", id="colon-slash"),
    pytest.param("postgresql://u:pa?s#s@127.0.0.1/x?sslmode=a@b", "pa?s#s", id="question-mark"),
    pytest.param("postgresql://u:a?b@c@127.0.0.1/x", "a?b@c", id="question-mark-and-at"),
]


@pytest.mark.parametrize("url, password", HELD)
def test_a_password_is_hidden_whole_whatever_it_holds(url, password):
    assert password_of(url) == password
    shown = redact(url)
    assert shown == url.replace(password, "***")
    said = scrub(f"cannot open {url}: password {password} was refused", url)
    assert said == f"cannot open {shown}: password *** was refused"


def test_a_password_in_the_query_is_hidden_up_to_the_next_parameter():
    assert redact("postgresql://h/x?password=se cr@et&sslmode=require") == (
        "postgresql://h/x?password=***&sslmode=require")


def test_a_url_without_a_password_stays_as_given():
    for url in ("sqlite:///:memory:", "postgresql://u@127.0.0.1:5432/x?application_name=a@b",
                "postgresql://127.0.0.1/x", "not a url"):
        assert redact(url) == url and password_of(url) is None
