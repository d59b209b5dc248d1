"""Helpers importable from any test module (conftest fixtures cannot be imported directly)."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from typing import Iterator
from urllib.parse import quote

import pytest


def postgres_url_or_skip() -> str:
    url = os.environ.get("RP_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("RP_TEST_POSTGRES_URL must be set under CI: PostgreSQL tests may not be skipped")
        pytest.skip("RP_TEST_POSTGRES_URL not set")
    return url


def _schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


@contextmanager
def fresh_pg_schema() -> Iterator[str]:
    import psycopg

    base = postgres_url_or_skip()
    schema = "t_" + secrets.token_hex(6)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _schema_url(base, schema)
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
