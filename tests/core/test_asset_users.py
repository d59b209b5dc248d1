"""``sessions_using``: the stories whose current profile binds an asset."""

from __future__ import annotations

import pytest
from tests_support import core_runtime

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.asset_users import sessions_using
from roleplay.core.profile import apply_profile
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.core.sources import StoreAssetReader
from roleplay.harness.store import EventStore
from roleplay.samples import SAMPLE_CARD, sample_card_bytes

pytestmark = pytest.mark.anyio


async def test_archived_stories_count_children_and_unbound_ones_do_not(store: EventStore) -> None:
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(sample_card_bytes(), SAMPLE_CARD)).asset_id
    kept, _ = await create_story(rt, StoryRequest(card=card, title="kept"))
    archived, _ = await create_story(rt, StoryRequest(card=card, title="archived"))
    await store.set_archived(archived.id)
    rebound, _ = await create_story(rt, StoryRequest(card=card, title="rebound"))
    await apply_profile(rt.service, rebound.id, {"patch": {"resources": {"card": None}}}, StoreAssetReader(rt.assets))
    await store.create_session(preset="writer", parent_id=kept.id)  # a child binds nothing of its own

    users = await sessions_using(store, {card})
    assert {(u.session_id, u.archived, u.place) for u in users} == {
        (kept.id, False, "/resources/card"),
        (archived.id, True, "/resources/card"),
    }
    persona = (await rt.assets.list("persona")).items[0].id
    assert {u.session_id for u in await sessions_using(store, {persona})} == {kept.id, archived.id, rebound.id}
    assert await sessions_using(store, {"nothing-binds-this"}) == []
