"""The session profile: the model's bounds, ``rp-session-apply`` (full, patch, CAS, dangling
references kept, layout rules with pointers), the ``rp/session`` projection on real stores, and
read-time bindings."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from roleplay.assets.service import AssetService
from roleplay.core.profile import (
    SESSION_APPLY,
    apply_profile,
    mentioned_references,
    merge_patch,
    parse_profile,
    plan_apply,
    profile_of,
    register_profile_commands,
    resolve_bindings,
    session_apply_handler,
    session_projection,
    setup_command,
)
from roleplay.core.sources import StoreAssetReader
from roleplay.core.types import AssetView
from roleplay.errors import ConflictError, RpError, ValidationError
from roleplay.harness.commands import CommandContext, CommandRegistry, CommandSpec
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.projections import ProjectionRegistry
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore

LAYOUT = {
    "slots": [
        {"id": "top", "name": "设定", "sources": ["rp.card", "rp.persona", "rp.custom:tone"]},
        {"id": "history", "name": "对话", "sources": ["rp.conversation-summary", "rp.conversation"]},
        {"id": "extra", "name": "闲置", "sources": ["rp.preset:task", "rp.writing-style:ast_9"], "idle": True, "sectionTag": False},
        {"id": "input", "name": "输入", "sources": ["rp.current-input"]},
    ]
}


def ctx(state: dict[str, Any] | None = None) -> CommandContext:
    return CommandContext("ses_1", "cmd_1", state or {})


def session_state(profile: dict[str, Any] | None, revision: int) -> dict[str, Any]:
    return {"profile": profile, "revision": revision, "pending": {}, "diagnostics": []}


def problems(exc: RpError) -> list[tuple[str, str | None]]:
    return [(p.code, p.pointer) for p in exc.problems]


# -- the model ------------------------------------------------------------------------------------


def test_defaults_and_camel_case_round_trip() -> None:
    profile = parse_profile({})
    assert profile.to_json_dict() == {
        "participation": "adaptive",
        "resources": {"card": None, "lorebooks": [], "persona": None, "preset": None, "writingStyles": []},
        "scene": {"openingSource": "card", "openingIndex": 0, "openingText": ""},
        "runtime": {"executionMode": "chat"},
        "contextBuild": None,
        "customPrompts": [],
    }
    full = {
        "participation": "director",
        "resources": {"card": "ast_1", "lorebooks": ["ast_2"], "persona": "ast_3", "preset": "ast_4", "writingStyles": ["ast_5", "ast_6"]},
        "scene": {"openingSource": "card", "openingIndex": 2, "openingText": "门开了。"},
        "runtime": {"executionMode": "agent", "writerRoute": {"provider": "openai", "model": "gpt-x", "reasoningEffort": "high"}},
        "contextBuild": LAYOUT,
        "customPrompts": [{"id": "tone", "title": "语气", "text": "冷静。"}],
    }
    parsed = parse_profile(full)
    assert parsed.execution_mode == "agent"
    assert parse_profile(parsed.to_json_dict()) == parsed
    assert parsed.to_json_dict()["contextBuild"]["slots"][2] == {**LAYOUT["slots"][2], "idle": True, "sectionTag": False}
    assert parsed.to_json_dict()["contextBuild"]["slots"][0]["sectionTag"] is True  # spec default
    follow = parse_profile({"runtime": {"writerRoute": {"followConversation": True}}})
    assert follow.to_json_dict()["runtime"]["writerRoute"] == {"followConversation": True}


@pytest.mark.parametrize(
    ("doc", "code", "pointer"),
    [
        ({"runtime": {"executionMode": "turbo"}}, "profile.bad_value", "/runtime/executionMode"),
        ({"participation": "narrator"}, "profile.bad_value", "/participation"),
        ({"scene": {"openingIndex": -1}}, "profile.greater_than_equal", "/scene/openingIndex"),
        ({"scene": {"openingIndex": True}}, "profile.wrong_type", "/scene/openingIndex"),
        ({"resources": {"lorebooks": [f"ast_{i}" for i in range(33)]}}, "profile.too_many", "/resources/lorebooks"),
        ({"resources": {"card": "bad id!"}}, "profile.bad_format", "/resources/card"),
        ({"resources": {"writingStyles": ["ast_1", "ast_1"]}}, "profile.duplicate", "/resources/writingStyles/1"),
        ({"runtime": {"writerRoute": {"provider": "openai"}}}, "profile.route_form", "/runtime/writerRoute"),
        ({"runtime": {"writerRoute": {"followConversation": True, "model": "m"}}}, "profile.route_form", "/runtime/writerRoute"),
        ({"runtime": {"writerRoute": {"followConversation": False}}}, "profile.route_form", "/runtime/writerRoute"),
        ({"customPrompts": [{"id": "a", "title": "  "}]}, "profile.blank", "/customPrompts/0/title"),
        ({"customPrompts": [{"id": "a", "title": "t", "text": "x" * 100_001}]}, "profile.too_long", "/customPrompts/0/text"),
        ({"title": "no such field"}, "profile.unknown_key", "/title"),
    ],
)
def test_bounds_are_reported_with_pointers(doc: dict[str, Any], code: str, pointer: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_profile(doc)
    assert err.value.code == "profile.invalid"
    assert (code, pointer) in problems(err.value)


def test_merge_patch_merges_objects_replaces_lists_and_null_removes() -> None:
    target = {"resources": {"card": "a", "lorebooks": ["x", "y"]}, "runtime": {"writerRoute": {"followConversation": True}}}
    patch = {"resources": {"lorebooks": ["z"]}, "runtime": {"writerRoute": None}}
    assert merge_patch(target, patch) == {"resources": {"card": "a", "lorebooks": ["z"]}, "runtime": {}}
    assert target["resources"]["lorebooks"] == ["x", "y"]  # pure


# -- the handler ------------------------------------------------------------------------------------


def test_full_snapshot_result_carries_profile_base_revision_and_bootstrap() -> None:
    boot = {"namespaces": {"story": {"opaque": True}}}
    result = session_apply_handler(
        {"profile": {"resources": {"card": "ast_1"}}, "stateBootstrap": boot}, ctx({"assetExists": {("card", "ast_1")}})
    )
    assert result["baseRevision"] == 0 and result["stateBootstrap"] is boot
    assert result["profile"]["resources"]["card"] == "ast_1"
    assert result["profile"]["runtime"]["executionMode"] == "chat"


def test_patch_merges_into_the_current_profile_and_writes_a_full_snapshot() -> None:
    current = parse_profile(
        {"resources": {"card": "ast_1"}, "runtime": {"executionMode": "agent", "writerRoute": {"provider": "p", "model": "m"}}}
    ).to_json_dict()
    result = session_apply_handler(
        {"patch": {"runtime": {"writerRoute": None}, "scene": {"openingIndex": 1}}},
        ctx({"rpSession": session_state(current, 3), "assetExists": set()}),
    )
    assert result["baseRevision"] == 3
    profile = result["profile"]
    assert profile["runtime"] == {"executionMode": "agent"}  # override removed: the field is gone
    assert profile["resources"]["card"] == "ast_1" and profile["scene"]["openingIndex"] == 1


def test_partial_binding_checks_only_what_it_changes_and_keeps_dangling_refs() -> None:
    # The bound card and the first lorebook are gone from the library; the command binds a persona
    # and appends a lorebook. Only those two are looked up; the dangling ones stay bound.
    current = parse_profile({"resources": {"card": "ast_gone", "lorebooks": ["ast_lost"]}}).to_json_dict()
    looked_up: list[tuple[str, str]] = []

    def exists(kind: str, asset_id: str) -> bool:
        looked_up.append((kind, asset_id))
        return asset_id in {"ast_p", "ast_b"}

    state = {"rpSession": session_state(current, 1), "assetExists": exists}
    result = session_apply_handler({"patch": {"resources": {"persona": "ast_p", "lorebooks": ["ast_lost", "ast_b"]}}}, ctx(state))
    assert sorted(looked_up) == [("lorebook", "ast_b"), ("persona", "ast_p")]
    assert result["profile"]["resources"] == {
        "card": "ast_gone",
        "lorebooks": ["ast_lost", "ast_b"],
        "persona": "ast_p",
        "preset": None,
        "writingStyles": [],
    }
    # A full snapshot that re-sends the dangling card is accepted the same way.
    again = session_apply_handler({"profile": result["profile"]}, ctx({**state, "rpSession": session_state(result["profile"], 2)}))
    assert again["profile"] == result["profile"]


def test_binding_a_missing_asset_fails_with_a_pointer_per_id() -> None:
    state = {"rpSession": session_state(None, 0), "assetExists": {("card", "ast_1")}}
    with pytest.raises(ValidationError) as err:
        session_apply_handler(
            {"patch": {"resources": {"card": "ast_1", "lorebooks": ["ast_1", "ast_x"], "writingStyles": ["ast_y"]}}}, ctx(state)
        )
    assert err.value.code == "profile.asset_not_found"
    # ast_1 exists as a card, not as a lorebook: the kind is part of the check.
    assert problems(err.value) == [
        ("profile.asset_not_found", "/patch/resources/lorebooks/0"),
        ("profile.asset_not_found", "/patch/resources/lorebooks/1"),
        ("profile.asset_not_found", "/patch/resources/writingStyles/0"),
    ]
    with pytest.raises(ValidationError) as err:
        session_apply_handler({"profile": {"resources": {"preset": "ast_z"}}}, ctx(state))
    assert problems(err.value) == [("profile.asset_not_found", "/profile/resources/preset")]


def test_expected_revision_is_a_cas_on_the_profile_revision() -> None:
    state = {"rpSession": session_state(parse_profile({}).to_json_dict(), 2)}
    assert session_apply_handler({"patch": {}, "expectedRevision": 2}, ctx(state))["baseRevision"] == 2
    with pytest.raises(ConflictError) as err:
        session_apply_handler({"patch": {"runtime": {"executionMode": "agent"}}, "expectedRevision": 1}, ctx(state))
    assert (err.value.code, err.value.pointer) == ("profile.revision_conflict", "/expectedRevision")
    assert err.value.details == {"expectedRevision": 1, "currentRevision": 2}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"profile": {}, "patch": {}}, ("profile.args_conflict", "/patch")),
        ({"patch": []}, ("profile.wrong_type", "/patch")),
        ({"profile": {}, "extra": 1}, ("profile.args_unknown", "/extra")),
        ({"profile": {}, "expectedRevision": "1"}, ("profile.bad_revision", "/expectedRevision")),
    ],
)
def test_malformed_args(args: dict[str, Any], expected: tuple[str, str]) -> None:
    with pytest.raises(ValidationError) as err:
        session_apply_handler(args, ctx())
    assert err.value.code == "profile.args_invalid" and expected in problems(err.value)


def layout(*slots: dict[str, Any], prompts: tuple[str, ...] = ("tone",)) -> dict[str, Any]:
    return {"contextBuild": {"slots": list(slots)}, "customPrompts": [{"id": p, "title": p} for p in prompts]}


def slot(id_: str, *sources: str, **kw: Any) -> dict[str, Any]:
    return {"id": id_, "name": id_, "sources": list(sources), **kw}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            layout(slot("a", "rp.card"), slot("a", "rp.current-input")),
            [("profile.context_build.duplicate_slot", "/profile/contextBuild/slots/1/id")],
        ),
        (
            layout(slot("a", "rp.bogus", "rp.preset:bad id", "rp.current-input")),
            [
                ("profile.context_build.unknown_source", "/profile/contextBuild/slots/0/sources/0"),
                ("profile.context_build.unknown_source", "/profile/contextBuild/slots/0/sources/1"),
            ],
        ),
        (
            layout(slot("a", "rp.custom:missing", "rp.current-input")),
            [("profile.context_build.unknown_source", "/profile/contextBuild/slots/0/sources/0")],
        ),
        (
            layout(slot("a", "rp.card"), slot("b", "rp.conversation", idle=True), slot("c", "rp.current-input")),
            [("profile.context_build.idle_not_allowed", "/profile/contextBuild/slots/1")],
        ),
        (layout(slot("a", "rp.card")), [("profile.context_build.current_input_missing", "/profile/contextBuild/slots")]),
        (
            layout(slot("a", "rp.current-input"), slot("b", "rp.current-input")),
            [("profile.context_build.duplicate_source", "/profile/contextBuild/slots/1/sources/0")],
        ),
    ],
)
def test_context_build_rules(doc: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    with pytest.raises(ValidationError) as err:
        session_apply_handler({"profile": doc}, ctx())
    assert problems(err.value) == expected
    assert err.value.pointer == expected[0][1]


def test_idle_rule_follows_the_source_wherever_it_moves() -> None:
    ok = layout(slot("a", "rp.card", "rp.custom:tone", idle=True), slot("b", "rp.conversation-summary", "rp.current-input"))
    assert session_apply_handler({"profile": ok}, ctx())["profile"]["contextBuild"]["slots"][0]["idle"] is True
    moved = layout(slot("a", "rp.card", "rp.conversation-summary", idle=True), slot("b", "rp.current-input"))
    with pytest.raises(ValidationError) as err:
        session_apply_handler({"profile": moved}, ctx())
    assert problems(err.value) == [("profile.context_build.idle_not_allowed", "/profile/contextBuild/slots/0")]
    assert err.value.problems[0].details["sourceIds"] == ["rp.conversation-summary"]


def test_removing_a_custom_prompt_still_in_the_layout_is_refused() -> None:
    current = parse_profile(layout(slot("a", "rp.custom:tone", "rp.current-input"))).to_json_dict()
    with pytest.raises(ValidationError) as err:
        session_apply_handler({"patch": {"customPrompts": []}}, ctx({"rpSession": session_state(current, 1)}))
    assert problems(err.value) == [("profile.context_build.unknown_source", "/patch/contextBuild/slots/0/sources/0")]


def test_registry_records_the_error_with_pointer_and_problem_list() -> None:
    registry = CommandRegistry()
    register_profile_commands(registry)
    ok, err = registry.execute(CommandSpec(SESSION_APPLY, {"profile": {"scene": {"openingSource": "dream"}}}), ctx())
    assert not ok and err["code"] == "profile.invalid" and err["pointer"] == "/profile/scene/openingSource"
    assert err["details"]["problems"][0]["code"] == "profile.bad_value"


def test_mentioned_references_tolerates_malformed_args() -> None:
    args = {"patch": {"resources": {"card": "c", "lorebooks": ["b1", 3, "b1"], "writingStyles": "oops"}}, "profile": "nope"}
    assert mentioned_references(args) == [("card", "c"), ("lorebook", "b1")]
    assert mentioned_references(["not", "a", "dict"]) == []


def test_without_an_existence_answer_no_lookup_happens() -> None:
    # Setup commands get no state from the harness; setup_command() checks before create().
    result = plan_apply({"profile": {"resources": {"card": "ast_anything"}}}, None, 0, None)
    assert result["profile"]["resources"]["card"] == "ast_anything"


# -- on real stores ------------------------------------------------------------------------------------


class DictReader:
    def __init__(self, views: dict[tuple[str, str], AssetView]) -> None:
        self.views = views

    async def read(self, kind: str, asset_id: str) -> AssetView | None:
        return self.views.get((kind, asset_id))


def service_for(store: EventStore) -> SessionService:
    registry = CommandRegistry()
    register_profile_commands(registry)
    return SessionService(store, commands=registry, projections=ProjectionRegistry([session_projection]))


@pytest.mark.anyio
async def test_profile_takes_effect_only_after_a_successful_done(store: EventStore) -> None:
    assets = AssetService(store)
    await assets.ensure_seeds()
    preset = (await assets.store.get_default("preset")).id  # type: ignore[union-attr]
    service = service_for(store)
    sid = (await service.create("roleplay")).id
    reader = StoreAssetReader(assets.store)

    first = await apply_profile(service, sid, {"patch": {"resources": {"preset": preset}}}, reader)
    assert first.applied and first.state["revision"] == 1
    assert profile_of(first.state).resources.preset == preset

    # A failing command (missing card) is logged as an error done and changes nothing.
    failed = await apply_profile(service, sid, {"patch": {"resources": {"card": "ast_nope"}}, "expectedRevision": 1}, reader)
    assert not failed.outcome.ok and failed.outcome.error["code"] == "profile.asset_not_found"  # type: ignore[index]
    assert failed.outcome.error["pointer"] == "/patch/resources/card"  # type: ignore[index]
    assert (failed.state["revision"], failed.state["profile"]) == (1, first.state["profile"])

    # A stale CAS is an error done too.
    stale = await apply_profile(service, sid, {"patch": {"runtime": {"executionMode": "agent"}}, "expectedRevision": 0}, reader)
    assert stale.outcome.error["code"] == "profile.revision_conflict" and stale.state["revision"] == 1  # type: ignore[index]

    # A run without its done (a crash in between) never counts.
    head = await store.head(sid)
    await service.append(
        sid,
        [
            EventDraft(
                "command/run",
                {"commandId": "cmd_crashed", "name": SESSION_APPLY, "args": {"patch": {"runtime": {"executionMode": "agent"}}}},
            )
        ],
        expected_seq=head,
    )
    loaded = await service.projection(sid, session_projection)
    assert loaded.state["revision"] == 1 and profile_of(loaded.state).execution_mode == "chat"
    assert "cmd_crashed" in loaded.state["pending"]

    switched = await apply_profile(service, sid, {"patch": {"runtime": {"executionMode": "agent"}}, "expectedRevision": 1}, reader)
    assert switched.applied and switched.state["revision"] == 2
    assert profile_of(switched.state).execution_mode == "agent"
    assert profile_of(switched.state).resources.preset == preset  # the untouched binding stays


@pytest.mark.anyio
async def test_a_snapshot_computed_against_a_superseded_revision_never_takes_effect(store: EventStore) -> None:
    service = service_for(store)
    sid = (await service.create("roleplay")).id
    base = (await service.projection(sid, session_projection)).state
    # Two commands prepared against the same revision (the second's run lands before the first's
    # done): the first to finish wins, the other is kept out of the projection with a diagnostic.
    one = await service.run_command(sid, SESSION_APPLY, {"patch": {"participation": "actor"}}, state={"rpSession": base})
    two = await service.run_command(sid, SESSION_APPLY, {"patch": {"participation": "director"}}, state={"rpSession": base})
    assert one.ok and two.ok
    state = (await service.projection(sid, session_projection)).state
    assert state["revision"] == 1 and state["profile"]["participation"] == "actor"
    assert [(d["code"], d["commandId"]) for d in state["diagnostics"]] == [("profile.stale_apply", two.command_id)]


@pytest.mark.anyio
async def test_profile_changes_take_the_run_lease_and_the_running_turn_cannot_switch_mode(store: EventStore) -> None:
    """Issue 10.1/10.4: a profile change is ``run.busy`` while a run holds the lease; the run's
    own work (a tool binding an asset) reuses its lease, but executionMode changes only while idle."""
    assets = AssetService(store)
    await assets.ensure_seeds()
    preset = (await assets.store.get_default("preset")).id  # type: ignore[union-attr]
    service = service_for(store)
    sid = (await service.create("roleplay")).id
    reader = StoreAssetReader(assets.store)
    to_agent = {"patch": {"runtime": {"executionMode": "agent"}}}

    async def elsewhere() -> None:  # a UI request: its own task, not part of the run
        await apply_profile(service, sid, to_agent, reader)

    async with run_lease(store, sid):
        with pytest.raises(ConflictError) as busy:
            await asyncio.create_task(elsewhere(), context=contextvars.Context())
        assert busy.value.code == "run.busy"
        # Inside the run: binding goes through on the run's lease, a mode switch does not.
        bound = await apply_profile(service, sid, {"patch": {"resources": {"preset": preset}}}, reader)
        assert bound.applied
        with pytest.raises(ConflictError) as switch:
            await apply_profile(service, sid, to_agent, reader)
        assert switch.value.code == "run.busy" and switch.value.pointer == "/patch/runtime/executionMode"
    state = (await service.projection(sid, session_projection)).state
    assert state["revision"] == 1 and profile_of(state).execution_mode == "chat"
    switched = await apply_profile(service, sid, to_agent, reader)  # idle again
    assert switched.applied and profile_of(switched.state).execution_mode == "agent"


@pytest.mark.anyio
async def test_setup_command_checks_bindings_before_the_session_exists(store: EventStore) -> None:
    assets = AssetService(store)
    await assets.ensure_seeds()
    persona = (await assets.store.get_default("persona")).id  # type: ignore[union-attr]
    reader = StoreAssetReader(assets.store)
    with pytest.raises(ValidationError) as err:
        await setup_command({"profile": {"resources": {"persona": persona, "card": "ast_missing"}}}, reader)
    assert problems(err.value) == [("profile.asset_not_found", "/profile/resources/card")]

    boot = {"namespaces": {}}
    spec = await setup_command({"profile": {"resources": {"persona": persona}}, "stateBootstrap": boot}, reader)
    service = service_for(store)
    sid = (await service.create("roleplay", setup=[spec])).id
    state = (await service.projection(sid, session_projection)).state
    assert state["revision"] == 1 and profile_of(state).resources.persona == persona
    done = [e for e in await service.events(sid) if e.type == "command/done"]
    assert done[0].payload["result"]["stateBootstrap"] == boot


@pytest.mark.anyio
async def test_resolve_bindings_keeps_dangling_ids_and_diagnoses_them() -> None:
    profile = parse_profile({"resources": {"card": "c1", "lorebooks": ["b1", "b2"], "persona": "p1", "writingStyles": ["s1", "s2"]}})
    reader = DictReader(
        {
            ("card", "c1"): AssetView("c1", "card", 3, {"name": "A"}),
            ("lorebook", "b2"): AssetView("b2", "lorebook", 1, {}),
            ("writing-style", "s1"): AssetView("s1", "writing-style", 1, {}),
        }
    )
    bindings, diagnostics = await resolve_bindings(profile, reader)
    assert bindings == {
        "characterId": "c1",
        "lorebookIds": ["b1", "b2"],
        "personaId": "p1",
        "presetId": None,
        "writingStyleIds": ["s1", "s2"],
    }
    assert [(d.code, d.source_id, d.details["binding"]) for d in diagnostics] == [
        ("asset-unavailable", None, "/resources/lorebooks/0"),
        ("asset-unavailable", "rp.persona", "/resources/persona"),
        ("asset-unavailable", "rp.writing-style:s2", "/resources/writingStyles/1"),
    ]
    empty, none = await resolve_bindings(None, reader)
    assert empty == {"characterId": None, "lorebookIds": [], "personaId": None, "presetId": None, "writingStyleIds": []}
    assert none == []


def test_a_saved_layout_may_place_the_cards_depth_prompt() -> None:
    # The workbench saves the default layout, where the Character's Note shares the conversation's
    # slot, and may move it to a slot of its own (issue 13 item 6).
    doc = layout(
        slot("note", "rp.card.depth-prompt"),
        slot("conversation", "rp.conversation", "rp.card.depth-prompt"),
        slot("current-input", "rp.current-input"),
    )
    with pytest.raises(ValidationError) as err:
        parse_profile(doc)
    assert "profile.context_build.duplicate_source" in {p.code for p in err.value.problems}
    del doc["contextBuild"]["slots"][0]
    parsed = parse_profile(doc)
    assert parsed.context_build is not None
    assert parsed.context_build.slots[0].sources[1] == "rp.card.depth-prompt"
