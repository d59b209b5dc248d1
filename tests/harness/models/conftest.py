"""Fixtures for the model-layer tests: the fake server (shared with other packages) and a sleep
that records instead of waiting, so retry tests count backoffs without spending time."""

from __future__ import annotations

import pytest

from roleplay.testing.pytest_fixtures import fake_deepseek, fake_openai  # noqa: F401


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class RecordingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()
