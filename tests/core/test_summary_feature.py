"""``rp-conversation-summary`` as a plugin: on, it registers the candidate commands, the
``rp/summary`` projection and the demo's answer; off, the runtime has none of them."""

from __future__ import annotations

import pytest

from roleplay.core.settings import FEATURES
from roleplay.core.summary import CANDIDATE, DISCARD, FEATURE, PROJECTION
from roleplay.features import build_runtime
from roleplay.harness.models.demo import DEFAULT_POLICIES
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


async def test_the_plugin_registers_the_commands_projection_and_demo_answer(store: EventStore) -> None:
    rt = build_runtime(store, entry_points=False)
    assert FEATURE in rt.features
    assert {CANDIDATE, DISCARD} <= set(rt.service.commands.names())
    assert PROJECTION in rt.service.projections.names()
    assert "roleplay-summary" in DEFAULT_POLICIES.names()
    await rt.aclose()


async def test_turned_off_it_contributes_nothing(store: EventStore) -> None:
    rt = build_runtime(store, enabled=[f for f in FEATURES if f != FEATURE], entry_points=False)
    assert FEATURE not in rt.features
    assert CANDIDATE not in rt.service.commands.names() and PROJECTION not in rt.service.projections.names()
    await rt.aclose()
