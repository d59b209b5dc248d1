"""Helpers importable from any test module (conftest fixtures cannot be imported directly)."""

from __future__ import annotations

import os

import pytest


def postgres_url_or_skip() -> str:
    url = os.environ.get("RP_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("RP_TEST_POSTGRES_URL must be set under CI: PostgreSQL tests may not be skipped")
        pytest.skip("RP_TEST_POSTGRES_URL not set")
    return url
