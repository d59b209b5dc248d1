"""Store fixtures: every store test runs once on SQLite and once on PostgreSQL.

Each PostgreSQL test gets its own schema (``search_path`` set through the URL's ``options``), so
tests never see each other's rows and the schema is dropped afterwards.
"""

from __future__ import annotations

import secrets
from contextlib import contextmanager
from typing import AsyncIterator, Callable, Iterator
from urllib.parse import quote

import pytest

from roleplay.clock import CountingIds, FixedClock
from roleplay.harness.store import EventStore, open_store
from tests_support import postgres_url_or_skip


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rp.db'}"
        return
    with fresh_pg_schema() as url:
        yield url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema, for tests of PostgreSQL-only behaviour."""
    with fresh_pg_schema() as url:
        yield url


@pytest.fixture
def make_store(store_url: str) -> Callable[..., EventStore]:
    def make(**kw) -> EventStore:  # type: ignore[no-untyped-def]
        kw.setdefault("clock", FixedClock())
        kw.setdefault("ids", CountingIds())
        return open_store(store_url, **kw)

    return make


@pytest.fixture
async def store(make_store: Callable[..., EventStore]) -> AsyncIterator[EventStore]:
    s = make_store()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()
