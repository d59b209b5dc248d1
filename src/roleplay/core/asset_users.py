"""Which stories bind an asset: what ``rp assets delete`` shows before deleting a shared asset.

Deleting never touches a session (its reference then reads as unbound, with an
``asset-unavailable`` diagnostic each turn), so the user is told first which stories would lose
the card, persona, preset, lorebook or style. Only top-level roleplay sessions are read, archived
ones included: Writer and sub-agent children bind nothing of their own.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from roleplay.harness.projections import load
from roleplay.harness.store import EventStore
from roleplay.harness.store.base import SessionFilter

from .profile import profile_of, session_projection
from .runtime import ROLEPLAY_PRESET

PAGE = 500


@dataclass(frozen=True)
class AssetUser:
    session_id: str
    title: str | None
    archived: bool
    asset_id: str
    place: str  # the profile field that binds it: resources/card, resources/lorebooks/0, …

    def to_dict(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "title": self.title, "archived": self.archived, "assetId": self.asset_id, "at": self.place}


async def sessions_using(store: EventStore, asset_ids: Collection[str]) -> list[AssetUser]:
    """Every binding of one of ``asset_ids`` in a story's current profile, most recent story first."""
    wanted = set(asset_ids)
    out: list[AssetUser] = []
    offset = 0
    while True:
        page = await store.list_sessions(SessionFilter(archived=None, roots_only=True, limit=PAGE, offset=offset))
        for record in page:
            if record.preset != ROLEPLAY_PRESET:
                continue
            resources = profile_of((await load(store, record.id, session_projection)).state).resources
            bound = [("card", resources.card), ("persona", resources.persona), ("preset", resources.preset)]
            bound += [(f"lorebooks/{i}", a) for i, a in enumerate(resources.lorebooks)]
            bound += [(f"writingStyles/{i}", a) for i, a in enumerate(resources.writing_styles)]
            out += [AssetUser(record.id, record.title, record.archived, a, f"/resources/{where}") for where, a in bound if a in wanted]
        if len(page) < PAGE:
            return out
        offset += PAGE
