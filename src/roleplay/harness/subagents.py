"""Sub-agents: one-shot child sessions (the Writer, task sub-agents).

A sub-agent is a fresh child session linked to its parent (``parent_id``) with:

- its own system prompt and exactly one user message (text plus optional image blocks), and no
  parent history;
- a tool allow-list intersected with the installed tools (an empty list is allowed: the Writer
  has no tools). Names that are not installed are reported in ``ignored_tools``, not errors,
  because the catalogue of installed features may legitimately differ from what a caller asks for;
- no recursion: a run inside a sub-agent has depth 1, spawning tools are never offered there,
  and ``run_subagent`` refuses to start from depth ≥ 1;
- an optional JSON Schema for a structured result, validated before the result is returned;
- a timeout, and the parent's abort propagated to the child;
- optionally, ``on_delta``: the child model's text deltas handed to the caller as they are
  generated (the Writer streams its draft live to the parent's subscribers this way). They are
  transient: the child's log stores only its final message.

The child's log is a normal session: readable, listable under its parent, replayable.
"""

from __future__ import annotations

import asyncio
import json
import re
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from roleplay.errors import Problem, RpError, ValidationError, pointer_from_parts

from .events import Event, EventDraft
from .leases import created_session_lease
from .loop import AgentLoop, AgentSpec, TurnResult
from .models.types import SAMPLING_PARAMS, ChatModel, ModelRequest, StreamEvent, TextDelta, flatten, stream_batches
from .prompts import ORDER_IDENTITY, PromptAssembly, PromptSection
from .sessions import SessionService
from .store.base import SessionRecord
from .tools import ToolRegistry

MAX_IMAGES = 8
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.S)


@dataclass
class SubagentRequest:
    preset: str
    system_prompt: str
    user_text: str
    images: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    result_schema: dict[str, Any] | None = None
    timeout: float | None = 300.0
    step_limit: int = 5
    title: str | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    # Sampler settings by wire name (``SAMPLING_PARAMS``), e.g. a preset's temperature.
    sampling: dict[str, float] = field(default_factory=dict)
    # Awaited with each text delta of the child's model as it arrives (live streaming).
    on_delta: Callable[[str], Awaitable[None]] | None = None


@dataclass
class SubagentResult:
    session_id: str
    outcome: str
    text: str
    data: Any = None  # the validated structured result when a schema was given
    tools: list[str] = field(default_factory=list)
    ignored_tools: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    turn: TurnResult | None = None


async def run_subagent(
    service: SessionService,
    parent_session_id: str,
    request: SubagentRequest,
    *,
    model: ChatModel,
    tools: ToolRegistry | None = None,
    abort: asyncio.Event | None = None,
    depth: int = 0,
) -> SubagentResult:
    """Run a one-shot child session to completion; raise ``subagent.*`` errors on failure.

    ``subagent.timeout`` and ``subagent.aborted`` still leave a closed, readable child log
    (its turn ends ``aborted``); the error's details name the child session.
    """
    if depth >= 1:
        raise RpError("subagent.recursion", "a sub-agent cannot start another sub-agent")
    _check_request(request)
    registry = tools or ToolRegistry()
    allowed = [n for n in dict.fromkeys(request.tools) if n in registry and not registry.get(n).spawns_subagent]
    ignored = [n for n in dict.fromkeys(request.tools) if n not in allowed]
    spec = AgentSpec(
        prompt=PromptAssembly([PromptSection("subagent:system", request.system_prompt, ORDER_IDENTITY)]),
        tools=registry,
        allowed_tools=allowed,
        step_limit=request.step_limit,
        mode="subagent",
        depth=depth + 1,
        max_tokens=request.max_tokens,
        reasoning_effort=request.reasoning_effort,
        # SAMPLING_PARAMS, each absent one left to the provider (validate() refused any other key)
        temperature=request.sampling.get("temperature"),
        top_p=request.sampling.get("top_p"),
        frequency_penalty=request.sampling.get("frequency_penalty"),
        presence_penalty=request.sampling.get("presence_penalty"),
    )
    loop = AgentLoop(service, _DeltaTee(model, request.on_delta) if request.on_delta is not None else model, spec)
    content: list[dict[str, Any]] = [{"type": "text", "text": request.user_text}, *request.images]
    child_abort = asyncio.Event()
    child_id = service.ids("ses_")

    @asynccontextmanager
    async def create(first: list[EventDraft]) -> AsyncIterator[list[Event]]:
        # The child is created with its turn's first events (``create`` checks the parent exists:
        # ``session.not_found``), leased from then on (one statement on PostgreSQL) until its turn
        # ends, and its lease given back with the parent run's when there is one.
        made: list[Event] = []

        async def insert() -> SessionRecord:
            record, events = await service.create_with_events(
                request.preset, parent_id=parent_session_id, title=request.title, seed=first, session_id=child_id, leased=True
            )
            made.extend(events)
            return record

        async with created_session_lease(service.store, insert):
            yield made

    relay = asyncio.ensure_future(_relay(abort, child_abort)) if abort is not None else None
    task = asyncio.ensure_future(loop.run_turn(child_id, content, abort=child_abort, create=create))
    timed_out = False
    try:
        done, _ = await asyncio.wait({task}, timeout=request.timeout)
        if not done:
            timed_out = True
            child_abort.set()  # let the loop close the turn cleanly instead of cancelling it
        turn = await task
    finally:
        if relay is not None:
            relay.cancel()
        service.cache.retire(child_id)  # its one turn is over: its states go first, not the parent's
    details = {"childSessionId": child_id, "outcome": turn.outcome}
    if timed_out:
        raise RpError("subagent.timeout", f"sub-agent did not finish within {request.timeout:g}s", details=details)
    if turn.outcome == "aborted":
        raise RpError("subagent.aborted", "the sub-agent was aborted by its parent", details=details)
    if turn.outcome != "completed":
        err = turn.error or {}
        raise RpError(
            "subagent.failed",
            f"sub-agent ended with {turn.outcome}" + (f": [{err.get('code')}] {err.get('message')}" if err else ""),
            details={**details, **({"error": err} if err else {})},
        )
    result = SubagentResult(child_id, turn.outcome, turn.text, tools=allowed, ignored_tools=ignored, usage=turn.usage, turn=turn)
    if request.result_schema is not None:
        result.data = parse_structured(turn.text, request.result_schema, child_id)
    return result


class _DeltaTee:
    """The child's model, with its text deltas also handed to ``on_delta`` before the loop sees
    them (the loop publishes deltas only to the child session's own subscribers)."""

    def __init__(self, model: ChatModel, on_delta: Callable[[str], Awaitable[None]]) -> None:
        self._model = model
        self._on_delta = on_delta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return flatten(self.stream_batches(request))

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
        on_delta = self._on_delta
        async for batch in stream_batches(self._model, request):
            for event in batch:
                if isinstance(event, TextDelta) and event.text:
                    await on_delta(event.text)
            yield batch


async def _relay(parent: asyncio.Event, child: asyncio.Event) -> None:
    await parent.wait()
    child.set()


def _check_request(request: SubagentRequest) -> None:
    if not request.system_prompt.strip():
        raise ValidationError("subagent.invalid_request", "a sub-agent needs a system prompt", pointer="/systemPrompt")
    if len(request.images) > MAX_IMAGES:
        raise ValidationError("subagent.invalid_request", f"at most {MAX_IMAGES} images", pointer="/images")
    for key in request.sampling:
        if key not in SAMPLING_PARAMS:
            raise ValidationError("subagent.invalid_request", f"unknown sampling parameter {key!r}", pointer=f"/sampling/{key}")
    for i, block in enumerate(request.images):
        if not isinstance(block, dict) or block.get("type") != "image":
            raise ValidationError("subagent.invalid_request", "images must be image content blocks", pointer=f"/images/{i}")
    if request.result_schema is not None:
        try:
            Draft202012Validator.check_schema(request.result_schema)
        except SchemaError as exc:
            raise ValidationError(
                "subagent.invalid_request",
                f"invalid result schema: {exc.message}",
                pointer="/resultSchema" + pointer_from_parts(list(exc.path)),
            ) from None


def parse_structured(text: str, schema: dict[str, Any], child_id: str | None = None) -> Any:
    """The sub-agent's final text as JSON (a ```json fence is tolerated), validated by ``schema``."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    details = {"childSessionId": child_id} if child_id else {}
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise RpError("subagent.invalid_result", f"the sub-agent's result is not JSON: {exc}", pointer="", details=details) from None
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        problems = [Problem("subagent.invalid_result", e.message, pointer=pointer_from_parts(list(e.absolute_path))) for e in errors]
        raise RpError(
            "subagent.invalid_result",
            f"the sub-agent's result does not match its schema: {problems[0].message}",
            pointer=problems[0].pointer,
            details=details,
            problems=problems,
        )
    return value
