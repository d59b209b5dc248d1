"""The native event vocabulary of a session log (DESIGN.md §3.1).

Every durable event is one of the types below; payloads are validated on append and stored in the
normalised form the model dumps (camelCase keys, ``None`` fields left out). The vocabulary is
closed on purpose: the spec forbids features from inventing ``rp/*`` event types, so roleplay
semantics travel inside ``command/run`` args, ``tool/result.meta`` and message ``source``.

Payload models are versioned (``EventSpec.version``, stored per row) so that a later change can
upcast old rows instead of rewriting them.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from roleplay.errors import Problem, ValidationError, pointer_from_parts
from roleplay.harness.names import (
    ASSISTANT_MESSAGE,
    COMMAND_DONE,
    COMMAND_RUN,
    COMPACTION_CHECKPOINT,
    MODEL_REQUEST,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)

# Size bounds on anything a user or a model can put into one event (DESIGN.md §5 "Limits").
MAX_EVENT_BYTES = 8 * 1024 * 1024
MAX_ID_LENGTH = 128
MAX_DEPTH = 64


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


Id = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]


class TextBlock(_Payload):
    type: Literal["text"]
    text: str


class ImageBlock(_Payload):
    type: Literal["image"]
    media_type: Literal["image/png", "image/jpeg", "image/webp", "image/gif"]
    data: str = Field(description="base64 without a data: prefix")
    name: str | None = None


class ReasoningBlock(_Payload):
    type: Literal["reasoning"]
    text: str


ContentBlock = Annotated[Union[TextBlock, ImageBlock, ReasoningBlock], Field(discriminator="type")]


class SurfaceOp(_Payload):
    """Replace part of the model-visible surface instead of appending to it.

    ``range="node"`` swaps one node (an edit: the node keeps ``targetMessageId``);
    ``range="suffix"`` drops the target node and everything after it (delete, regenerate).
    ``sourceEventSeqs`` records which events' nodes were replaced; the session service fills it
    at append time so that entity ownership can be decided from the log alone.
    """

    op: Literal["replace"]
    range: Literal["node", "suffix"]
    target_message_id: Id
    source_event_seqs: list[int] = Field(default_factory=list)


class ToolCallRef(_Payload):
    id: Id
    name: Annotated[str, Field(min_length=1, max_length=64)]
    arguments: str = Field(description="raw JSON text exactly as the model produced it")


class ErrorInfo(_Payload):
    code: str
    message: str
    pointer: str | None = None
    details: dict[str, Any] | None = None
    problems: list[dict[str, Any]] | None = None  # every independent problem, each with its pointer


class UserMessage(_Payload):
    message_id: Id
    content: list[ContentBlock]
    turn_id: Id | None = None
    source: dict[str, Any] | None = None
    surface_op: SurfaceOp | None = None


class AssistantMessage(_Payload):
    message_id: Id
    content: list[ContentBlock]
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    turn_id: Id | None = None
    step_id: Id | None = None
    model: dict[str, Any] | None = None
    finish_reason: str | None = None
    source: dict[str, Any] | None = None
    surface_op: SurfaceOp | None = None


class ToolCall(_Payload):
    call_id: Id
    name: Annotated[str, Field(min_length=1, max_length=64)]
    arguments: str
    turn_id: Id | None = None
    step_id: Id | None = None


class ToolResult(_Payload):
    call_id: Id
    name: Annotated[str, Field(min_length=1, max_length=64)]
    ok: bool
    content: str | list[ContentBlock]
    error: ErrorInfo | None = None
    meta: dict[str, Any] | None = None
    turn_id: Id | None = None
    step_id: Id | None = None


class CommandRun(_Payload):
    command_id: Id
    name: Annotated[str, Field(min_length=1, max_length=128)]
    args: dict[str, Any] = Field(default_factory=dict)
    source: dict[str, Any] | None = None


class CommandDone(_Payload):
    command_id: Id
    kind: Literal["success", "error"]
    result: Any = None
    error: ErrorInfo | None = None


TurnOutcome = Literal["completed", "step-limit", "aborted", "interrupted", "error"]


class TurnStart(_Payload):
    turn_id: Id
    mode: str | None = None
    input_message_id: Id | None = None
    run_id: Id | None = None


class TurnEnd(_Payload):
    turn_id: Id
    outcome: TurnOutcome
    error: ErrorInfo | None = None


class StepStart(_Payload):
    turn_id: Id
    step_id: Id
    index: Annotated[int, Field(ge=0)]


class StepEnd(_Payload):
    turn_id: Id
    step_id: Id
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None


class ModelRequestLogged(_Payload):
    """The system-prompt snapshot of one model request: which sections, in which order, and a
    hash of the exact prompt, so that a prompt inspector can tell what the model saw."""

    turn_id: Id
    step_id: Id
    route: dict[str, Any]
    sections: list[str]
    hash: Annotated[str, Field(min_length=64, max_length=64)]
    tools: list[str] = Field(default_factory=list)
    # How the earlier turns were fitted to the route's window (``harness.history.HistoryFit``);
    # absent when no window is known and the whole history was sent.
    history: dict[str, int] | None = None
    # Sampler settings the request carried (wire names, e.g. a preset's ``temperature``) and its
    # explicit output limit; absent when the request left them to the provider.
    sampling: dict[str, float] | None = None
    max_tokens: int | None = None


class CompactionCheckpoint(_Payload):
    """Replaces the surface nodes of ``sourceEventSeqs`` (all nodes when empty) by one summary
    node at the front; the nodes it does not name stay after it. The log keeps every event."""

    checkpoint_id: Id
    summary: str
    source_event_seqs: list[int] = Field(default_factory=list)


@dataclass(frozen=True)
class EventSpec:
    type: str
    model: builtins.type[_Payload]  # `type` here is the field above
    version: int = 1


EVENT_TYPES: dict[str, EventSpec] = {
    spec.type: spec
    for spec in (
        EventSpec(COMMAND_RUN, CommandRun),
        EventSpec(COMMAND_DONE, CommandDone),
        EventSpec(TURN_START, TurnStart),
        EventSpec(TURN_END, TurnEnd),
        EventSpec(STEP_START, StepStart),
        EventSpec(STEP_END, StepEnd),
        EventSpec(MODEL_REQUEST, ModelRequestLogged),
        EventSpec(USER_MESSAGE, UserMessage),
        EventSpec(ASSISTANT_MESSAGE, AssistantMessage),
        EventSpec(TOOL_CALL, ToolCall),
        EventSpec(TOOL_RESULT, ToolResult),
        EventSpec(COMPACTION_CHECKPOINT, CompactionCheckpoint),
    )
}

MESSAGE_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE})


@dataclass(frozen=True)
class EventDraft:
    """An event not yet appended: the store assigns ``seq`` and ``created_at``."""

    type: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    session_id: str
    seq: int
    type: str
    payload: dict[str, Any]
    created_at: str
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "seq": self.seq,
            "type": self.type,
            "v": self.version,
            "payload": self.payload,
            "createdAt": self.created_at,
        }


def validate_payload(event_type: str, payload: Any, *, index: int | None = None) -> dict[str, Any]:
    """Validate and normalise one payload; raise ``event.unknown_type`` or ``event.invalid_payload``.

    ``index`` (position in an append batch) prefixes pointers so a batch error says which draft.
    """
    prefix = f"/{index}" if index is not None else ""
    spec = EVENT_TYPES.get(event_type)
    if spec is None:
        raise ValidationError(
            "event.unknown_type",
            f"unknown event type {event_type!r}; known types: {', '.join(sorted(EVENT_TYPES))}",
            pointer=f"{prefix}/type",
        )
    if not isinstance(payload, dict):
        raise ValidationError(
            "event.invalid_payload",
            f"payload of {event_type} must be a JSON object, got {type(payload).__name__}",
            pointer=f"{prefix}/payload",
        )
    if not _plain_json(payload, 0):
        _check_json(payload, f"{prefix}/payload", 0)
    try:
        model = spec.model.model_validate(payload)
    except PydanticValidationError as exc:
        problems = [
            Problem(
                "event.invalid_payload",
                f"{err['msg']}",
                pointer=f"{prefix}/payload" + pointer_from_parts(err["loc"]),
            )
            for err in exc.errors(include_url=False)
        ]
        first = problems[0]
        raise ValidationError(
            "event.invalid_payload",
            f"invalid {event_type} payload: {first.message}",
            pointer=first.pointer,
            problems=problems,
        ) from None
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# What a JSON value holds most of the time: values of these exact types are accepted by
# ``_check_json`` as they are (a float only when finite).
_ATOMS = frozenset({str, int, bool, type(None)})


def _plain_json(value: Any, depth: int) -> bool:
    """True when ``_check_json`` would accept ``value`` at ``depth``: exact types only, no
    pointers built (every payload of every append passes here, issue 16). False is "not sure",
    not "invalid": the full check then gives the verdict and the pointer to the problem."""
    if depth >= MAX_DEPTH:  # its items would be past the limit: the full check says where
        return False
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            kind = type(item)
            if kind in _ATOMS:
                continue
            if kind is float:
                if item - item != 0.0:  # NaN and the infinities
                    return False
            elif not _plain_json(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            kind = type(item)
            if kind in _ATOMS:
                continue
            if kind is float:
                if item - item != 0.0:
                    return False
            elif not _plain_json(item, depth + 1):
                return False
        return True
    return kind in _ATOMS or (kind is float and value - value == 0.0)


def is_plain_json(value: Any) -> bool:
    """True when ``value`` is surely plain JSON of exact types (dict, list, str, int, bool, None,
    finite float), within the depth limit; False when unsure."""
    return _plain_json(value, 0)


def _check_json(value: Any, pointer: str, depth: int) -> None:
    """Reject what JSON cannot hold faithfully. Pydantic's JSON mode would turn NaN into null and
    accept tuples or non-string keys silently; a stored event must be exactly what was meant."""
    if depth > MAX_DEPTH:
        raise ValidationError("event.too_deep", f"payload nests deeper than {MAX_DEPTH} levels", pointer=pointer)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValidationError("event.invalid_payload", "numbers must be finite (no NaN or Infinity)", pointer=pointer)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError("event.invalid_payload", f"object keys must be strings, got {key!r}", pointer=pointer)
            _check_json(item, pointer + pointer_from_parts([key]), depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{pointer}/{i}", depth + 1)
    elif value is not None and not isinstance(value, (str, int, bool)):
        raise ValidationError("event.invalid_payload", f"{type(value).__name__} is not a JSON value", pointer=pointer)


def event_version(event_type: str) -> int:
    return EVENT_TYPES[event_type].version


def message_text(payload: dict[str, Any]) -> str:
    """Concatenated text blocks of a message payload (reasoning excluded)."""
    return "".join(b.get("text", "") for b in payload.get("content", []) if b.get("type") == "text")


def is_empty_assistant(payload: dict[str, Any]) -> bool:
    """The spec's ``deriveEventMessage() → null``: an assistant message with no visible text, no
    image and no tool call is a control carrier that never reaches the model."""
    if payload.get("toolCalls"):
        return False
    for block in payload.get("content", []):
        if block.get("type") == "image":
            return False
        if block.get("type") == "text" and block.get("text", "").strip():
            return False
    return True
