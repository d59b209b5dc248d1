"""Pytest fixtures around the fake OpenAI-compatible server, for any test package to reuse.

Import them into a ``conftest.py``: ``from roleplay.testing.pytest_fixtures import fake_openai,
fake_deepseek  # noqa: F401``. Kept apart from ``fake_openai`` so that module needs no pytest.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from roleplay.testing.fake_openai import FakeOpenAI, serve_fake_openai


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """An OpenAI-flavoured fake server with an empty, strict script."""
    with serve_fake_openai(flavor="openai", strict=True) as fake:
        yield fake


@pytest.fixture
def fake_deepseek() -> Iterator[FakeOpenAI]:
    """A DeepSeek-flavoured fake server (reasoning_content checks on), empty strict script."""
    with serve_fake_openai(flavor="deepseek", strict=True) as fake:
        yield fake
