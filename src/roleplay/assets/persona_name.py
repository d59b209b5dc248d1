"""Whether the user still has to say what the story should call them.

The default persona is seeded with a neutral name ("User", "用户"; version 1 said 主角), which
``{{user}}`` then becomes in every card. Until the user names themselves, ``rp play`` asks once per
new story (``edit_cli.offer_persona_name``); the answer is an ordinary edit of the persona, so the
seeding never overwrites it afterwards (``seeding.py``: edited seeds are kept).
"""

from __future__ import annotations

from typing import Any

from .kinds import PERSONA
from .personas import DEFAULT_PERSONA_SEEDS
from .personas.seed import SEED_KEY
from .store import AssetRecord, AssetStore

# Every name a seeded default persona was ever shipped with.
SEED_NAMES: frozenset[str] = frozenset({str(seed.content["name"]) for seed in DEFAULT_PERSONA_SEEDS.values()} | {"主角"})


async def unnamed_default_persona(store: AssetStore) -> AssetRecord | None:
    """The default persona when it is the seeded one and still has a seed's name, else None."""
    record = await store.get_default(PERSONA)
    if record is None or record.seed_key != SEED_KEY or record.name not in SEED_NAMES:
        return None
    return record


async def name_persona(store: AssetStore, record: AssetRecord, name: str) -> AssetRecord:
    """Rename ``record`` (revision-checked against the one read); the kind's parser checks the name."""
    data: dict[str, Any] = {**record.data, "name": name}
    return await store.update(record.id, data, expected_revision=record.revision)


__all__ = ["SEED_NAMES", "name_persona", "unnamed_default_persona"]
