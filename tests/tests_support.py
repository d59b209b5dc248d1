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


# What ``RoleplayRuntime.create`` held before the plugin seam: state, the asset sources and the
# asset tools, without the MVU adapter, quick replies or reply options (their own tests add them).
CORE_TEST_FEATURES = (
    "rp-state",
    "rp-character-card",
    "rp-lore-book",
    "rp-persona",
    "rp-preset",
    "rp-writing-style",
    "rp-macro",
    "rp-asset-tools",
    "rp-library",
)


def core_runtime(store, **kw):  # type: ignore[no-untyped-def]
    """A runtime with :data:`CORE_TEST_FEATURES` and no third-party plugin."""
    from roleplay.features import build_runtime

    return build_runtime(store, enabled=CORE_TEST_FEATURES, entry_points=False, **kw)


async def sample_story(store, model=None, *, plus_features=(), **request):  # type: ignore[no-untyped-def]
    """A runtime on ``store`` (with ``model`` as the demo route when given) and a new story on the
    bundled sample card (``request``: more ``StoryRequest`` fields): ``(runtime, session id)``.
    ``plus_features``: features to enable on top of :data:`CORE_TEST_FEATURES` (a feature's own tests)."""
    from roleplay.assets.seeds import ensure_seeds
    from roleplay.assets.service import AssetService
    from roleplay.core.session_create import StoryRequest, create_story
    from roleplay.harness.models.routes import Route
    from roleplay.samples import SAMPLE_CARD, sample_card_bytes

    if plus_features:
        from roleplay.features import build_runtime

        rt = build_runtime(store, enabled=(*CORE_TEST_FEATURES, *plus_features), entry_points=False)
    else:
        rt = core_runtime(store)
    if model is not None:
        rt.models[Route("demo", "demo").spec] = model
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card, **request))
    return rt, record.id


def state_effect_registry():  # type: ignore[no-untyped-def]
    """The commit's effect registry with ``state.update`` (what the ``rp-state`` plugin registers)."""
    from roleplay.core.effects import EffectRegistry
    from roleplay.state.effect import state_update_capability

    return EffectRegistry([state_update_capability()])
