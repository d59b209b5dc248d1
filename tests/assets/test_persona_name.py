"""Whether the user still has to name themselves, on both backends."""

from __future__ import annotations

import pytest

from roleplay.assets.persona_name import SEED_NAMES, name_persona, unnamed_default_persona
from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.store import AssetStore
from roleplay.errors import RpError
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio


def test_every_shipped_name_counts_as_unnamed() -> None:
    assert SEED_NAMES == {"User", "用户", "主角"}


async def test_the_seeded_default_is_unnamed_until_renamed(store: EventStore) -> None:
    assets = AssetStore(store)
    assert await unnamed_default_persona(assets) is None  # nothing seeded yet
    await ensure_seeds(assets, language="zh")
    seeded = await unnamed_default_persona(assets)
    assert seeded is not None and seeded.name == "用户"
    renamed = await name_persona(assets, seeded, "阿遥")
    assert (renamed.revision, renamed.data["description"]) == (2, seeded.data["description"])
    assert await unnamed_default_persona(assets) is None
    # an edited seed stays edited in every language
    assert {o.action for o in await ensure_seeds(assets, language="en") if o.kind == "persona"} == {"keep-edited"}
    with pytest.raises(RpError) as stale:
        await name_persona(assets, seeded, "Again")  # the revision read before the rename
    assert stale.value.code == "asset.revision_conflict"
    with pytest.raises(RpError) as blank:
        await name_persona(assets, renamed, "   ")
    assert blank.value.code == "persona.invalid"


async def test_a_persona_of_the_users_own_is_never_asked_about(store: EventStore) -> None:
    assets = AssetStore(store)
    await ensure_seeds(assets, language="en")
    mine = await assets.create("persona", {"name": "User"})
    await assets.set_default("persona", mine.id)
    assert await unnamed_default_persona(assets) is None  # not the seed, even with that name
