"""Fixtures of the MVU adapter tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def mvu_corpus(corpus_dir: Path) -> Path:
    if not (corpus_dir / "mvu").is_dir():
        pytest.skip("corpus has no mvu/ directory")
    return corpus_dir
