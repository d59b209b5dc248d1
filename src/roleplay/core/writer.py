"""``rp_write_turn``: run a fresh Writer sub-agent on the frozen context build.

The Writer is a one-shot child session with its own persona (harness identity + narrative
writing rules only), one flat user prompt (the run's frozen Writer prompt), this turn's image
blocks after the text, and no tools. A run accepts exactly one successful Writer artifact.
A failure, a refusal or an empty text forms no artifact, and the parent may call again.

The successful ``tool/result`` carries ``meta.kind = "rp-agent/writer-result"`` with the child
session, route, context sections, prompt hash and raw text (the spec's ContextSnapshot), and
``firstTokenAt``, when its first text delta arrived (by the store's clock; ``rp metrics``): the
Writer's full prompt is auditable in the child session, and the hash ties the commit to it.

**Live reply stream.** While the Writer writes, its text deltas go to the parent session's
subscribers as transient ``assistant/chunk`` notifications (``{"type", "turnId", "attempt",
"text"}``; never stored), with the run's identity macros expanded on the fly and the draft's
outer whitespace held back, so the chunks join to exactly the artifact's text. Delivery is
exactly once per turn: when an attempt that already streamed text fails (error, refusal, empty
draft, abort), or its final text differs from what streamed, a chunk with ``"reset": true`` (and
``"text": ""``) tells subscribers to discard the turn's text so far; a mismatch is followed by the
final text. The parent's own text is never streamed in Chat mode (``RpRun.publish_deltas``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from roleplay.harness.store.texts import sha256_text
from roleplay.errors import RpError
from roleplay.harness.models.types import ChatModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.subagents import SubagentRequest
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import WRITE_TURN_TOOL, WRITER_RESULT_KIND
from roleplay.harness.names import ASSISTANT_CHUNK, ASSISTANT_MESSAGE

from .macros import MacroContext, MacroStream
from .run_context import require_run_deps
from .subagent_run import run_structured
from .types import FrozenBuild, WriterArtifact

WRITER_PRESET = "rp-writer"
WRITER_TIMEOUT = 600.0
CHUNK = 48  # characters per chunk when a final text is re-sent after a reset
# Finish reasons that mean the provider refused or filtered the generation (OpenAI-compatible).
REFUSAL_FINISH_REASONS = frozenset({"content_filter"})

WRITE_SCHEMA_CHAT: dict[str, Any] = {
    "type": "object",
    "properties": {"action": {"const": "write", "description": 'Always "write": start the Writer for this turn.'}},
    "required": ["action"],
    "additionalProperties": False,
}
MAX_BRIEF = 4000
NEXT_CHAT = "The draft is ready. Call rp_commit_turn next."
# Agent mode: the draft is the parent's material, not yet the reply (it may revise it).
NEXT_AGENT = (
    "The draft is ready. Apply the specialists whose contracts run after the Writer, revise it if needed, "
    "then write the complete final text as your reply together with one rp_commit_turn call."
)
WRITE_SCHEMA_AGENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"const": "write"},
        "brief": {"type": "string", "maxLength": MAX_BRIEF, "description": "Optional bounded writing brief appended to the Writer prompt."},
    },
    "required": ["action"],
    "additionalProperties": False,
}


@dataclass
class WriterSlot:
    """The per-run Writer state the tool reads and fills (``RpRunDeps.writer``)."""

    build: FrozenBuild
    system_prompt: str
    model: ChatModel
    route: dict[str, Any]
    images: list[dict[str, Any]] = field(default_factory=list)
    artifact: WriterArtifact | None = None
    attempts: int = 0
    # Called with the artifact once it exists (the run rewires its step mask and commit session).
    on_artifact: Callable[[WriterArtifact], None] | None = None
    # Applied to the Writer's output before it becomes the artifact (the run's identity macros).
    transform_text: Callable[[str], str] | None = None
    # The identity macros ``transform_text`` expands, applied to the live stream as it arrives.
    macros: MacroContext | None = None
    # The bound preset's sampler settings (wire names) and the output limit, for the request.
    sampling: dict[str, float] = field(default_factory=dict)
    max_tokens: int | None = None


class LiveDraft:
    """One Writer attempt's text, forwarded to the parent session's subscribers as it arrives."""

    def __init__(self, service: SessionService, session_id: str, turn_id: str | None, attempt: int, macros: MacroContext | None) -> None:
        self.service = service
        self.session_id = session_id
        self.turn_id = turn_id
        self.attempt = attempt
        self.macros = MacroStream(macros) if macros is not None else None
        self.sent = ""  # what subscribers hold of this attempt
        self._held = ""  # trailing whitespace: the draft is stripped, so it shows only if text follows

    async def feed(self, delta: str) -> None:
        await self._emit(self.macros.feed(delta) if self.macros is not None else delta)

    async def finish(self, final: str) -> None:
        """Send what is held back; if the subscribers' text is not ``final``, replace it."""
        if self.macros is not None:
            await self._emit(self.macros.flush())
        if self.sent == final:
            return
        await self.discard()
        for i in range(0, len(final), CHUNK):
            await self._publish(final[i : i + CHUNK])
        self.sent = final

    async def discard(self) -> None:
        """Tell subscribers to drop this attempt's text (it will not be the reply)."""
        if self.sent:
            await self.service.store.publish_chunk(
                self.session_id, {"type": ASSISTANT_CHUNK, "turnId": self.turn_id, "attempt": self.attempt, "reset": True, "text": ""}
            )
            self.sent = ""

    async def _emit(self, text: str) -> None:
        text = self._held + text
        if not self.sent:
            text = text.lstrip()
        body = text.rstrip()
        self._held = text[len(body) :]
        if body:
            await self._publish(body)

    async def _publish(self, text: str) -> None:
        self.sent += text
        await self.service.store.publish_chunk(
            self.session_id, {"type": ASSISTANT_CHUNK, "turnId": self.turn_id, "attempt": self.attempt, "text": text}
        )


def writer_prompt(build: FrozenBuild, brief: str | None = None) -> str:
    if not brief:
        return build.writer_prompt
    return f"{build.writer_prompt}\n\n<writing_brief>\n{brief.strip()}\n</writing_brief>"


async def _finish_reason(service: SessionService, child_id: str) -> str | None:
    """The finish reason of the Writer's answer, from its one-shot child log (a few events)."""
    answers = [e for e in await service.events(child_id) if e.type == ASSISTANT_MESSAGE]
    return answers[-1].payload.get("finishReason") if answers else None


def write_turn_tool(service: SessionService, *, agent_mode: bool = False, guidance: str | None = None) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        slot = require_run_deps(ctx, WRITE_TURN_TOOL, "writer.no_run").writer
        if slot is None:
            raise RpError("writer.no_run", "rp_write_turn is only available in a run that lends it a Writer slot")
        if slot.artifact is not None:
            raise RpError(
                "writer.already_written",
                "this run already has its Writer draft; call rp_commit_turn next",
                details={"writerCallId": slot.artifact.call_id},
            )
        slot.attempts += 1
        prompt = writer_prompt(slot.build, args.get("brief"))
        request = SubagentRequest(
            preset=WRITER_PRESET,
            system_prompt=slot.system_prompt,
            user_text=prompt,
            images=list(slot.images),
            tools=[],
            timeout=WRITER_TIMEOUT,
            step_limit=1,
            title="Writer",
            max_tokens=slot.max_tokens,
            sampling=dict(slot.sampling),
        )
        live = LiveDraft(service, ctx.session_id, ctx.turn_id, slot.attempts, slot.macros)
        first_token: list[str] = []  # when the first text delta arrived, by the store's (injected) clock

        async def on_delta(delta: str) -> None:
            if not first_token:
                first_token.append(service.store.now())
            if not agent_mode:  # Agent mode: the draft is the parent's material, not yet the reply
                await live.feed(delta)

        request.on_delta = on_delta
        try:
            artifact = await _write(service, slot, request, prompt, ctx)
        except BaseException:
            await live.discard()
            raise
        if not agent_mode:
            await live.finish(artifact.text)
        slot.artifact = artifact
        if slot.on_artifact is not None:
            slot.on_artifact(artifact)
        meta = {
            "kind": WRITER_RESULT_KIND,
            "childSessionId": artifact.child_session_id,
            "route": artifact.route,
            "sections": list(artifact.section_ids),
            "promptHash": artifact.prompt_hash,
            "epoch": slot.build.epoch,
            "text": artifact.text,
        }
        if first_token:  # time to first token: rp metrics reads it against the request and the turn start
            meta["firstTokenAt"] = first_token[0]
        return ToolOutput(
            f'<writer_draft call_id="{ctx.call_id}">\n{artifact.text}\n</writer_draft>\n{NEXT_AGENT if agent_mode else NEXT_CHAT}',
            meta=meta,
        )

    async def _write(service: SessionService, slot: WriterSlot, request: SubagentRequest, prompt: str, ctx: ToolContext) -> WriterArtifact:
        try:
            result = await run_structured(service, ctx.session_id, request, model=slot.model, abort=ctx.abort, depth=ctx.depth)
        except RpError as exc:
            raise RpError(
                "writer.failed",
                f"the Writer did not produce a draft ({exc.code}: {exc.message}); you may call rp_write_turn again",
                details={"cause": exc.code, **exc.details},
            ) from None
        # The loop kept it from the answer it logged (a read of the child log saved).
        finish = result.turn.finish_reason if result.turn is not None else await _finish_reason(service, result.session_id)
        if finish in REFUSAL_FINISH_REASONS:
            # A filtered or refused generation may still carry text (a refusal note, a cut-off
            # draft); it is not the story's reply (spec: 失败、拒绝、空输出和超限允许重试).
            raise RpError(
                "writer.refused",
                f"the Writer's provider refused or filtered the draft (finish reason {finish!r}); you may call rp_write_turn again",
                details={"childSessionId": result.session_id, "finishReason": finish},
            )
        text = result.text.strip()
        if slot.transform_text is not None:
            text = slot.transform_text(text).strip()
        if not text:
            raise RpError(
                "writer.empty",
                "the Writer returned an empty draft; you may call rp_write_turn again",
                details={"childSessionId": result.session_id},
            )
        return WriterArtifact(
            call_id=ctx.call_id,
            child_session_id=result.session_id,
            route=slot.route,
            # The frozen build's own string (no brief): its digest was taken when the build was
            # frozen and when the Writer's message was stored (``sha256_text`` keeps the last few
            # long texts' by identity), so a long story's prompt is not hashed a third time.
            prompt_hash=sha256_text(prompt),
            section_ids=tuple(s.slot_id for s in slot.build.sections),
            text=text,
        )

    return Tool(
        WRITE_TURN_TOOL,
        "Start the fresh Writer sub-agent for this turn. It writes the narrative reply from the frozen story context.",
        WRITE_SCHEMA_AGENT if agent_mode else WRITE_SCHEMA_CHAT,
        handler,
        guidance=guidance,
        timeout=WRITER_TIMEOUT + 30,
    )
