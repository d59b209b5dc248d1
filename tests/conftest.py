"""Fixtures shared by every test package.

``shared_dir`` / ``corpus_dir``: the community corpus beside the project. Compatibility tests
skip cleanly when ``../shared`` is absent, and never copy it into the project.

``postgres_url``: PostgreSQL tests run against ``RP_TEST_POSTGRES_URL``. Locally they skip when it
is unset; under CI (``CI=true``) a missing URL is a failure, because CI must run them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests_support import postgres_url_or_skip

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
