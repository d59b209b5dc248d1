"""``rp_commit_turn`` end to end: a real ``ToolRegistry.execute`` per call, and every tool result
folded by the real ``rp/state`` projection, so "nothing is written on failure" and "the fold
applies what the commit accepted" are observed, not assumed."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from roleplay.canonical import canonical_json, sha256_hex
from roleplay.core import commit as commit_module
from roleplay.core.artifacts import ArtifactGenerator, ArtifactRegistry
from roleplay.core.commit import (
    COMMIT_KIND,
    CommitSession,
    check_draft,
    commit_tool,
)
from roleplay.core.run_context import RpRunDeps
from roleplay.core.effects import (
    EffectCapability,
    EffectCheck,
    ExtensionCapability,
    ExtensionRegistry,
)
from roleplay.core.types import CommitContext, WriterArtifact
from roleplay.errors import Problem, RpError
from roleplay.harness.events import Event, validate_payload
from roleplay.harness.models.types import ToolCall
from roleplay.harness.tools import ToolContext, ToolRegistry, ToolResultData
from roleplay.state import apply_bootstrap, bootstrap_payload, empty_projection
from roleplay.state.events import apply_event, initial_tracker, state_document
from tests_support import state_effect_registry

pytestmark = pytest.mark.anyio

AFF = "/characters/李钰/好感度"
WRITER_TEXT = "李钰抬起头，轻声说：「我信你。」"
DEFINITION = {
    "title": "故事",
    "updateMode": "rules-required",
    "schema": {
        "type": "object",
        "properties": {
            "characters": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"好感度": {"type": "integer", "minimum": 0, "maximum": 100}, "mood": {"type": "string"}},
                    "required": ["好感度"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["characters"],
        "additionalProperties": False,
    },
    "rules": [
        {
            "id": "liyu-affection",
            "target": AFF,
            "when": "信任变化",
            "effect": {"op": "increment", "minimum": -5, "maximum": 5},
            "cadence": "when-applicable",
        },
        {"id": "liyu-mood", "target": "/characters/李钰/mood", "when": "情绪变化", "effect": {"op": "set"}, "cadence": "when-applicable"},
    ],
}
VALUE = {"characters": {"李钰": {"好感度": 10, "mood": "平静"}}}


def change(op: str, path: str, rule: str, **operand: Any) -> dict[str, Any]:
    return {"op": op, "path": path, "reason": "剧情需要", "ruleId": rule, **operand}


def update(*changes: dict[str, Any], revision: int = 1) -> dict[str, Any]:
    return {"kind": "state.update", "namespace": "story", "expectedRevision": revision, "payload": {"changes": list(changes)}}


def good_effects() -> list[dict[str, Any]]:
    return [update(change("increment", AFF, "liyu-affection", by=3), change("set", "/characters/李钰/mood", "liyu-mood", value="安心"))]


def writer(**over: Any) -> WriterArtifact:
    base: dict[str, Any] = {
        "call_id": "call_w",
        "child_session_id": "ses_writer",
        "route": {"provider": "fake", "model": "w"},
        "prompt_hash": "ph1",
        "section_ids": ("card", "history"),
        "text": WRITER_TEXT,
    }
    return WriterArtifact(**{**base, **over})


class Run:
    """One run: its commit session, the tool in a real registry, and a session log whose
    ``rp/state`` fold sees every tool result exactly as the stored log would."""

    def __init__(
        self,
        mode: str = "chat",
        *,
        declaration: str = "oneOf",
        registry: type[ToolRegistry] = ToolRegistry,
        effects: Any = None,
        extensions: ExtensionRegistry | None = None,
        artifacts: ArtifactRegistry | None = None,
        live: Any = None,
        live_revisions: dict[str, Any] | None = None,
        run_id: str = "run1",
        with_writer: bool = True,
    ) -> None:
        self.tracker = initial_tracker()
        self.events: list[Event] = []
        boot = bootstrap_payload(DEFINITION, VALUE)
        self._log("command/run", {"commandId": "boot", "name": "rp-session-apply", "args": {"stateBootstrap": boot}})
        self._log("command/done", {"commandId": "boot", "kind": "success"})
        self._log("user/message", {"messageId": "u1", "content": [{"type": "text", "text": "继续"}], "turnId": "turn1"})
        self.ctx = CommitContext(
            run_id=run_id,
            turn_id="turn1",
            session_id="ses1",
            mode=mode,  # type: ignore[arg-type]
            epoch="epoch1",
            writer=writer() if with_writer else None,
            state=copy.deepcopy(self.doc),
            live_revisions=live_revisions or {},
        )
        self.session = CommitSession(self.ctx, secret=b"run-secret", live_revisions_check=live)
        self.effects = effects or state_effect_registry()
        self.registry = registry([commit_tool(self.effects, extensions, artifacts, declaration=declaration)])  # type: ignore[arg-type]
        self.n = 0

    def _log(self, type_: str, payload: dict[str, Any]) -> None:
        ev = Event("ses1", len(self.events) + 1, type_, validate_payload(type_, payload), "t")
        self.events.append(ev)
        apply_event(self.tracker, ev)

    @property
    def doc(self) -> dict[str, Any]:
        return state_document(self.tracker)

    async def call(
        self, args: Any, *, others: tuple[str, ...] = (), text: str = "", note: bool = True, deps: object = ...
    ) -> ToolResultData:
        self.n += 1
        step, call_id = f"step{self.n}", f"call{self.n}"
        raw = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        calls = [{"id": call_id, "name": "rp_commit_turn", "arguments": raw}] + [
            {"id": f"{call_id}_{o}", "name": o, "arguments": "{}"} for o in others
        ]
        if note:
            self.session.note_response(step, [c["name"] for c in calls], text)
        self._log("assistant/message", {"messageId": f"m{self.n}", "content": [], "turnId": "turn1", "stepId": step, "toolCalls": calls})
        self._log("tool/call", {"callId": call_id, "name": "rp_commit_turn", "arguments": raw, "turnId": "turn1", "stepId": step})
        lent = RpRunDeps(mode=self.session.ctx.mode, commit=self.session) if deps is ... else deps
        result = await self.registry.execute(
            ToolCall(call_id, "rp_commit_turn", raw), ToolContext("ses1", "turn1", step, call_id, deps=lent)
        )
        self._log("tool/result", {**result.payload(), "turnId": "turn1", "stepId": step})
        return result


def full(effects: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"references": {"writer": "call_w"}, "effects": good_effects() if effects is None else effects, **extra}


def pointers(result: ToolResultData) -> dict[str, str]:
    return {p["pointer"]: p["code"] for p in result.error["details"]["problems"]}  # type: ignore[index]


def affection(run: Run) -> int:
    return run.doc["namespaces"]["story"]["value"]["characters"]["李钰"]["好感度"]


# -- success --------------------------------------------------------------------------------------


async def test_success_meta_is_complete_and_the_state_fold_applies_it() -> None:
    run = Run("chat")
    result = await run.call(full(summary="李钰更信任主角了"))
    assert result.ok, result.content
    meta = result.meta
    assert meta == {
        "kind": COMMIT_KIND,
        "v": 1,
        "runId": "run1",
        "turnId": "turn1",
        "mode": "chat",
        "summary": "李钰更信任主角了",
        "effects": good_effects(),
        "references": {"writer": "call_w"},
        "extensions": {},
        "diagnostics": [],
        "context": {"epoch": "epoch1", "sectionIds": ["card", "history"]},
        "writer": {"callId": "call_w", "childSessionId": "ses_writer", "route": {"provider": "fake", "model": "w"}, "promptHash": "ph1"},
        "body": {"source": "writer", "chars": len(WRITER_TEXT), "sha256": sha256_hex(WRITER_TEXT)},
    }
    assert json.loads(result.content) == {"ok": True, "effects": 1, "extensions": [], "diagnostics": []}
    # The rp/state fold read meta.effects and applied them.
    assert affection(run) == 13
    assert run.doc["namespaces"]["story"]["value"]["characters"]["李钰"]["mood"] == "安心"
    assert run.doc["namespaces"]["story"]["revision"] == 2
    assert run.session.outcome is not None and run.session.outcome.body == WRITER_TEXT


async def test_agent_body_comes_from_the_argument_or_else_the_response_text() -> None:
    run = Run("agent")
    result = await run.call(full(body="改写后的正文"), text="ignored when body is sent")
    assert result.ok and result.meta["body"]["source"] == "argument"
    assert run.session.outcome.body == "改写后的正文"  # type: ignore[union-attr]

    run = Run("agent")
    result = await run.call(full(), text="回应里的正文")
    assert result.ok and result.meta["body"] == {"source": "response", "chars": 6, "sha256": sha256_hex("回应里的正文")}


async def test_a_commit_without_effects_is_valid_and_changes_no_value() -> None:
    run = Run("chat")
    before = copy.deepcopy(run.doc["namespaces"]["story"]["value"])
    result = await run.call(full(effects=[]))
    assert result.ok and result.meta["effects"] == []
    assert run.doc["namespaces"]["story"]["value"] == before


async def test_chat_body_equal_to_the_writer_text_up_to_outer_whitespace_is_accepted() -> None:
    run = Run("chat")
    result = await run.call(full(body=f"\n{WRITER_TEXT}\r\n"))
    assert result.ok
    assert run.session.outcome.body == WRITER_TEXT  # type: ignore[union-attr]  # the Writer's text, not the echo


# -- nothing written on failure -------------------------------------------------------------------


async def test_a_rejected_commit_writes_nothing_even_through_a_plain_registry() -> None:
    run = Run("chat", registry=ToolRegistry)
    before = canonical_json(run.doc)
    result = await run.call(full([update(change("increment", AFF, "liyu-affection", by=3), revision=7)]))
    assert not result.ok and result.error["code"] == "commit.effect_invalid"  # type: ignore[index]
    assert pointers(result) == {"/effects/0/expectedRevision": "state.update.revision_mismatch"}
    assert result.error["details"]["token"].startswith("rct_")  # type: ignore[index]
    assert result.meta is None
    assert canonical_json(run.doc) == before, "a failed commit result must not change rp/state"
    assert run.session.outcome is None


async def test_the_commit_tool_validates_its_own_arguments_in_a_plain_registry() -> None:
    # The registry leaves schema validation to the tool (``self_validating``), so a schema
    # failure still runs the domain precheck and yields a retry token.
    run = Run("chat", registry=ToolRegistry)
    result = await run.call(full(bogus=1))
    assert result.error["code"] == "commit.invalid_arguments"  # type: ignore[index]
    assert run.session.draft_token is not None


# -- dry-run precheck ----------------------------------------------------------------------------


async def test_schema_failure_still_runs_the_domain_precheck() -> None:
    run = Run("chat")
    before = canonical_json(run.doc)
    args = {
        "references": {"writer": "call_other"},
        "summary": 42,
        "bogus": True,
        "effects": [
            update(change("increment", AFF, "liyu-affection", by=3), change("set", "/characters/李钰/mood", "no-such-rule", value="x"))
        ],
    }
    result = await run.call(args)
    assert result.error["code"] == "commit.invalid_arguments"  # type: ignore[index]
    assert pointers(result) == {
        "/bogus": "commit.invalid_arguments",
        "/summary": "commit.invalid_arguments",
        "/references/writer": "commit.reference_mismatch",
        "/effects/0/payload/changes/1/ruleId": "state.update.rule_unknown",
    }
    components = {p["pointer"]: p["details"]["component"] for p in result.error["details"]["problems"]}  # type: ignore[index]
    assert components["/bogus"] == "schema" and components["/references/writer"] == "references"
    assert components["/effects/0/payload/changes/1/ruleId"] == "effects"
    # The model sees only the message: it must carry every pointer and the token.
    for pointer in pointers(result):
        assert pointer in result.content
    assert result.error["details"]["token"] in result.content  # type: ignore[index]
    assert canonical_json(run.doc) == before


async def test_a_domain_problem_at_a_schema_pointer_is_reported_once() -> None:
    run = Run("chat")
    bad = change("increment", AFF, "liyu-affection", by=3)
    bad["extra"] = 1  # both the schema and the state validator object to this field
    result = await run.call(full([update(bad)]))
    problems = result.error["details"]["problems"]  # type: ignore[index]
    assert [p["pointer"] for p in problems] == ["/effects/0/payload/changes/0/extra"]
    assert problems[0]["code"] == "commit.invalid_arguments"


async def test_unknown_effect_kind_is_named_at_its_kind() -> None:
    run = Run("chat")
    result = await run.call(full([{"kind": "inventory.add", "item": "剑"}]))
    assert pointers(result) == {"/effects/0/kind": "commit.invalid_arguments"}
    assert "state.update" in result.content


# -- retry ---------------------------------------------------------------------------------------


def wrong_commit() -> dict[str, Any]:
    # Two independent mistakes: a delta outside the rule's bounds and a rule that does not exist.
    return full(
        [update(change("increment", AFF, "liyu-affection", by=50), change("set", "/characters/李钰/mood", "liyu-mod", value="安心"))]
    )


async def test_a_wrong_commit_is_repaired_with_one_retry_call() -> None:
    run = Run("chat")
    first = await run.call(wrong_commit())
    assert first.error["code"] == "commit.effect_invalid"  # type: ignore[index]
    assert pointers(first) == {
        "/effects/0/payload/changes/0/by": "state.update.by_out_of_bounds",
        "/effects/0/payload/changes/1/ruleId": "state.update.rule_unknown",
    }
    assert affection(run) == 10
    token = first.error["details"]["token"]  # type: ignore[index]
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"},
    ]
    second = await run.call({"retry": {"token": token, "patches": patches}})
    assert second.ok, second.content
    assert second.meta["effects"] == good_effects()
    assert affection(run) == 13
    assert run.session.draft_token is None  # success clears the cache


async def test_a_failed_retry_keeps_patching_the_rebuilt_draft_with_a_new_token() -> None:
    run = Run("chat")
    first = await run.call(wrong_commit())
    token1 = first.error["details"]["token"]  # type: ignore[index]
    fix_by = {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3}
    second = await run.call({"retry": {"token": token1, "patches": [fix_by]}})
    assert pointers(second) == {"/effects/0/payload/changes/1/ruleId": "state.update.rule_unknown"}
    token2 = second.error["details"]["token"]  # type: ignore[index]
    assert token2 != token1
    fix_rule = {"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"}
    stale = await run.call({"retry": {"token": token1, "patches": [fix_rule]}})
    assert stale.error["code"] == "commit.retry.token_invalid"  # type: ignore[index]
    third = await run.call({"retry": {"token": token2, "patches": [fix_rule]}})
    assert third.ok and affection(run) == 13


@pytest.mark.parametrize("field", ["run_id", "turn_id", "epoch", "prompt_hash"])
async def test_a_token_bound_to_another_run_turn_epoch_or_prompt_hash_is_rejected(field: str) -> None:
    run = Run("chat")
    mine = await run.call(wrong_commit())
    assert mine.error["details"]["token"]  # type: ignore[index]
    # The same secret and draft sequence, one binding field different: only the binding differs.
    other_ctx = run.ctx
    if field == "prompt_hash":
        other_ctx = CommitContext(**{**other_ctx.__dict__, "writer": writer(prompt_hash="ph2")})
    else:
        other_ctx = CommitContext(**{**other_ctx.__dict__, field: other_ctx.__dict__[field] + "-other"})
    other = CommitSession(other_ctx, secret=b"run-secret")
    foreign = other.keep_failed(wrong_commit())
    result = await run.call({"retry": {"token": foreign, "patches": [{"op": "remove", "path": "/effects/0"}]}})
    assert result.error["code"] == "commit.retry.token_invalid"  # type: ignore[index]
    assert result.error["details"]["reason"] == "mismatch"  # type: ignore[index]
    assert affection(run) == 10


@pytest.mark.parametrize("refresh", ["context", "writer"])
async def test_refreshing_context_or_writer_clears_the_draft(refresh: str) -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    if refresh == "context":
        run.session.refresh(CommitContext(**{**run.ctx.__dict__, "epoch": "epoch2"}))
    else:
        run.session.set_writer(writer(call_id="call_w2", prompt_hash="ph2"))
    assert run.session.draft_token is None
    result = await run.call(
        {"retry": {"token": token, "patches": [{"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3}]}}
    )
    assert result.error["code"] == "commit.retry.token_invalid"  # type: ignore[index]
    assert result.error["details"]["reason"] == "no-draft"  # type: ignore[index]


async def test_more_than_64_patches_is_its_own_error_and_keeps_the_draft() -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    patches = [{"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3}] * 65
    result = await run.call({"retry": {"token": token, "patches": patches}})
    assert result.error["code"] == "commit.retry.too_many_patches"  # type: ignore[index]
    assert result.error["details"] == {"count": 65, "limit": 64}  # type: ignore[index]
    fixed = await run.call(
        {
            "retry": {
                "token": token,
                "patches": patches[:1] + [{"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"}],
            }
        }
    )
    assert fixed.ok


async def test_ops_other_than_add_replace_remove_are_rejected_by_name() -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "move", "from": "/summary", "path": "/body"},
        {"op": "test", "path": "/effects", "value": []},
    ]
    result = await run.call({"retry": {"token": token, "patches": patches}})
    assert result.error["code"] == "commit.retry.bad_op"  # type: ignore[index]
    assert [p["pointer"] for p in result.error["details"]["problems"]] == ["/retry/patches/1/op", "/retry/patches/2/op"]  # type: ignore[index]
    assert affection(run) == 10


async def test_a_retry_may_not_carry_commit_material() -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    result = await run.call({"retry": {"token": token, "patches": [{"op": "remove", "path": "/effects/0"}]}, "effects": []})
    assert result.error["code"] == "commit.invalid_arguments"  # type: ignore[index]
    assert pointers(result) == {"/effects": "commit.invalid_arguments"}
    assert run.session.draft_token == token  # the failed draft is still there to repair


async def test_a_patch_that_cannot_apply_names_itself() -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "replace", "path": "/effects/9/kind", "value": "x"},
    ]
    result = await run.call({"retry": {"token": token, "patches": patches}})
    assert result.error["code"] == "commit.retry.patch_failed"  # type: ignore[index]
    assert result.error["pointer"] == "/retry/patches/1"  # type: ignore[index]


async def test_a_rebuilt_draft_is_revalidated_in_full_including_schema() -> None:
    run = Run("chat")
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"},
        {"op": "add", "path": "/retry", "value": {"token": "x", "patches": []}},
    ]
    result = await run.call({"retry": {"token": token, "patches": patches}})
    assert pointers(result) == {"/retry": "commit.invalid_arguments"}
    assert affection(run) == 10


# -- sources and limits --------------------------------------------------------------------------


async def test_a_changed_live_source_revision_rejects_the_commit() -> None:
    seen: list[dict[str, Any]] = []

    async def live(revisions: dict[str, Any]) -> dict[str, Any]:
        seen.append(revisions)
        return {"card:1": 4}

    run = Run("chat", live=live, live_revisions={"card:1": 3, "preset:2": 1})
    result = await run.call(full())
    assert result.error["code"] == "commit.stale_source"  # type: ignore[index]
    (problem,) = result.error["details"]["problems"]  # type: ignore[index]
    assert problem["code"] == "commit.stale_source"
    assert problem["details"] == {"component": "sources", "assetId": "card:1", "expected": 3, "current": 4}
    assert seen == [{"card:1": 3, "preset:2": 1}]
    assert affection(run) == 10


async def test_unchanged_live_sources_pass_and_are_rechecked_on_retry() -> None:
    changed: dict[str, Any] = {}
    run = Run("chat", live=lambda revisions: dict(changed), live_revisions={"card:1": 3})
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    changed["card:1"] = None  # the asset was deleted meanwhile
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"},
    ]
    result = await run.call({"retry": {"token": token, "patches": patches}})
    assert result.error["code"] == "commit.stale_source"  # type: ignore[index]
    changed.clear()
    retry_token = result.error["details"]["token"]  # type: ignore[index]
    assert (await run.call({"retry": {"token": retry_token, "patches": [{"op": "add", "path": "/summary", "value": "ok"}]}})).ok


async def test_a_failing_source_check_fails_closed() -> None:
    def live(revisions: dict[str, Any]) -> dict[str, Any]:
        raise RpError("asset.read_failed", "store offline")

    run = Run("chat", live=live, live_revisions={"card:1": 3})
    result = await run.call(full())
    assert not result.ok and pointers(result) == {"": "commit.source_check_failed"}


async def test_the_size_limit_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit_module, "MAX_COMMIT_BYTES", 200)
    run = Run("chat")
    result = await run.call(full())
    assert result.error["code"] == "commit.too_large"  # type: ignore[index]
    assert result.error["details"]["problems"][0]["details"]["limit"] == 200  # type: ignore[index]


# -- outright rejections -------------------------------------------------------------------------


async def test_no_writer_artifact_is_rejected_outright() -> None:
    run = Run("chat", with_writer=False)
    result = await run.call(full())
    assert result.error["code"] == "commit.no_writer_artifact"  # type: ignore[index]
    assert run.session.draft_token is None


async def test_another_tool_in_the_same_response_is_rejected() -> None:
    run = Run("chat")
    result = await run.call(full(), others=("rp_state_read",))
    assert result.error["code"] == "commit.mixed_tools"  # type: ignore[index]
    assert result.error["details"] == {"tools": ["rp_commit_turn", "rp_state_read"]}  # type: ignore[index]
    twice = await run.call(full(), others=("rp_commit_turn",))
    assert twice.error["code"] == "commit.mixed_tools"  # type: ignore[index]
    assert affection(run) == 10 and run.session.draft_token is None


async def test_a_second_commit_in_the_run_is_a_duplicate() -> None:
    run = Run("chat")
    assert (await run.call(full())).ok
    again = await run.call(full())
    assert again.error["code"] == "commit.duplicate"  # type: ignore[index]
    assert affection(run) == 13  # applied once


async def test_chat_body_that_differs_from_the_writer_is_rejected() -> None:
    run = Run("chat")
    result = await run.call(full(body="父代理自己写的正文"))
    assert result.error["code"] == "commit.body_mismatch"  # type: ignore[index]
    assert pointers(result) == {"/body": "commit.body_mismatch"}
    token = result.error["details"]["token"]  # type: ignore[index]
    assert (await run.call({"retry": {"token": token, "patches": [{"op": "remove", "path": "/body"}]}})).ok


async def test_agent_commit_without_any_body_is_rejected() -> None:
    run = Run("agent")
    result = await run.call(full(), text="  ")
    assert result.error["code"] == "commit.no_body"  # type: ignore[index]
    assert pointers(result) == {"/body": "commit.body_missing"}


async def test_unreported_response_and_missing_session_fail_closed() -> None:
    run = Run("chat")
    assert (await run.call(full(), note=False)).error["code"] == "commit.response_unknown"  # type: ignore[index]
    assert (await run.call(full(), deps=None)).error["code"] == "commit.no_session"  # type: ignore[index]
    assert (await run.call(full(), deps=RpRunDeps(mode="chat"))).error["code"] == "commit.no_session"  # type: ignore[index]
    assert affection(run) == 10


# -- extensions and artifacts --------------------------------------------------------------------


def mood_tag_extension() -> ExtensionRegistry:
    def validate(value: Any, ctx: CommitContext, pointer: str) -> EffectCheck:
        if value["tag"] == "forbidden":
            return EffectCheck(problems=[Problem("ext.mood.forbidden", "that tag is not allowed", f"{pointer}/tag")])
        return EffectCheck(effects=[{"tag": value["tag"].strip()}])

    schema = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"], "additionalProperties": False}
    return ExtensionRegistry([ExtensionCapability("rp.mood/tag", schema, validate)])


async def test_parent_extensions_are_validated_at_their_own_boundary() -> None:
    run = Run("chat", extensions=mood_tag_extension())
    result = await run.call(full(extensions={"rp.mood/tag": {"tag": "forbidden"}}))
    assert result.error["code"] == "commit.extension_invalid"  # type: ignore[index]
    assert pointers(result) == {"/extensions/rp.mood~1tag/tag": "ext.mood.forbidden"}
    ok = await Run("chat", extensions=mood_tag_extension()).call(full(extensions={"rp.mood/tag": {"tag": " 晴 "}}))
    assert ok.meta["extensions"] == {"rp.mood/tag": {"tag": "晴"}}


async def test_a_failing_artifact_generator_only_adds_a_diagnostic() -> None:
    def broken(view: Any) -> Any:
        raise RpError("subagent.timeout", "structured call timed out")

    def options(view: Any) -> Any:
        assert view.body == WRITER_TEXT and view.effects == tuple(good_effects())
        return {"options": ["继续追问", "离开"]}

    artifacts = ArtifactRegistry([ArtifactGenerator("rp.broken", broken), ArtifactGenerator("rp.reply-options", options)])
    run = Run("chat", artifacts=artifacts)
    result = await run.call(full())
    assert result.ok
    assert result.meta["extensions"] == {"rp.reply-options": {"options": ["继续追问", "离开"]}}
    assert [d["code"] for d in result.meta["diagnostics"]] == ["artifact.failed"]
    assert result.meta["diagnostics"][0]["sourceId"] == "rp.broken"
    assert affection(run) == 13


async def test_generators_do_not_run_for_a_rejected_commit() -> None:
    calls: list[str] = []
    artifacts = ArtifactRegistry([ArtifactGenerator("rp.reply-options", lambda view: calls.append("ran") or {"options": []})])
    run = Run("chat", artifacts=artifacts)
    assert not (await run.call(wrong_commit())).ok
    assert calls == []


async def test_state_diagnostics_travel_in_the_meta() -> None:
    every_turn = copy.deepcopy(DEFINITION)
    every_turn["rules"][0]["cadence"] = "every-turn"
    run = Run("chat")
    run.session.refresh(
        CommitContext(**{**run.ctx.__dict__, "state": apply_bootstrap(empty_projection(), bootstrap_payload(every_turn, VALUE))})
    )
    result = await run.call(full(effects=[]))
    assert result.ok
    assert [d["details"]["namespace"] for d in result.meta["diagnostics"]] == ["story"]
    assert result.meta["diagnostics"][0]["sourceId"] == "rp.state"


# -- live derivation ------------------------------------------------------------------------------


async def test_a_capability_registered_after_the_tool_was_built_is_accepted() -> None:
    seen: list[Any] = []

    def validate(items: Any, ctx: CommitContext) -> EffectCheck:
        seen.extend(item.pointer for item in items)
        return EffectCheck(effects=[{**item.effect, "qty": 1} for item in items])

    run = Run("chat")
    schema = {
        "type": "object",
        "properties": {"kind": {"const": "inventory.add"}, "item": {"type": "string"}},
        "required": ["kind", "item"],
        "additionalProperties": False,
    }
    run.effects.register(EffectCapability("inventory.add", schema, validate))
    result = await run.call(full([*good_effects(), {"kind": "inventory.add", "item": "剑"}]))
    assert result.ok, result.content
    assert seen == ["/effects/1"]
    assert result.meta["effects"][1] == {"kind": "inventory.add", "item": "剑", "qty": 1}
    assert affection(run) == 13  # the fold keeps reading only state.update


def test_check_draft_is_pure() -> None:
    ctx = Run("chat").ctx
    draft = wrong_commit()
    frozen = copy.deepcopy(draft)
    state_before = canonical_json(ctx.state)
    check = check_draft(draft, ctx, state_effect_registry())
    assert {p.code for p in check.problems} == {"state.update.by_out_of_bounds", "state.update.rule_unknown"}
    assert draft == frozen and canonical_json(ctx.state) == state_before


def test_refresh_belongs_to_one_run() -> None:
    run = Run("chat")
    with pytest.raises(ValueError):
        run.session.refresh(CommitContext(**{**run.ctx.__dict__, "run_id": "run2"}))


async def test_artifact_timeouts_do_not_block() -> None:
    async def slow(view: Any) -> Any:
        await asyncio.sleep(10)

    run = Run("chat", artifacts=ArtifactRegistry([ArtifactGenerator("rp.slow", slow, timeout=0.01)]))
    result = await run.call(full())
    assert result.ok and [d["code"] for d in result.meta["diagnostics"]] == ["artifact.timeout"]


async def test_the_conditional_declaration_behaves_the_same() -> None:
    run = Run("chat", declaration="conditional")
    assert "oneOf" not in run.registry.get("rp_commit_turn").parameters
    token = (await run.call(wrong_commit())).error["details"]["token"]  # type: ignore[index]
    patches = [
        {"op": "replace", "path": "/effects/0/payload/changes/0/by", "value": 3},
        {"op": "replace", "path": "/effects/0/payload/changes/1/ruleId", "value": "liyu-mood"},
    ]
    assert (await run.call({"retry": {"token": token, "patches": patches}})).ok
    assert affection(run) == 13
