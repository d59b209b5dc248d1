"""Fixtures of the HTTP API tests; the helpers they use are in ``web_support.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import httpx
import pytest

from web.web_support import LiveServer, api_client, start_live_server


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rp.db'}"


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    async with api_client(db_url) as pair:
        yield pair


@pytest.fixture
def live_server(db_url: str) -> Iterator[LiveServer]:
    with start_live_server(db_url) as server:
        yield server
