"""The normalised character card: one V3-shaped model whatever the source version was.

Design choices:

* The embedded ``character_book`` is *not* part of the card. It is returned beside it as a raw
  payload because lorebooks are separate shared assets (a card only "originates" books).
* ``system_prompt`` and ``post_history_instructions`` are not part of the card either. They are
  executable instructions from a stranger, so they travel in :class:`IsolatedPrompts`, flagged
  untrusted; the product only injects them after a user explicitly trusts them, and never
  restores them on export.
* Nothing unknown is lost: ``extensions`` is kept verbatim (talkativeness stays the string ``"0.5"``
  if that is what the file said), unknown ``data`` keys go to ``extra_data`` and unknown root keys
  to ``extra_root``. Only recognised app bookkeeping at the root (SillyTavern's ``chat`` file name,
  ``create_date``, ``avatar``, ``fav`` and the V1 mirror of ``data``) is left out of the model;
  the untouched source object is still available as ``raw`` on the parse result.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SourceSpec = Literal["v1", "v2", "v3", "pygmalion"]


class CardAsset(BaseModel):
    """A V3 ``assets`` item. Unknown keys on an asset are kept (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")

    type: str
    uri: str
    name: str
    ext: str


def default_assets() -> list[CardAsset]:
    # SPEC_V3: an absent ``assets`` behaves as a single main icon that is the card image itself.
    return [CardAsset(type="icon", uri="ccdefault:", name="main", ext="png")]


class CharacterCard(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    alternate_greetings: list[str] = Field(default_factory=list)
    group_only_greetings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    extensions: dict[str, Any] = Field(default_factory=dict)
    # V3-only optional fields: None means "absent in the source" and is omitted on export.
    nickname: str | None = None
    creator_notes_multilingual: dict[str, str] | None = None
    source: list[str] | None = None
    assets: list[CardAsset] = Field(default_factory=default_assets)
    creation_date: int | None = None  # unix seconds; 0 = unknown/withheld (SPEC_V3)
    modification_date: int | None = None
    extra_data: dict[str, Any] = Field(default_factory=dict)
    extra_root: dict[str, Any] = Field(default_factory=dict)

    def display_name(self) -> str:
        """Name for ``{{char}}``: the V3 spec prefers a non-empty nickname."""
        return self.nickname or self.name


class IsolatedPrompts(BaseModel):
    """Card-supplied prompt overrides, quarantined until a user trusts them.

    ``trusted`` is always False on import; only a user-side service may flip it. Both texts may
    contain ``{{original}}`` (V2 spec), which expands to the user's own prompt when injected.
    """

    model_config = ConfigDict(extra="forbid")

    system_prompt: str = ""
    post_history_instructions: str = ""
    trusted: bool = False

    @property
    def is_empty(self) -> bool:
        return not (self.system_prompt or self.post_history_instructions)
