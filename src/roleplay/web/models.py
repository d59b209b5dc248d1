"""Request and response bodies of the HTTP API (camelCase on the wire, as the event log).

Requests forbid unknown fields, so a misspelt option is a 422 with its pointer, never silently
ignored. Responses that carry a library result verbatim (a surface, a metrics report) are typed
as JSON objects; the documented fields are the library's ``to_dict``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from roleplay.assets.validation import replace_lone_surrogates, surrogate_problems


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_lone_surrogates(cls, data: Any) -> Any:
        # JSON can spell a lone surrogate (``"\\ud800"``), which is not a character: no text
        # holding one can be hashed or stored, so it is refused with its place, before any route
        # sees it (a turn's text would otherwise fail deep in the engine).
        found = surrogate_problems("request", data)
        if found:
            first = found[0]
            # A key may hold it too: the pointer shows it as U+FFFD, or the answer could not be sent.
            raise PydanticCustomError("lone_surrogate", first.message, {"pointer": replace_lone_surrogates(first.pointer or "")})
        return data


class Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True)


class ErrorOut(Out):
    code: str = Field(description="stable dotted error code, e.g. run.busy; docs/api.md lists them with their statuses")
    message: str
    pointer: str | None = Field(None, description="JSON Pointer into the request, where one applies")
    problems: list[dict[str, Any]] = Field(default_factory=list)
    details: dict[str, Any] | None = None


# -- sessions ---------------------------------------------------------------------------------------


class SessionCreate(Body):
    """Step one of a story's setup: the live assets to bind and how it opens. Omitted assets are
    the defaults (lorebooks: the card's own); an explicit ``null`` (or ``[]``) leaves that kind out
    (the spec: every kind can be left out, distinct from the default); ``model`` is kept as the
    story's route."""

    card: str | None = None
    sample: bool = Field(False, description="use the bundled sample card (imported on first use)")
    persona: str | None = None
    preset: str | None = None
    lorebooks: list[str] | None = None
    writing_styles: list[str] | None = None
    opening: Literal["card", "custom", "skip"] = "card"
    opening_index: int = 0
    opening_text: str = ""
    participation: Literal["adaptive", "actor", "director"] = "adaptive"
    title: str | None = None
    model: str | None = Field(None, description="the story's route, e.g. deepseek/deepseek-flash or demo")

    def left_out(self, name: str) -> bool:
        """Whether the request says ``null`` for this kind (present, unlike an omitted field)."""
        return name in self.model_fields_set and getattr(self, name) is None


class OpeningChoice(Body):
    """Step two (optional, before the first turn): choose another opening."""

    opening: Literal["card", "custom", "skip"] = "card"
    opening_index: int = 0
    opening_text: str = ""


class SessionOut(Out):
    id: str
    preset: str
    title: str | None = None
    parent_id: str | None = None
    archived: bool = False
    head_seq: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, serialize_by_alias=True, extra="allow")


class SessionCreated(Out):
    session_id: str
    title: str | None
    participation: str
    route: str | None
    opening: str | None
    diagnostics: list[dict[str, Any]]
    session: SessionOut


class ProfilePatch(Body):
    patch: dict[str, Any] = Field(description="JSON merge patch of the profile (null removes a field)")
    revision: int | None = Field(None, description="the profile revision read (or send If-Match)")


class ForkBody(Body):
    at_seq: int = Field(description="keep events 1..atSeq (snapped back to the last closed turn)")
    title: str | None = None


class BranchBody(Body):
    at: str | None = Field(None, description="branch after this message's turn: a message id or its number")
    at_turn: str | None = None
    title: str | None = None


# -- turns and message actions ----------------------------------------------------------------------


class TurnBody(Body):
    text: str
    model: str | None = Field(None, description="route for this turn only (default: the story's, else the server's)")


class ContinueBody(Body):
    model: str | None = None


class RegenerateBody(Body):
    save_edit: str | None = Field(None, description="replace your last message with this text first")
    model: str | None = None


class TurnAccepted(Out):
    session_id: str
    turn_id: str
    kind: str
    events: str = Field(description="the SSE stream that carries the turn")


class AbortBody(Body):
    turn_id: str | None = None


class EditBody(Body):
    text: str


class SwipeBody(Body):
    direction: Literal["left", "right"] | int = Field(description="left, right, or the alternative's number (1 = first)")


# -- assets, settings -------------------------------------------------------------------------------


class AssetCreate(Body):
    kind: str
    data: dict[str, Any]


class AssetUpdate(Body):
    data: dict[str, Any]
    revision: int | None = Field(None, description="the revision read (or send If-Match)")


class DefaultBody(Body):
    asset_id: str


class TrustBody(Body):
    trusted: bool = True


class SettingUpdate(Body):
    value: Any
    revision: int | None = None


class ModelKey(Body):
    key: str = Field(description="the provider's API key; stored in the server's home, never shown again")


class ModelTest(Body):
    model: str | None = None
    prompt: str = "Reply with one short, friendly sentence."


__all__ = [name for name in dir() if name[0].isupper()]
