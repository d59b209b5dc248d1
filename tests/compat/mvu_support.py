"""Builders and corpus paths shared by the MVU adapter tests (imported as ``compat.mvu_support``)."""

from __future__ import annotations

from types import SimpleNamespace

from roleplay.assets.cards.model import CharacterCard

EXAMPLE_CARD = "cards/呕吐内心的少女_头像.png"
LILI = "mvu/MagVarUpdate/example/理理"
STAGEDOG = "mvu/StageDog-tavern_helper_template/示例/角色卡示例"


def make_card(
    first_mes: str = "",
    alternate: list[str] | None = None,
    entries: list[dict] | None = None,
    name: str = "Yuki",
    extensions: dict | None = None,
):
    """A CardImport-like object: the adapter reads only ``card``, ``lorebook`` and ``raw``."""
    card = CharacterCard(name=name, first_mes=first_mes, alternate_greetings=alternate or [], extensions=extensions or {})
    book = {"name": f"{name} book", "entries": entries} if entries is not None else None
    return SimpleNamespace(card=card, lorebook=book, raw={"spec": "chara_card_v3", "data": {}})


def entry(title: str, content: str, enabled: bool = True, uid: int = 0) -> dict:
    return {"id": uid, "comment": title, "content": content, "enabled": enabled, "keys": []}
