"""``rp_commit_turn``: the single commit point of a roleplay turn.

One global tool (spec 产品边界, 事务与事件 4-6). Its argument schema is derived live from the
effect and extension registries (:mod:`roleplay.core.commit_schema` documents the shape); the
same schema is the model's declaration and the handler's first validation stage.

**Per-run state** lives in a :class:`CommitSession` that the run owns and hands to the tool as
``RpRunDeps.commit`` (:mod:`roleplay.core.run_context`). The run must:

* call :meth:`CommitSession.note_response` with every tool name of a model response (and its
  text) before executing its calls (e.g. from ``LoopHooks.on_response``): a commit in a response
  that also calls any other tool is rejected, and in Agent mode the response text is the body
  when the commit carries no ``body``;
* call :meth:`CommitSession.refresh` when the context is rebuilt or the Writer artifact changes
  (this clears the cached failed draft, as the spec demands);
* register the tool in a :class:`CommitToolRegistry`: the plain harness registry rejects a schema
  failure before any handler runs, which loses the domain precheck and the retry token.

**Validation**, all of it before anything is written, problems collected per component
(``details.component``: schema, guard, references, effects, extensions, limits, sources), each
with the JSON Pointer of the offending argument: the full-branch schema; guards (Chat: a ``body``
that is sent must equal the Writer text, compared after normalising line ends and trimming outer
whitespace; Agent: the body must not be empty); ``references.writer`` must be the call id of the
run's one successful Writer artifact; every effect through its capability's validator (the state
package's own validator for ``state.update``, against the state frozen at prepare time);
extensions through theirs; the size limit; live source revisions. The domain checks run even when
the schema has failed (the spec's "no-write precheck"), on whatever parts are usable, and a domain
problem at the same pointer as a schema problem is dropped as a duplicate.

**Rejected outright** (no draft kept, no token): ``commit.duplicate`` (the run already
committed), ``commit.no_writer_artifact`` (no successful Writer result to link),
``commit.mixed_tools`` (another tool call in the same response), ``commit.response_unknown`` (the
run never reported the response: fail closed rather than miss a mixed response),
``commit.no_session`` (the run lent no commit session), and ``commit.stale_state`` /
``commit.stale_context`` (the run's ``live_context_check`` found that the story state or the
conversation moved since prepare: validating against the frozen state would land a commit the
``rp/state`` fold then skips, and the Writer wrote from a conversation that is gone; no repair of
the arguments can fix that).

**A failed full draft** is cached in the session and the error carries a token; its code is, by
priority, ``commit.body_mismatch``, ``commit.no_body``, ``commit.invalid_arguments``,
``commit.reference_invalid``, ``commit.effect_invalid``, ``commit.extension_invalid``,
``commit.too_large``, ``commit.stale_source``. A retry (``{"retry": {token, patches}}``) fails with
``commit.retry.too_many_patches``, ``commit.retry.bad_op``, ``commit.invalid_arguments`` (the
retry object itself), ``commit.retry.token_invalid`` or ``commit.retry.patch_failed`` and keeps
the cached draft; a rebuilt draft is validated in full exactly like a new one.

The harness shows a model only an error's message, so the message lists every problem (pointer,
code, text) and the token; ``details`` carries ``token`` and ``problems`` for programs.

**Success**: a ``ToolOutput`` whose ``meta`` is, atomically::

    {"kind": "rp-agent/turn-commit", "v": 1, "runId", "turnId", "mode": "chat" | "agent",
     "summary"?: str,
     "effects": [normalised effects, argument order],       # the rp/state fold reads this
     "references": {"writer": <Writer call id>},
     "extensions": {key: value},                           # after artifact generators
     "diagnostics": [{code, message, sourceId?, details?}],
     "context": {"epoch": str, "sectionIds": [str]},
     "writer": {"callId", "childSessionId", "route", "promptHash"},
     "body": {"source": "writer" | "argument" | "response", "chars": int, "sha256": hex}}

The final body text itself is on :attr:`CommitSession.outcome` for the run (Chat streams the
Writer text; Agent writes the body it committed).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from roleplay.canonical import canonical_json, sha256_hex
from roleplay.core.artifacts import ArtifactRegistry
from roleplay.core.commit_retry import (
    DraftCache,
    apply_patches,
    binding_of,
    patch_shape_problems,
)
from roleplay.core.commit_schema import (
    MAX_COMMIT_BYTES,
    TOOL_NAME,
    branch_of,
    commit_schema,
    conditional_schema,
    schema_problems,
)
from roleplay.core.commit_schema import full_schema as full_branch
from roleplay.core.effects import EffectItem, EffectRegistry, ExtensionRegistry
from roleplay.core.run_context import require_run_deps
from roleplay.core.types import CommitContext, Diagnostic, WriterArtifact
from roleplay.errors import Problem, RpError
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import TURN_COMMIT_KIND

COMMIT_KIND = TURN_COMMIT_KIND
META_VERSION = 1
MAX_LISTED_PROBLEMS = 40  # in the model-facing message; details always carry all of them

# Failed-draft code by priority: the first component present names the error.
_CODE_BY_PROBLEM = {
    "commit.body_mismatch": "commit.body_mismatch",
    "commit.body_missing": "commit.no_body",
}
_CODE_BY_COMPONENT = {
    "schema": "commit.invalid_arguments",
    "references": "commit.reference_invalid",
    "effects": "commit.effect_invalid",
    "extensions": "commit.extension_invalid",
    "limits": "commit.too_large",
    "sources": "commit.stale_source",
}
_PRIORITY = [
    "commit.body_mismatch",
    "commit.no_body",
    "commit.invalid_arguments",
    "commit.reference_invalid",
    "commit.effect_invalid",
    "commit.extension_invalid",
    "commit.too_large",
    "commit.stale_source",
]

LiveRevisionsCheck = Callable[[Mapping[str, Any]], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"]
# Problems (code ``commit.stale_*``) when the log the run was prepared from has moved.
LiveContextCheck = Callable[[], Awaitable[list[Problem]]]

GUIDANCE = (
    "rp_commit_turn commits this turn. Call it alone in its response, once, after rp_write_turn "
    "succeeded: references.writer is that call's id; effects follow the commit contract (one "
    "state.update per namespace, expectedRevision as given). In Chat the runtime supplies the "
    "reply text, so send no body; in Agent send the final text as body. If it is rejected, "
    "nothing was written: fix every listed problem at once with "
    '{"retry": {"token": …, "patches": [{"op": "replace", "path": "/effects/0/…", "value": …}]}} '
    "(add/replace/remove, at most 64, pointers as listed), or send a corrected full commit."
)


@dataclass(frozen=True)
class CommitOutcome:
    meta: dict[str, Any]
    body: str


class CommitSession:
    """The commit state of one run: its context, responses seen, failed draft, and the outcome."""

    def __init__(
        self,
        ctx: CommitContext,
        *,
        secret: bytes,
        live_revisions_check: LiveRevisionsCheck | None = None,
        live_context_check: LiveContextCheck | None = None,
    ) -> None:
        self._ctx = ctx
        self._drafts = DraftCache(secret)
        self._live_check = live_revisions_check
        self._context_check = live_context_check
        self._responses: dict[str, tuple[tuple[str, ...], str]] = {}
        self._step_diagnostics: dict[str, tuple[Diagnostic, ...]] = {}
        self._outcome: CommitOutcome | None = None

    @property
    def ctx(self) -> CommitContext:
        return self._ctx

    @property
    def outcome(self) -> CommitOutcome | None:
        return self._outcome

    @property
    def draft_token(self) -> str | None:
        current = self._drafts.current
        return current.token if current is not None else None

    def refresh(self, ctx: CommitContext) -> None:
        """A rebuilt context (new epoch) or a new Writer artifact: the old draft is void."""
        if (ctx.run_id, ctx.turn_id) != (self._ctx.run_id, self._ctx.turn_id):
            raise ValueError("a commit session belongs to one run and turn")
        self._ctx = ctx
        self._drafts.clear()

    def set_writer(self, writer: WriterArtifact | None) -> None:
        self.refresh(replace(self._ctx, writer=writer))

    def note_response(self, step_id: str, tool_names: Iterable[str], text: str = "", diagnostics: Iterable[Diagnostic] = ()) -> None:
        """Tell the session which tools one model response called, before they run.
        ``diagnostics`` (the run's notes about that response) go into a commit it makes."""
        self._responses[step_id] = (tuple(tool_names), text)
        self._step_diagnostics[step_id] = tuple(diagnostics)

    def step_diagnostics(self, step_id: str | None) -> tuple[Diagnostic, ...]:
        return self._step_diagnostics.get(step_id or "", ())

    def guard(self, tctx: ToolContext) -> str:
        """The outright rejections; returns the response text of this call's step."""
        if self._outcome is not None:
            raise RpError("commit.duplicate", "this turn is already committed; a run commits once")
        if self._ctx.writer is None:
            raise RpError(
                "commit.no_writer_artifact", "there is no successful rp_write_turn result in this run to commit; call rp_write_turn first"
            )
        noted = self._responses.get(tctx.step_id or "")
        if noted is None:
            raise RpError("commit.response_unknown", "the run did not report the response that made this call; refusing to commit blind")
        names, text = noted
        if list(names) != [TOOL_NAME]:
            others = sorted({n for n in names if n != TOOL_NAME})
            seen = f"also called: {', '.join(others)}" if others else f"{TOOL_NAME} was called {names.count(TOOL_NAME)} times"
            raise RpError(
                "commit.mixed_tools",
                f"{TOOL_NAME} must be the only tool call of its response ({seen}); call it again on its own",
                details={"tools": list(names)},
            )
        return text

    async def check_live_context(self) -> None:
        """Reject outright (no token) when the run's story state or conversation moved."""
        problems = await self._context_check() if self._context_check is not None else []
        if problems:
            raise RpError(
                problems[0].code,
                f"{problems[0].message}; nothing was written. This turn cannot commit: start a new turn on the current story.",
                pointer=problems[0].pointer,
                details={"problems": [p.to_dict() for p in problems]},
                problems=problems,
            )

    async def stale_sources(self) -> list[Problem]:
        if self._live_check is None or not self._ctx.live_revisions:
            return []
        try:
            value = self._live_check(dict(self._ctx.live_revisions))
            changed = await value if inspect.isawaitable(value) else value
        except RpError as exc:
            return [
                Problem(
                    "commit.source_check_failed",
                    f"could not re-read source revisions: {exc.message}",
                    "",
                    {"component": "sources", "error": exc.to_dict()},
                )
            ]
        return [
            Problem(
                "commit.stale_source",
                f"source {asset!r} changed since this turn's context was built ({self._ctx.live_revisions.get(asset)!r} → {current!r})",
                "",
                {"component": "sources", "assetId": asset, "expected": self._ctx.live_revisions.get(asset), "current": current},
            )
            for asset, current in sorted(dict(changed).items())
        ]

    def keep_failed(self, draft: Any) -> str:
        return self._drafts.store(draft, binding_of(self._ctx))

    def rebuild(self, args: dict[str, Any], schema: dict[str, Any]) -> Any:
        """The cached draft with ``args.retry.patches`` applied (not yet validated)."""
        retry = args.get("retry")
        patches = retry.get("patches") if isinstance(retry, dict) else None
        shape = patch_shape_problems(patches)
        if shape is not None:
            raise shape
        problems = schema_problems(branch_of(schema, args)[1], args)
        if problems:
            raise _invalid(problems, "the retry call is malformed (only retry.token and retry.patches are allowed)", token=None)
        # The retry branch's schema (checked above) makes both hold; this tells the type checker.
        assert isinstance(retry, dict) and isinstance(patches, list)
        draft = self._drafts.take(retry["token"], binding_of(self._ctx))
        return apply_patches(draft.args, patches)

    def committed(self, outcome: CommitOutcome) -> None:
        self._outcome = outcome
        self._drafts.clear()


# -- validation of a full draft -----------------------------------------------------------------


@dataclass(frozen=True)
class DraftCheck:
    problems: list[Problem]
    effects: list[Any]
    extensions: dict[str, Any]
    body: str
    body_source: str
    diagnostics: list[Diagnostic]


def _tag(problems: Iterable[Problem], component: str) -> list[Problem]:
    return [Problem(p.code, p.message, p.pointer, {**p.details, "component": component}) for p in problems]


def _normal_text(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def check_draft(
    draft: Any,
    ctx: CommitContext,
    effects: EffectRegistry,
    extensions: ExtensionRegistry | None = None,
    *,
    response_text: str = "",
) -> DraftCheck:
    """Every problem of a full commit draft (pure; live revisions are checked by the session)."""
    # Always the full branch: a rebuilt draft is a full commit even if a patch slipped a
    # ``retry`` member into it (which the full branch then rejects as unexpected).
    found = _tag(schema_problems(full_branch(effects, extensions), draft), "schema")
    args = draft if isinstance(draft, dict) else {}
    domain: list[Problem] = []

    body, source = _body(args, ctx, response_text, domain)
    writer_ref = args.get("references", {}).get("writer") if isinstance(args.get("references"), dict) else None
    if isinstance(writer_ref, str) and ctx.writer is not None and writer_ref != ctx.writer.call_id:
        domain += _tag(
            [
                Problem(
                    "commit.reference_mismatch",
                    f"references.writer must be this run's Writer call id {ctx.writer.call_id!r}",
                    "/references/writer",
                    {"expected": ctx.writer.call_id},
                )
            ],
            "references",
        )

    normalised, diagnostics = _effects(args.get("effects"), ctx, effects, domain)
    final_extensions = _extensions(args.get("extensions"), ctx, extensions, domain)

    try:
        size = len(canonical_json(draft).encode("utf-8"))
    except (TypeError, ValueError):
        size = 0  # not plain JSON: the schema has said so already
    if size > MAX_COMMIT_BYTES:
        domain += _tag(
            [
                Problem(
                    "commit.too_large",
                    f"the commit is {size} bytes; the limit is {MAX_COMMIT_BYTES}",
                    "",
                    {"bytes": size, "limit": MAX_COMMIT_BYTES},
                )
            ],
            "limits",
        )

    schema_pointers = {p.pointer for p in found}
    found += [p for p in domain if p.pointer not in schema_pointers or p.pointer == ""]
    return DraftCheck(found, normalised, final_extensions, body, source, diagnostics)


def _body(args: dict[str, Any], ctx: CommitContext, response_text: str, out: list[Problem]) -> tuple[str, str]:
    sent = args.get("body")
    if ctx.mode == "chat":
        writer_text = ctx.writer.text if ctx.writer is not None else ""
        if isinstance(sent, str) and _normal_text(sent) != _normal_text(writer_text):
            out += _tag(
                [Problem("commit.body_mismatch", "in Chat the reply is the Writer's text; remove body or send it unchanged", "/body")],
                "guard",
            )
        return writer_text, "writer"
    body, source = (sent, "argument") if isinstance(sent, str) else (response_text, "response")
    if not _normal_text(body):
        out += _tag([Problem("commit.body_missing", "the commit has no reply text: send the final text as body", "/body")], "guard")
    return body, source


def _effects(raw: Any, ctx: CommitContext, registry: EffectRegistry, out: list[Problem]) -> tuple[list[Any], list[Diagnostic]]:
    if not isinstance(raw, list):
        return [], []
    groups: dict[str, list[tuple[int, EffectItem]]] = {kind: [] for kind in registry.kinds()}
    for i, effect in enumerate(raw):
        kind = effect.get("kind") if isinstance(effect, dict) else None
        if isinstance(kind, str) and kind in groups:
            groups[kind].append((i, EffectItem(f"/effects/{i}", effect)))
    normalised: list[Any] = list(raw)
    diagnostics: list[Diagnostic] = []
    for kind, items in groups.items():
        cap = registry.get(kind)
        assert cap is not None
        check = cap.validate([item for _, item in items], ctx)
        out += _tag(check.problems, "effects")
        diagnostics += check.diagnostics
        if not check.problems:
            for (i, _), value in zip(items, check.effects):
                normalised[i] = value
    return normalised, diagnostics


def _extensions(raw: Any, ctx: CommitContext, registry: ExtensionRegistry | None, out: list[Problem]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}
    final: dict[str, Any] = {}
    for key, value in raw.items():
        cap = registry.get(key) if registry is not None else None
        if cap is None:
            continue  # the schema names unknown keys
        check = cap.validate(value, ctx, f"/extensions/{_escape(key)}")
        out += _tag(check.problems, "extensions")
        final[key] = check.effects[0] if check.effects else value
    return final


def rejection_code(problems: Sequence[Problem]) -> str:
    present = set()
    for p in problems:
        present.add(_CODE_BY_PROBLEM.get(p.code) or _CODE_BY_COMPONENT.get(p.details.get("component", ""), "commit.invalid_arguments"))
    return next((code for code in _PRIORITY if code in present), "commit.invalid_arguments")


def _listing(problems: Sequence[Problem]) -> str:
    lines = [f"- {p.pointer if p.pointer else '(whole commit)'} [{p.code}] {p.message}" for p in problems[:MAX_LISTED_PROBLEMS]]
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"- … {len(problems) - MAX_LISTED_PROBLEMS} more")
    return "\n".join(lines)


def _invalid(problems: list[Problem], headline: str, *, token: str | None, code: str | None = None) -> RpError:
    code = code or rejection_code(problems)
    message = f"{headline}; nothing was written. {len(problems)} problem(s):\n{_listing(problems)}"
    details: dict[str, Any] = {"problems": [p.to_dict() for p in problems]}
    if token is not None:
        details["token"] = token
        message += (
            f'\nRepair all of them in ONE call: {{"retry": {{"token": "{token}", "patches": [...]}}}} '
            "with RFC 6902 add/replace/remove ops (at most 64) on the pointers above, or send a corrected full commit."
        )
    return RpError(code, message, pointer=problems[0].pointer if problems else None, details=details, problems=problems)


# -- the tool -----------------------------------------------------------------------------------


def _meta(
    ctx: CommitContext, args: dict[str, Any], check: DraftCheck, extensions: dict[str, Any], diagnostics: list[Diagnostic]
) -> dict[str, Any]:
    writer = ctx.writer
    assert writer is not None
    meta: dict[str, Any] = {"kind": COMMIT_KIND, "v": META_VERSION, "runId": ctx.run_id, "turnId": ctx.turn_id, "mode": ctx.mode}
    if isinstance(args.get("summary"), str):
        meta["summary"] = args["summary"]
    meta.update(
        {
            "effects": check.effects,
            "references": {"writer": writer.call_id},
            "extensions": extensions,
            "diagnostics": [d.to_dict() for d in diagnostics],
            "context": {"epoch": ctx.epoch, "sectionIds": list(writer.section_ids)},
            "writer": {
                "callId": writer.call_id,
                "childSessionId": writer.child_session_id,
                "route": writer.route,
                "promptHash": writer.prompt_hash,
            },
            "body": {"source": check.body_source, "chars": len(check.body), "sha256": sha256_hex(check.body)},
        }
    )
    # The meta is stored in the log and folded by projections: it must be plain JSON now, not
    # discovered broken at replay time.
    return json.loads(canonical_json(meta))


def commit_tool(
    effects: EffectRegistry,
    extensions: ExtensionRegistry | None = None,
    artifacts: ArtifactRegistry | None = None,
    *,
    timeout: float | None = None,
    declaration: Literal["oneOf", "conditional"] = "oneOf",
) -> Tool:
    """The ``rp_commit_turn`` tool over these registries. Its declared schema is derived now; the
    handler derives it again on every call, so a capability registered later still counts.

    ``declaration="conditional"`` declares :func:`conditional_schema` (same language, no top-level
    ``oneOf``) for providers that refuse a root ``oneOf``; validation is unchanged. ``timeout``
    bounds the whole call, artifact generators included, so it must exceed their own timeouts.
    """

    async def handle(args: dict[str, Any], tctx: ToolContext) -> ToolOutput:
        deps = require_run_deps(tctx, TOOL_NAME, "commit.no_session")
        session = deps.commit
        if session is None:
            raise RpError("commit.no_session", f"{TOOL_NAME} needs the run's commit session (RpRunDeps.commit is empty)")
        response_text = session.guard(tctx)
        await session.check_live_context()
        ctx = session.ctx
        schema = commit_schema(effects, extensions)
        draft: Any = session.rebuild(args, schema) if branch_of(schema, args)[0] == "retry" else args
        check = check_draft(draft, ctx, effects, extensions, response_text=response_text)
        problems = check.problems + await session.stale_sources()
        if problems:
            token = session.keep_failed(draft)
            raise _invalid(problems, f"{TOOL_NAME} was rejected", token=token)
        final_extensions, artifact_diagnostics = (
            await artifacts.run(check.body, ctx, check.effects, check.extensions, deps) if artifacts is not None else (check.extensions, [])
        )
        diagnostics = [*check.diagnostics, *artifact_diagnostics, *session.step_diagnostics(tctx.step_id)]
        meta = _meta(ctx, draft, check, final_extensions, diagnostics)
        session.committed(CommitOutcome(meta, check.body))
        summary = {
            "ok": True,
            "effects": len(meta["effects"]),
            "extensions": sorted(meta["extensions"]),
            "diagnostics": [d["code"] for d in meta["diagnostics"]],
        }
        return ToolOutput(json.dumps(summary, ensure_ascii=False, separators=(",", ":")), meta=meta)

    return Tool(
        TOOL_NAME,
        "Commit this roleplay turn: link the Writer result and carry the turn's effects. The only way a turn changes story state.",
        conditional_schema(effects, extensions) if declaration == "conditional" else commit_schema(effects, extensions),
        handle,
        guidance=GUIDANCE,
        timeout=timeout,
        # The handler validates against this same schema as its first stage, so a schema failure
        # still gets the no-write domain precheck and a retry token (the spec's dry run).
        self_validating=True,
    )


__all__ = [
    "COMMIT_KIND",
    "CommitOutcome",
    "CommitSession",
    "DraftCheck",
    "check_draft",
    "commit_tool",
    "rejection_code",
]
