"""Fixtures shared by every test package.

``shared_dir`` / ``corpus_dir``: the community corpus beside the project. Compatibility tests
skip cleanly when ``../shared`` is absent, and never copy it into the project.

``store_url`` / ``make_store`` / ``store``: every test that takes them runs twice, on SQLite and on
PostgreSQL (a fresh schema per test, dropped afterwards). ``pg_url``: PostgreSQL only.

``postgres_url``: PostgreSQL tests run against ``RP_TEST_POSTGRES_URL``. Locally they skip when it
is unset; under CI (``CI=true``) a missing URL is a failure, because CI must run them.

``english_locale`` (autouse): the system locale reads as English in every test.
"""

from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

import pytest

from roleplay.clock import CountingIds, FixedClock
from roleplay.harness.store import EventStore, open_store
from tests_support import fresh_pg_schema, postgres_url_or_skip

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = PROJECT_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is absent: compatibility corpus not available")
    return SHARED_DIR


@pytest.fixture(scope="session")
def corpus_dir(shared_dir: Path) -> Path:
    corpus = shared_dir / "corpus"
    if not corpus.is_dir():
        pytest.skip("../shared/corpus is absent")
    return corpus


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return postgres_url_or_skip()


@pytest.fixture(autouse=True)
def english_locale(monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-in defaults follow the system locale while the ``language`` setting is unset;
    pin it, so results do not depend on the machine's locale. Tests of other languages set the
    setting or pass ``language=``."""
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")


@pytest.fixture(autouse=True)
def no_stored_model_keys() -> Iterator[None]:
    """A CLI test resolving its home registers that home's stored model keys process-wide
    (``use_key_file``); forget them after each test, so none leaks into the next."""
    yield
    from roleplay.harness.models.routes import use_key_file

    use_key_file(None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
