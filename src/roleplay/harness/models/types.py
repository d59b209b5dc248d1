"""Provider-neutral values the agent loop speaks: messages, tools, requests, responses, stream events.

These are plain dataclasses on purpose. The event log is the conversation; the loop builds a
``ModelRequest`` from projections on every step and persists what comes back, so nothing here may
hold provider state or depend on the ``openai`` SDK. Each provider translates at its own edge.
"""

from __future__ import annotations

import asyncio
import copy
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, AsyncIterator, Literal, Protocol, Sequence, Union, cast, runtime_checkable

from roleplay.errors import RpError

Role = Literal["system", "user", "assistant", "tool"]
ToolChoice = Union[Literal["auto", "none", "required"], dict[str, str]]

# Reasoning effort words accepted anywhere a route or request names one. Providers map them onto
# what their API understands; "none" means "turn thinking off" where the provider can.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool = False


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    # Raw JSON text exactly as the model produced it: validation and lenient parsing belong to the
    # tool layer, which must be able to report what was actually sent.
    arguments: str


@dataclass
class ChatMessage:
    role: Role
    content: str | list[dict[str, Any]] = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    reasoning: str | None = None
    name: str | None = None
    # ``history.message_tokens``, recorded by a maker that never changes the message
    # (``history.remember_tokens``). On the message, not in a side table: a table entry was two
    # more tracked objects per message, which every full collection walks (issue 16). Not an
    # __init__ argument, so ``dataclasses.replace`` gives a changed copy none.
    known_tokens: int | None = field(default=None, init=False, repr=False, compare=False)

    # A copy may be changed: it starts without the original's recorded count.
    def __copy__(self) -> "ChatMessage":
        return replace(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> "ChatMessage":
        return replace(self, content=copy.deepcopy(self.content, memo), tool_calls=copy.deepcopy(self.tool_calls, memo))

    def text(self) -> str:
        """The text blocks joined; images are skipped."""
        return content_text(self.content)


def content_text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


@dataclass
class ModelRequest:
    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    # Extra body fields merged into the provider request as-is (e.g. ``response_format``). They
    # are the caller's responsibility: no provider validates them.
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise RpError(
                "model.bad_effort",
                f"unknown reasoning effort {self.reasoning_effort!r}; use one of {', '.join(REASONING_EFFORTS)}",
            )
        choice = self.tool_choice
        if isinstance(choice, dict):
            if set(choice) != {"name"} or not isinstance(choice.get("name"), str):
                raise RpError("model.bad_tool_choice", 'a named tool_choice must be {"name": <tool name>}')
            if choice["name"] not in {t.name for t in self.tools}:
                raise RpError("model.bad_tool_choice", f"tool_choice names {choice['name']!r}, which is not offered")
        elif choice not in ("auto", "none", "required"):
            raise RpError("model.bad_tool_choice", f"unknown tool_choice {choice!r}")

    def sampling(self) -> dict[str, float]:
        """The sampling parameters this request sets (wire names), for the provider and the log."""
        values = {k: getattr(self, k) for k in SAMPLING_PARAMS}
        return {k: v for k, v in values.items() if v is not None}


# Sampling parameters a request may carry (a preset's ``sampling``), by their OpenAI wire names.
SAMPLING_PARAMS: tuple[str, ...] = ("temperature", "top_p", "frequency_penalty", "presence_penalty")


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    # Prompt-cache accounting: DeepSeek reports hits and misses; OpenAI reports cached tokens, from
    # which misses follow. None means the provider did not say.
    cache_hit_tokens: int | None = None
    cache_miss_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class ModelResponse:
    text: str
    reasoning: str | None
    tool_calls: list[ToolCall]
    # None when the server sent no usage at all (some OpenAI-compatible servers ignore
    # ``stream_options``); zeros would be a lie the step log would keep forever.
    usage: Usage | None
    finish_reason: str
    model: str
    provider: str
    # Adjustments a provider made to fit the request to its API (e.g. a forced tool_choice
    # downgraded in thinking mode). The loop logs them; they are never errors.
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    index: int
    id: str | None
    name: str | None
    arguments_fragment: str


@dataclass(frozen=True)
class Completed:
    response: ModelResponse


StreamEvent = Union[TextDelta, ReasoningDelta, ToolCallDelta, Completed]


@dataclass(frozen=True)
class Capabilities:
    """What a provider's API can and cannot do, as flags instead of ``isinstance`` checks.

    Defaults describe a plain OpenAI-compatible server; each provider overrides what differs and
    says why next to the override.
    """

    # Send our images as ``image_url`` data URLs. When False, a request with an image fails early
    # with ``model.images_unsupported`` instead of a provider 400 the user cannot read.
    supports_images: bool = True
    # Assistant messages that carried tool calls must be sent back with their reasoning (the
    # field below), even an empty string, or the API answers 400.
    requires_reasoning_on_tool_turns: bool = False
    # Wire name of the reasoning text, both in responses and when sent back.
    reasoning_field: str = "reasoning_content"
    # ``"strict": true`` on a function is only honoured on a separate beta base URL; when any
    # offered tool is strict the request goes there.
    strict_tools_need_beta_base_url: bool = False
    # Whether ``strict`` may be sent at all; when False it is dropped and the loop's own
    # validation is the only guard.
    supports_strict_tools: bool = True
    # Whether a function's ``parameters`` may have ``oneOf``/``anyOf``/``allOf``/``enum``/``not`` at
    # its root (or lack ``type: "object"``). OpenAI answers 400 ``invalid_function_parameters``
    # ("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the
    # top level"), and so do the proxies in front of it; DeepSeek copies that contract. When False
    # the wire declares the union as one merged object (``wire.declared_parameters``) and the tool
    # still validates its arguments against the full union. Local servers (llama.cpp, vLLM) accept
    # a root union; a route to one may set this True to keep the sharper declaration.
    accepts_root_combinators: bool = False
    # Forced tool_choice ("required" or a named tool) allowed while thinking is on. When False it
    # is downgraded to "auto" and a warning is returned.
    supports_tool_choice_in_thinking: bool = True
    # Thinking switched through ``extra_body={"thinking": {"type": "enabled"|"disabled"}}``.
    thinking_via_extra_body: bool = False
    # Map of our effort words to the provider's ``reasoning_effort`` values; None passes them
    # through unchanged, an empty map means the parameter is never sent.
    reasoning_effort_map: dict[str, str] | None = None
    # Name of the output-length parameter. DeepSeek silently ignores ``max_completion_tokens``;
    # OpenAI's reasoning models reject ``max_tokens``.
    max_tokens_param: str = "max_tokens"
    # Whether temperature, top_p and the penalties may be sent while the model thinks. OpenAI's
    # reasoning models answer 400 to them; DeepSeek accepts and ignores them in thinking mode.
    # When False they are left out of a thinking request with a warning, so a preset's samplers
    # never break a request.
    supports_sampling_in_thinking: bool = True
    # Ask for a final usage chunk with ``stream_options={"include_usage": true}``.
    supports_stream_usage: bool = True
    # Regex on the error message that marks a context-window overflow; group 1, when present, is
    # the window in tokens. OpenAI's ``context_length_exceeded`` code is always recognised too.
    context_overflow_pattern: str | None = r"maximum context length is (\d+) tokens"
    # Whether the model can call tools at all. Many local models (and servers started without a
    # tool parser) cannot; a roleplay turn on such a route runs Chat mode without tools: the
    # runtime calls the Writer itself and makes the commit (``core/toolfree.py``). Set per route
    # (``openai/<model>?tools=off``); a provider's refusal of a tool request is detected too
    # (``model.tools_unsupported``).
    supports_tools: bool = True
    # Whether ``response_format: {"type": "json_object"}`` is honoured. A tool-free roleplay turn
    # asks for its state changes in one JSON-mode call; without it the turn commits no effects
    # and says so in a diagnostic (``?json=off`` on the route).
    supports_json_mode: bool = True
    # Tokens one request may hold, prompt and output together, or None when unknown (any model
    # of an OpenAI-compatible server we do not list). Providers fill it per known model from the
    # registry (``registry.context_window``); the roleplay Writer fits its history within it.
    context_window: int | None = None


@runtime_checkable
class ChatModel(Protocol):
    provider: str
    model: str
    label: str
    capabilities: Capabilities

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield deltas, then exactly one ``Completed``; failures raise ``RpError``."""
        ...


# The agent loop sends a step's request while it logs that step's step/start and model/request
# (``loop.AgentLoop._send_early``): the provider starts on the prompt one database round trip
# sooner, on the way to the first token (issue 16). Only a model with ``sends_before_logged``
# (the OpenAI-compatible client) is started early, and it waits on this event after sending and
# before anything of the answer (its first events, or its error) reaches the layers above it. So
# no wrapper acts on an answer (an overflow compaction, a tool refusal), no delta is published and
# nothing is appended before the request is in the log, exactly as when it was sent afterwards.
REQUEST_LOGGED: ContextVar[asyncio.Event | None] = ContextVar("rp_request_logged", default=None)


async def request_logged() -> None:
    """Wait until the request being answered is logged (``REQUEST_LOGGED``); at once elsewhere."""
    gate = REQUEST_LOGGED.get()
    if gate is not None and not gate.is_set():
        await gate.wait()


def stream_batches(model: ChatModel, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
    """``model.stream(request)``'s events in batches: the lists of a model (or wrapper) whose class
    defines ``stream_batches`` (the OpenAI-compatible client gives one per read from its socket),
    else one event a batch. Every layer between the provider and the loop handing on a batch
    instead of each event costs one generator step per batch, not one per frame. Looked up on the
    class: a wrapper that forwards unknown attributes to its inner model (``__getattr__``) and
    only overrides ``stream`` must not be bypassed."""
    method = getattr(type(model), "stream_batches", None)
    if method is not None:
        return cast("AsyncIterator[Sequence[StreamEvent]]", method(model, request))
    return _one_by_one(model.stream(request))


async def _one_by_one(events: AsyncIterator[StreamEvent]) -> AsyncIterator[Sequence[StreamEvent]]:
    async for event in events:
        yield (event,)


async def flatten(batches: AsyncIterator[Sequence[StreamEvent]]) -> AsyncIterator[StreamEvent]:
    """A wrapper's ``stream`` from its ``stream_batches``: the same events, one by one."""
    async for batch in batches:
        for event in batch:
            yield event


async def complete(model: ChatModel, request: ModelRequest) -> ModelResponse:
    """Drain a stream and return its response (for callers with no live channel)."""
    result: ModelResponse | None = None
    async for batch in stream_batches(model, request):
        for event in batch:
            if isinstance(event, Completed):
                if result is not None:
                    raise RpError("model.protocol", f"{model.provider} stream completed twice")
                result = event.response
    if result is None:
        raise RpError("model.protocol", f"{model.provider} stream ended without a Completed event")
    return result
