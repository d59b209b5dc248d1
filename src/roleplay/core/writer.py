"""``rp_write_turn``: run a fresh Writer sub-agent on the frozen context build.

The Writer is a one-shot child session with its own persona (harness identity + narrative
writing rules only), one flat user prompt (the run's frozen Writer prompt), this turn's image
blocks after the text, and no tools. A run accepts exactly one successful Writer artifact.
A failure, a refusal or an empty text forms no artifact, and the parent may call again.

The successful ``tool/result`` carries ``meta.kind = "rp-agent/writer-result"`` with the child
session, route, context sections, prompt hash and raw text (the spec's ContextSnapshot): the
Writer's full prompt is auditable in the child session, and the hash ties the commit to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from roleplay.canonical import sha256_hex
from roleplay.errors import RpError
from roleplay.harness.models.types import ChatModel
from roleplay.harness.sessions import SessionService
from roleplay.harness.subagents import SubagentRequest
from roleplay.harness.tools import Tool, ToolContext, ToolOutput

from .subagent_run import run_structured
from .types import FrozenBuild, WriterArtifact

WRITER_PRESET = "rp-writer"
WRITER_RESULT_KIND = "rp-agent/writer-result"
WRITER_TIMEOUT = 600.0
# Finish reasons that mean the provider refused or filtered the generation (OpenAI-compatible).
REFUSAL_FINISH_REASONS = frozenset({"content_filter"})

WRITE_SCHEMA_CHAT: dict[str, Any] = {
    "type": "object",
    "properties": {"action": {"const": "write", "description": 'Always "write": start the Writer for this turn.'}},
    "required": ["action"],
    "additionalProperties": False,
}
MAX_BRIEF = 4000
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
    """The per-run Writer state the tool reads and fills (``ToolContext.services["rpWriter"]``)."""

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


def writer_prompt(build: FrozenBuild, brief: str | None = None) -> str:
    if not brief:
        return build.writer_prompt
    return f"{build.writer_prompt}\n\n<writing_brief>\n{brief.strip()}\n</writing_brief>"


async def _finish_reason(service: SessionService, child_id: str) -> str | None:
    """The finish reason of the Writer's answer, from its one-shot child log (a few events)."""
    answers = [e for e in await service.events(child_id) if e.type == "assistant/message"]
    return answers[-1].payload.get("finishReason") if answers else None


def write_turn_tool(service: SessionService, *, agent_mode: bool = False, guidance: str | None = None) -> Tool:
    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        slot: WriterSlot | None = ctx.services.get("rpWriter")
        if slot is None:
            raise RpError("writer.no_run", "rp_write_turn is only available inside a roleplay run")
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
        )
        try:
            result = await run_structured(service, ctx.session_id, request, model=slot.model, abort=ctx.abort, depth=ctx.depth)
        except RpError as exc:
            raise RpError(
                "writer.failed",
                f"the Writer did not produce a draft ({exc.code}: {exc.message}); you may call rp_write_turn again",
                details={"cause": exc.code, **exc.details},
            ) from None
        finish = await _finish_reason(service, result.session_id)
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
        artifact = WriterArtifact(
            call_id=ctx.call_id,
            child_session_id=result.session_id,
            route=slot.route,
            prompt_hash=sha256_hex(prompt),
            section_ids=tuple(s.slot_id for s in slot.build.sections),
            text=text,
        )
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
        return ToolOutput(
            f'<writer_draft call_id="{ctx.call_id}">\n{text}\n</writer_draft>\nThe draft is ready. Call rp_commit_turn next.',
            meta=meta,
        )

    return Tool(
        "rp_write_turn",
        "Start the fresh Writer sub-agent for this turn. It writes the narrative reply from the frozen story context.",
        WRITE_SCHEMA_AGENT if agent_mode else WRITE_SCHEMA_CHAT,
        handler,
        guidance=guidance,
        timeout=WRITER_TIMEOUT + 30,
    )
