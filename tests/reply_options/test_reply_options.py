"""The ``rp-reply-options`` plugin: everything it adds comes through the hooks, and turning the
feature off removes all of it while a story still plays."""

from __future__ import annotations

import pytest

from roleplay.core.run import play_turn
from roleplay.core.settings import FEATURES
from roleplay.features import build_runtime
from roleplay.harness.models.demo import DEFAULT_POLICIES
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.plugins import plugin_manager
from roleplay.reply_options import FEATURE, PROJECTION, options_after_turn
from roleplay.reply_options.demo import POLICY_NAME
from roleplay.reply_options.projection import EXTENSION_KEY
from tests_support import sample_story

pytestmark = pytest.mark.anyio


async def test_the_plugin_contributes_through_the_hooks(store: EventStore) -> None:
    assert FEATURE in FEATURES
    assert plugin_manager([FEATURE], entry_points=False).get_plugin(FEATURE) is not None
    assert POLICY_NAME in DEFAULT_POLICIES.names()
    rt = build_runtime(store, entry_points=False)
    assert EXTENSION_KEY in rt.artifacts.keys() and PROJECTION in rt.service.projections.names()
    assert rt.turn_choices == [options_after_turn]
    assert EXTENSION_KEY not in rt.extensions.keys()  # the parent never declares or sends it
    await rt.aclose()


async def test_turned_off_nothing_of_it_is_there_and_a_story_still_plays(store: EventStore) -> None:
    rt = build_runtime(store, enabled=[f for f in FEATURES if f != FEATURE], entry_points=False)
    assert EXTENSION_KEY not in rt.artifacts.keys() and PROJECTION not in rt.service.projections.names()
    assert rt.turn_choices == []
    await rt.aclose()
    on, sid = await sample_story(store, plus_features=(FEATURE,))
    await on.aclose()
    off = build_runtime(store, enabled=[f for f in FEATURES if f != FEATURE], entry_points=False)
    result = await play_turn(off, sid, "我走进灯塔。", parent_route=Route("demo", "demo"))
    meta = next(r.meta for r in result.turn.tool_results if r.ok and r.name == "rp_commit_turn")
    assert result.committed and meta is not None and meta["extensions"] == {}
    await off.aclose()
