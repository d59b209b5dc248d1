"""The shared vocabulary of the roleplay turn: what the context build, the Writer, the commit and
the run hand each other. Only plain frozen dataclasses here, no behaviour, so every core module can
depend on this one and on nothing else of its siblings.

Spec terms (``roleplay-plugins.zh.md`` 产品边界): a *context source* is one piece of material
(``rp.card``, ``rp.preset:<field-id>`` …); a *slot* is a named, ordered group of sources in the
session's ``contextBuild``; the *frozen build* is what one run assembled from the session's slots
and hands to the Writer (flat prompt) and to the parent (ready marker, bindings, parent-delivered
fragments, commit material).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from roleplay.names import (
    CARD_DEPTH_PROMPT_SOURCE,
    CARD_SOURCE,
    CONVERSATION_SOURCE,
    CURRENT_INPUT_SOURCE,
    CUSTOM_SOURCE_PREFIX,
    LORE_CHARACTERS_SOURCE,
    LORE_RULES_SOURCE,
    LORE_WORLD_SOURCE,
    PERSONA_SOURCE,
    PLAYER_SOURCE,
    PRESET_SOURCE_PREFIX,
    STATE_SOURCE,
    STYLE_SOURCE_PREFIX,
    SUMMARY_SOURCE,
)

SourceClass = Literal["factual", "instructional"]
ParentDelivery = Literal["none", "context", "commit"]
ExecutionMode = Literal["chat", "agent"]

# Source ids fixed by the spec (``roleplay.names``), under the names core has always used.
CARD = CARD_SOURCE
CARD_DEPTH_PROMPT = CARD_DEPTH_PROMPT_SOURCE
PERSONA = PERSONA_SOURCE
PLAYER = PLAYER_SOURCE
LORE_WORLD = LORE_WORLD_SOURCE
LORE_CHARACTERS = LORE_CHARACTERS_SOURCE
LORE_RULES = LORE_RULES_SOURCE
STATE = STATE_SOURCE
PRESET_PREFIX = PRESET_SOURCE_PREFIX
STYLE_PREFIX = STYLE_SOURCE_PREFIX
SUMMARY = SUMMARY_SOURCE
CONVERSATION = CONVERSATION_SOURCE
CURRENT_INPUT = CURRENT_INPUT_SOURCE
CUSTOM_PREFIX = CUSTOM_SOURCE_PREFIX

# Sources that must always take part in assembly (the spec: idleAllowed false, checked by identity).
NEVER_IDLE = frozenset({SUMMARY, CONVERSATION, CURRENT_INPUT})


@dataclass(frozen=True)
class ContextSource:
    """One piece of material for this run.

    ``text`` is what the Writer and the prompt workbench see. ``parent_text`` (when set) replaces
    it in the parent's view only; ``parent_delivery`` says whether the parent gets it as read-only
    context (card, persona) or as commit material (state contract), or not at all.
    ``shared_reference`` marks material read from a shared asset: if that asset is unavailable the
    source is skipped with an ``asset-unavailable`` diagnostic instead of failing the run.
    """

    id: str
    title: str
    text: str
    source_class: SourceClass
    parent_delivery: ParentDelivery = "none"
    parent_text: str | None = None
    idle_allowed: bool = True
    shared_reference: bool = False
    default_section_tag: bool = True
    # Asset id + revision (or content hash) read, so a commit can check they are still live.
    revision: dict[str, Any] | None = None
    # In-chat placement (the Character's Note): messages counted back from the newest (0 = after
    # the last one) and the chat role SillyTavern would send it as. None: not placed in the chat.
    depth: int | None = None
    role: str = "system"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    source_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.source_id is not None:
            out["sourceId"] = self.source_id
        if self.details:
            out["details"] = self.details
        return out


@dataclass(frozen=True)
class Slot:
    """One entry of ``profile.contextBuild.slots`` (camelCase in JSON: id, name, sources,
    sectionTag, idle)."""

    id: str
    name: str
    sources: tuple[str, ...]
    section_tag: bool = True
    idle: bool = False


@dataclass(frozen=True)
class BuiltSection:
    """One slot as assembled for this run: which sources made it in, and its serialised text."""

    slot_id: str
    name: str
    source_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class WindowFit:
    """How the conversation history was fitted into the Writer route's context window. Token
    figures come from ``harness.models.tokens.count_tokens``, the same in every process."""

    window: int  # the route's context window
    reply_reserve: int  # kept free for the reply (and a thinking model's reasoning)
    fixed_tokens: int  # the rest of the Writer request: system prompt, images, message framing
    prompt_tokens: int  # the Writer prompt as built
    messages: int  # history messages available to ``rp.conversation``
    omitted: int  # the oldest of them left out, whole

    @property
    def budget(self) -> int:
        """What the Writer prompt (every slot together) may take."""
        return self.window - self.reply_reserve - self.fixed_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "window": self.window,
            "replyReserve": self.reply_reserve,
            "fixedTokens": self.fixed_tokens,
            "budget": self.budget,
            "promptTokens": self.prompt_tokens,
            "messages": self.messages,
            "omitted": self.omitted,
        }


@dataclass(frozen=True)
class FrozenBuild:
    """The context build of one run, frozen at prepare time."""

    sections: tuple[BuiltSection, ...]
    writer_prompt: str  # the flat user prompt of the Writer (all non-idle, available slots)
    parent_context: str  # parentDelivery: context fragments (card, persona), serialised once
    commit_context: str  # parentDelivery: commit fragments (state contract), serialised once
    bindings: dict[str, Any]  # {characterId, lorebookIds, personaId, presetId, writingStyleIds}
    diagnostics: tuple[Diagnostic, ...]
    epoch: str  # sha256 of everything above: the context epoch a retry token is bound to
    sources: dict[str, ContextSource] = field(default_factory=dict)
    # None when the Writer route's window is unknown: then nothing is left out.
    window: WindowFit | None = None


@dataclass(frozen=True)
class WriterArtifact:
    """The one successful Writer result a run accepts."""

    call_id: str
    child_session_id: str
    route: dict[str, Any]
    prompt_hash: str
    section_ids: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class CommitContext:
    """What ``rp_commit_turn`` validates against, for one run."""

    run_id: str
    turn_id: str
    session_id: str
    mode: ExecutionMode
    epoch: str
    writer: WriterArtifact | None
    state: dict[str, Any]  # the rp/state projection at prepare time (for state.update)
    live_revisions: dict[str, Any]  # asset id → revision read at prepare time


class AssetReader(Protocol):
    """How context code reads shared assets: the live revision, or None when the asset is gone
    (a dangling reference reads as unbound)."""

    async def read(self, kind: str, asset_id: str) -> "AssetView | None": ...


@dataclass(frozen=True)
class AssetView:
    id: str
    kind: str  # card | lorebook | persona | preset | writing-style
    revision: int
    data: dict[str, Any]
    name: str = ""
