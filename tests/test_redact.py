"""Credential redaction for URLs that are stored or shown."""

from __future__ import annotations

import pytest

from roleplay.redact import redact_url, redact_urls


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pass@host:8080/v1?token=abc&x=1", "http://***@host:8080/v1?token=***&x=***"),
        ("https://sk-live-1234@api.example.com/v1", "https://***@api.example.com/v1"),
        ("postgresql://app:pw@db:5432/rp", "postgresql://***@db:5432/rp"),
        ("https://api.deepseek.com", "https://api.deepseek.com"),
        ("http://127.0.0.1:8765/v1", "http://127.0.0.1:8765/v1"),
        ("http://host/v1?sk-abc", "http://host/v1?***"),
        ("sqlite:///home/me/rp.db", "sqlite:///home/me/rp.db"),
    ],
)
def test_userinfo_and_query_values_are_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_an_unparseable_url_shows_no_secret() -> None:
    shown = redact_url("http://user:pw@[::1/v1?token=abc")
    assert "pw" not in shown and "abc" not in shown and "user" not in shown


def test_urls_inside_text_are_masked() -> None:
    text = "Connection to http://u:p@h/v1?token=t failed (retry 'https://k@x.io/a?b=c')"
    assert redact_urls(text) == "Connection to http://***@h/v1?token=*** failed (retry 'https://***@x.io/a?b=***')"
