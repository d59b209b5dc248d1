"""Fixtures shared by every test package.

``shared_dir`` / ``corpus_dir``: the community corpus beside the project. Compatibility tests
skip cleanly when ``../shared`` is absent, and never copy it into the project.

``postgres_url``: PostgreSQL tests run against ``RP_TEST_POSTGRES_URL``. Locally they skip when it
is unset; under CI (``CI=true``) a missing URL is a failure, because CI must run them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def postgres_url_or_skip() -> str:
    url = os.environ.get("RP_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("RP_TEST_POSTGRES_URL must be set under CI: PostgreSQL tests may not be skipped")
        pytest.skip("RP_TEST_POSTGRES_URL not set")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return postgres_url_or_skip()
