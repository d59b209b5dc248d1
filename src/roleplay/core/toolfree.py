"""Chat mode for a route whose model cannot call tools.

Many local models, and servers started without a tool parser, cannot call tools. On the normal
path such a model answers the run context in plain text: the Writer never runs and nothing is
committed. Here the runtime plays the parent's part instead, on the same agent loop, so the log
has the same shape as any Chat turn and the commit goes through the same ``rp_commit_turn``
validation and landing (no bypass):

1. Step 1: the runtime calls ``rp_write_turn {"action": "write"}`` (the ordinary Writer child
   session). A failed Writer is called once more, then the turn ends as an error.
2. Step 2: the state changes come from one JSON-mode call to the route's model, given the
   turn's commit material (the state commit contract), the input and the Writer's draft. The
   runtime calls ``rp_commit_turn`` with ``references.writer`` and those effects. A model without
   JSON mode (``?json=off``), a failed call or an unreadable answer gives no effects and a
   diagnostic; the turn still commits the Writer's text.
3. A commit whose effects are rejected is made again without effects, with the rejection kept
   in a diagnostic. A commit without effects that fails ends the turn as an error.

Every runtime-made call says so: the assistant message carries a model warning, and the commit
carries ``run.tool_free`` (a route flagged ``?tools=off``) or ``run.tools_refused`` (the
provider refused a request with tools: detected at the first step, this run falls back).

A tool-free parent cannot tell discussion from story, so every input is written as a story turn.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Sequence

import json_repair

from roleplay.canonical import canonical_json
from roleplay.errors import RpError
from roleplay.harness.loop import TurnResult
from roleplay.harness.models.types import (
    ChatMessage,
    ChatModel,
    Completed,
    ModelRequest,
    ModelResponse,
    StreamEvent,
    ToolCall,
    Usage,
    complete,
    flatten,
    stream_batches,
)

from .context_build import escape_request_tags
from .prompts import COMMIT_TURN_TOOL, WRITE_TURN_TOOL
from .types import Diagnostic, WriterArtifact

if TYPE_CHECKING:
    from .run import RpRun

TOOL_FREE = "run.tool_free"
TOOLS_REFUSED = "run.tools_refused"
NOT_COMMITTED = "run.not_committed"
EFFECTS_UNAVAILABLE = "toolfree.effects_unavailable"  # no JSON mode on the route
EFFECTS_FAILED = "toolfree.effects_failed"  # the JSON-mode call failed
EFFECTS_UNREADABLE = "toolfree.effects_unreadable"  # its answer is not {"effects": [...]}
EFFECTS_REJECTED = "toolfree.effects_rejected"  # rp_commit_turn refused the proposed effects
WRITER_ATTEMPTS = 2
MAX_KEPT_TEXT = 2000  # characters of a model answer kept in a diagnostic
MAX_REPAIR = 64_000  # characters of an answer json-repair may try to mend
RUNTIME_CALL_WARNING = "tool-free route: the runtime made this call, not the model"

# The one prompt of the JSON-mode call (kept beside its only caller: it is not part of the
# parent, Writer or request layering that core/prompts.py renders).
STATE_CHANGES_SYSTEM = """\
You record the story-state changes of one roleplay turn. The turn's reply is already written; do not write story text.

- <commit_context> holds the state commit contract: each namespace's current value, expected revision, update mode and rules.
- Read <reply> (what happened this turn) against <player_input>, and list only the changes the reply clearly implies and the contract allows. Follow the contract exactly: its operation shapes, rule ids, bounds and expected revisions.
- Answer with one JSON object and nothing else: {"effects": [ ... ]}. Each effect is {"kind": "state.update", "namespace": ..., "expectedRevision": ..., "payload": {"changes": [...]}}, at most one per namespace. With no change, answer {"effects": []}.\
"""


def parent_model(run: RpRun, model: ChatModel) -> ChatModel:
    """The parent model of a Chat run: the runtime-driven one for a route that cannot call tools,
    else the model itself, watched for a provider refusal of tools."""
    if not model.capabilities.supports_tools:
        return ToolFreeParent(run, model)
    return ToolRefusalFallback(run, model)


def uncommitted_note(turn: TurnResult) -> Diagnostic | None:
    """The flag on a turn that ended without a commit (the reply is not part of the story)."""
    if any(r.ok and r.name == COMMIT_TURN_TOOL for r in turn.tool_results):
        return None
    if turn.outcome != "completed":
        message = f"the turn ended ({turn.outcome}) without a commit: nothing was added to the story"
        return Diagnostic(NOT_COMMITTED, message, details={"outcome": turn.outcome})
    if not turn.tool_results:
        # The model answered in plain text without calling the Writer: a discussion answer, or a
        # model that cannot call tools at all.
        return Diagnostic(
            NOT_COMMITTED,
            "the reply was not committed: the model answered without calling the Writer, so the story did not advance. "
            "That is right for a question about the story; if this model cannot call tools, add ?tools=off to its "
            "route (e.g. --model openai/<model>?tools=off)",
            details={"outcome": turn.outcome, "toolCalls": 0},
        )
    return Diagnostic(NOT_COMMITTED, "the reply was not committed: the story did not advance", details={"outcome": turn.outcome})


class ToolFreeParent:
    """A ``ChatModel`` for the loop whose "responses" are the runtime's own calls (module doc)."""

    def __init__(self, run: RpRun, model: ChatModel, *, refused: RpError | None = None) -> None:
        self.provider = model.provider
        self.model = model.model
        self.label = f"{model.label} · tool-free (the runtime calls the Writer and commits)"
        self.capabilities = replace(model.capabilities, supports_tools=False)
        self._run = run
        self._inner = model
        self._writes = 0
        self._commits: list[tuple[str, bool]] = []  # (call id, carried effects)
        self._proposed: list[Any] = []
        if refused is None:
            intro = Diagnostic(
                TOOL_FREE,
                "this route cannot call tools (?tools=off): the runtime called the Writer and made the commit",
                details={"route": model.label},
            )
        else:
            intro = Diagnostic(
                TOOLS_REFUSED,
                f"the provider refused a request with tools ({refused.message}); this run fell back to the tool-free path. "
                "Add ?tools=off to the route to skip the refused request",
                details={"route": model.label, "cause": refused.code, **refused.details},
            )
        self._notes: list[Diagnostic] = [intro]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield Completed(await self._respond(request))

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
        yield (Completed(await self._respond(request)),)

    async def _respond(self, request: ModelRequest) -> ModelResponse:
        artifact = self._run.writer.artifact
        if artifact is None:
            if self._writes >= WRITER_ATTEMPTS:
                raise RpError(
                    "writer.failed",
                    f"the Writer failed {self._writes} times on this tool-free turn: {_last_tool_text(request)}",
                    details={"attempts": self._writes},
                )
            self._writes += 1
            return self._call(WRITE_TURN_TOOL, {"action": "write"})
        if not self._commits:
            effects, usage = await self._state_changes(artifact)
            self._proposed = effects
            return self._commit(artifact, effects, usage)
        last_id, had_effects = self._commits[-1]
        error = _tool_text(request, last_id)
        if had_effects:
            self._note(
                Diagnostic(
                    EFFECTS_REJECTED,
                    "rp_commit_turn rejected the state changes the model proposed; the turn was committed without them",
                    details={"effects": self._proposed, "error": error[:MAX_KEPT_TEXT]},
                )
            )
            return self._commit(artifact, [], None)
        raise RpError(
            "run.commit_failed", f"the runtime's commit of this tool-free turn was rejected: {error}", details={"callId": last_id}
        )

    def _commit(self, artifact: WriterArtifact, effects: list[Any], usage: Usage | None) -> ModelResponse:
        response = self._call(COMMIT_TURN_TOOL, {"references": {"writer": artifact.call_id}, "effects": effects}, usage)
        self._commits.append((response.tool_calls[0].id, bool(effects)))
        # The commit carries every note of this run (RpRun hands them to note_response).
        self._run.step_notes.extend(self._notes)
        for note in self._notes:
            if note not in self._run.diagnostics:
                self._run.diagnostics.append(note)
        return response

    def _note(self, diagnostic: Diagnostic) -> None:
        self._notes.append(diagnostic)

    def _call(self, name: str, arguments: dict[str, Any], usage: Usage | None = None) -> ModelResponse:
        call = ToolCall(self._run.rt.ids("call_"), name, canonical_json(arguments))
        return ModelResponse(
            text="",
            reasoning=None,
            tool_calls=[call],
            usage=usage,
            finish_reason="tool_calls",
            model=self._inner.model,
            provider=self._inner.provider,
            warnings=(RUNTIME_CALL_WARNING,),
        )

    async def _state_changes(self, artifact: WriterArtifact) -> tuple[list[Any], Usage | None]:
        """The effects of one JSON-mode call; every way it can fail is a note and no effects."""
        material = self._run.p.build.commit_context.strip()
        if not material:
            return [], None  # no story state on this session: nothing to change
        if not self._inner.capabilities.supports_json_mode:
            self._note(Diagnostic(EFFECTS_UNAVAILABLE, "this route has no JSON mode (?json=off), so the turn changes no story state"))
            return [], None
        user = (
            f"<commit_context>\n{escape_request_tags(material)}\n</commit_context>\n"
            f"<player_input>\n{_plain(self._run.p.input_text)}\n</player_input>\n"
            f"<reply>\n{_plain(artifact.text)}\n</reply>"
        )
        request = ModelRequest(
            [ChatMessage("system", STATE_CHANGES_SYSTEM), ChatMessage("user", user)],
            extra={"response_format": {"type": "json_object"}},
        )
        try:
            response = await complete(self._inner, request)
        except RpError as exc:
            self._note(
                Diagnostic(
                    EFFECTS_FAILED,
                    f"the state-change call failed ({exc.code}: {exc.message}); the turn changes no story state",
                    details={"cause": exc.code},
                )
            )
            return [], None
        effects = _effects_of(response.text)
        if effects is None:
            self._note(
                Diagnostic(
                    EFFECTS_UNREADABLE,
                    'the state-change answer is not a JSON object {"effects": [...]}; the turn changes no story state',
                    details={"text": response.text[:MAX_KEPT_TEXT]},
                )
            )
            return [], response.usage
        return effects, response.usage


class ToolRefusalFallback:
    """The model itself, until the provider refuses a request because it offered tools; then the
    rest of this run goes the tool-free way (``run.tools_refused``)."""

    def __init__(self, run: RpRun, model: ChatModel) -> None:
        self.provider = model.provider
        self.model = model.model
        self.label = model.label
        self.capabilities = model.capabilities
        self._run = run
        self._inner = model
        self._fallback: ToolFreeParent | None = None

    @property
    def sends_before_logged(self) -> bool:
        # The model's own (``types.REQUEST_LOGGED``): a refusal is heard only once the request is
        # logged, so the fallback starts after it. The tool-free way, once taken, works in this
        # process (a Writer run, a commit) and is never started before the step is logged.
        return self._fallback is None and bool(getattr(self._inner, "sends_before_logged", False))

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return flatten(self.stream_batches(request))

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
        if self._fallback is None:
            started = False
            try:
                async for batch in stream_batches(self._inner, request):
                    started = True
                    yield batch
                return
            except RpError as exc:
                if exc.code != "model.tools_unsupported" or started:
                    raise
                self._fallback = ToolFreeParent(self._run, self._inner, refused=exc)
        async for batch in self._fallback.stream_batches(request):
            yield batch


def _effects_of(text: str) -> list[Any] | None:
    """``{"effects": [...]}`` (or a bare list) from a JSON-mode answer; lenient about fences and
    small syntax slips (json-repair), strict about the shape."""
    try:
        value = json.loads(text)
    except ValueError:
        # json-repair only on answer-sized text: its cost grows badly on huge hostile input.
        value = json_repair.loads(text) if text.strip() and len(text) <= MAX_REPAIR else None
    if isinstance(value, dict) and isinstance(value.get("effects"), list):
        return value["effects"]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    return None


def _plain(text: str) -> str:
    # The draft and input are story text: they must not close the tags that frame them.
    return text.replace("</reply>", "&lt;/reply>").replace("</player_input>", "&lt;/player_input>")


def _tool_text(request: ModelRequest, call_id: str) -> str:
    return next((m.text() for m in reversed(request.messages) if m.role == "tool" and m.tool_call_id == call_id), "(no result)")


def _last_tool_text(request: ModelRequest) -> str:
    return next((m.text() for m in reversed(request.messages) if m.role == "tool"), "(no result)")
