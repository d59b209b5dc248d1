"""The ``rp.reply-options`` artifact generator: one structured sub-agent call per committed turn.

Spec ``rp-reply-options`` and 事务与事件 5: after the core body, State, guards and commit
diagnostics have all passed, Core runs the artifact generators in order; this one makes one light
structured sub-agent call with the same frozen final body and the character context, output fixed
as ``{"options": [string, …]}``, normalised (``reply_options.normalize``) and persisted as the
``rp.reply-options`` v1 extension of the commit (``reply_options.projection``). The parent and
``rp_commit_turn`` neither generate nor require it, so it is deliberately *not* a parent-side
extension capability: declaring one would put it in every parent's tool schema.

Count, length and direction keywords (settings ``replyOptions.count``,
``replyOptions.maxCharacters``, ``replyOptions.keywords``, read once per commit) only guide the
model; normalisation enforces count and length. Every failure drops the options and leaves one
stable diagnostic on the commit (``artifact.failed`` with ``details.error.code`` one of the codes
below; ``artifact.timeout`` / ``artifact.too_large`` from the runner), never blocking the commit:

============================  ====================================================================
``reply_options.no_run``      the commit ran outside a roleplay run (nothing to call a model with)
``reply_options.unsupported`` the route has no JSON mode (``?json=off``): no structured output
``subagent.timeout``          the sub-agent did not answer in time (its child log stays closed)
``subagent.failed``           the model failed (the child's turn error is in the details)
``reply_options.invalid``     the answer is not ``{"options": [...]}``
``reply_options.empty``       nothing usable was left after normalisation
============================  ====================================================================

The call is a normal one-shot child session of the story (preset ``rp-reply-options``), so it is
listed under the story and replayable like the Writer's. The route is the Writer's: the model the
run already trusts with the story text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, AsyncIterator, Sequence

from roleplay.core.artifacts import ArtifactGenerator, ArtifactInput
from roleplay.core.settings import SettingsSnapshot, read_settings
from roleplay.core.subagent_run import run_structured
from roleplay.errors import RpError
from roleplay.harness.models.types import ChatModel, ModelRequest, StreamEvent, flatten, stream_batches
from roleplay.harness.subagents import SubagentRequest

from .normalize import options_from_answer
from .projection import EXTENSION_KEY, EXTENSION_VERSION, extension_value
from roleplay.names import REPLY_OPTIONS_FEATURE

PRESET = REPLY_OPTIONS_FEATURE  # the sub-agent preset carries its feature's name
SUBAGENT_TIMEOUT = 45.0
# The runner's own bound is a backstop above the sub-agent's, so the child normally ends first
# and closes its log as ``aborted`` itself.
GENERATOR_MARGIN = 15.0
MAX_BYTES = 24_576  # 8 options of 500 characters at up to 4 bytes each, and the JSON around them
MAX_CONTEXT_CHARS = 6_000  # the character context is guidance here, not the story
CLOSE_TIMEOUT = 5.0  # an aborted call waits this long for its child to close its turn

SYSTEM_MARKER = "You suggest reply options for the player of an interactive story."
SYSTEM_PROMPT = f"""{SYSTEM_MARKER}
Read the reply the player has just received and propose what the player could send next: each
option a complete message in the player's own voice, ready to send as it is (a line of speech, an
action, or both).

Answer with one JSON object and nothing else: {{"options": ["…", "…"]}}

Rules:
- Give exactly the number of options the guidance asks for, each within its character limit.
- Write them in the language of the story reply.
- Make them clearly different: different directions the player could take the story.
- Speak only for the player's character; never narrate for other characters or decide outcomes.
- When the guidance lists directions, lean the options towards them."""

OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "v": {"const": EXTENSION_VERSION},
        "options": {"type": "array", "minItems": 1, "maxItems": 8, "items": {"type": "string", "minLength": 1, "maxLength": 500}},
    },
    "required": ["v", "options"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Guidance:
    count: int = 3
    max_characters: int = 80
    keywords: tuple[str, ...] = ()

    def block(self) -> str:
        keywords = ", ".join(self.keywords) if self.keywords else "(none)"
        return f'<guidance count="{self.count}" max_characters="{self.max_characters}">\ndirections: {keywords}\n</guidance>'


async def read_guidance(store: Any, settings: SettingsSnapshot | None = None) -> Guidance:
    """The guidance from ``settings`` (the run's frozen snapshot), else read from the table."""
    if settings is None:
        settings = await read_settings(store)
    return Guidance(
        count=int(settings.value("replyOptions.count")),
        max_characters=int(settings.value("replyOptions.maxCharacters")),
        keywords=tuple(settings.value("replyOptions.keywords")),
    )


def _escape(text: str) -> str:
    """Story text must not close the tags that frame it."""
    for tag in ("character_context", "player_input", "reply", "guidance"):
        text = text.replace(f"</{tag}", f"&lt;/{tag}")
    return text


def user_prompt(body: str, guidance: Guidance, *, context: str = "", player_input: str = "", player: str | None = None) -> str:
    parts = []
    if context.strip():
        clipped = context if len(context) <= MAX_CONTEXT_CHARS else context[:MAX_CONTEXT_CHARS] + "\n…"
        parts.append(f"<character_context>\n{_escape(clipped)}\n</character_context>")
    if player:
        parts.append(f"The player's character: {_escape(player)}")
    if player_input.strip():
        parts.append(f"<player_input>\n{_escape(player_input)}\n</player_input>")
    parts.append(f"<reply>\n{_escape(body)}\n</reply>")
    parts.append(guidance.block())
    return "\n\n".join(parts)


class JsonMode:
    """The route's model with JSON mode (``response_format: json_object``) on every request."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return flatten(self.stream_batches(request))

    def stream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
        # The inner model's batches themselves: no generator step of this layer per batch.
        return stream_batches(self._model, replace(request, extra={**request.extra, "response_format": {"type": "json_object"}}))


async def generate_options(view: ArtifactInput, *, store: Any, service: Any, timeout: float | None = None) -> dict[str, Any]:
    """The extension value for one commit, or an ``RpError`` naming why there is none.
    ``timeout`` bounds the sub-agent (default ``SUBAGENT_TIMEOUT``, read at each call)."""
    run = view.run.run if view.run is not None else None
    if run is None:
        raise RpError("reply_options.no_run", "reply options are made inside a roleplay run only")
    model: ChatModel = run.writer.model
    if not model.capabilities.supports_json_mode:
        raise RpError(
            "reply_options.unsupported",
            f"{model.label} has no JSON mode on this route (?json=off), so it cannot give structured reply options",
            details={"provider": model.provider, "model": model.model},
        )
    prepared = run.p
    # Settings are frozen for the run at prepare: its reply options follow the same snapshot.
    guidance = await read_guidance(store, getattr(prepared, "settings", None))
    request = SubagentRequest(
        preset=PRESET,
        system_prompt=SYSTEM_PROMPT,
        user_text=user_prompt(
            view.body,
            guidance,
            context=prepared.build.parent_context,
            player_input=prepared.input_text,
            player=prepared.macros.user_name,
        ),
        tools=[],
        timeout=SUBAGENT_TIMEOUT if timeout is None else timeout,
        step_limit=1,
        title="Reply options",
    )
    abort = asyncio.Event()
    task = asyncio.ensure_future(run_structured(service, view.commit.session_id, request, model=JsonMode(model), abort=abort))
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:
        # The run was aborted (or the runner's backstop fired): let the child close its turn.
        abort.set()
        await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not task.done():
            task.cancel()
        elif not task.cancelled():
            task.exception()  # its subagent.aborted is expected: retrieved, not reported as lost
        raise
    options = options_from_answer(result.text, count=guidance.count, max_characters=guidance.max_characters)
    return extension_value(options)


def reply_options_generator(runtime: Any) -> ArtifactGenerator:
    async def generate(view: ArtifactInput) -> dict[str, Any]:
        return await generate_options(view, store=runtime.store, service=runtime.service)

    return ArtifactGenerator(
        EXTENSION_KEY, generate, schema=OPTIONS_SCHEMA, timeout=SUBAGENT_TIMEOUT + GENERATOR_MARGIN, max_bytes=MAX_BYTES
    )


__all__ = [
    "OPTIONS_SCHEMA",
    "PRESET",
    "SYSTEM_MARKER",
    "SYSTEM_PROMPT",
    "Guidance",
    "JsonMode",
    "generate_options",
    "read_guidance",
    "reply_options_generator",
    "user_prompt",
]
