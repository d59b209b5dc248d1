"""``rp_asset_read`` and ``rp_asset`` through ``ToolRegistry.execute`` against real stores (SQLite
and PostgreSQL): the profile as the Chat permission boundary, library browsing with bound flags,
dangling bindings, bounded reads of large assets, CAS writes and binds as ``rp-session-apply``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from roleplay.assets.store import AssetRecord, AssetStore
from roleplay.core.asset_tools import AGENT_ONLY_TOOLS, asset_tools
from roleplay.core.profile import SESSION_APPLY, apply_profile, profile_of
from roleplay.core.run_context import RpRunDeps, RunMode
from roleplay.core.sources import StoreAssetReader
from roleplay.harness.events import EventDraft
from roleplay.harness.models.types import ToolCall
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext, ToolRegistry, ToolResultData

pytestmark = pytest.mark.anyio


class World:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.assets = AssetStore(store)
        self.service = SessionService(store)
        self.registry = ToolRegistry(asset_tools(self.service, self.assets))
        self.sid = ""
        self.made: dict[str, AssetRecord] = {}

    async def call(self, name: str, args: dict[str, Any], *, mode: RunMode | None = None, depth: int = 0) -> ToolResultData:
        deps = None if mode is None else RpRunDeps(mode=mode)
        ctx = ToolContext(self.sid, "turn_1", "step_1", "call_1", depth=depth, deps=deps)
        return await self.registry.execute(ToolCall("call_1", name, json.dumps(args, ensure_ascii=False)), ctx)

    async def read(self, args: dict[str, Any], *, mode: RunMode | None = None) -> Any:
        out = await self.call("rp_asset_read", args, mode=mode)
        return json.loads(out.content) if out.ok else out.error  # type: ignore[arg-type]

    async def profile(self) -> dict[str, Any]:
        return (await self.service.projection(self.sid, "rp/session")).state


def lorebook(name: str, entries: int = 2, size: int = 10) -> dict[str, Any]:
    book = {str(i): {"uid": i, "key": [f"k{i}", "moon"], "comment": f"entry {i}", "content": "x" * size} for i in range(entries)}
    return {"name": name, "book": {"entries": book}}


async def world(store: EventStore) -> World:
    """A session bound to a card and two lorebooks; a persona and a third book stay unbound."""
    w = World(store)
    for key, kind, data in [
        ("card", "card", {"name": "Irene", "description": "A lighthouse keeper."}),
        ("book1", "lorebook", lorebook("Harbor")),
        ("book2", "lorebook", lorebook("Fog")),
        ("book3", "lorebook", lorebook("Unbound")),
        ("persona", "persona", {"name": "Mira", "description": "A sailor."}),
    ]:
        w.made[key] = await w.assets.create(kind, data)
    w.sid = (await w.service.create("roleplay")).id
    patch = {"resources": {"card": w.made["card"].id, "lorebooks": [w.made["book2"].id, w.made["book1"].id]}}
    applied = await apply_profile(w.service, w.sid, {"patch": patch}, StoreAssetReader(w.assets))
    assert applied.applied
    return w


async def test_chat_lists_only_the_current_bindings_in_profile_order(store: EventStore) -> None:
    w = await world(store)
    out = await w.call("rp_asset_read", {"action": "list"})  # no rpMode: Chat
    assert out.ok and out.meta == {"kind": "rp-asset/read", "action": "list", "mode": "chat", "scope": "bound", "profileRevision": 1}
    listed = json.loads(out.content)  # type: ignore[arg-type]
    assert [(i["id"], i["binding"], i["bound"], i["status"]) for i in listed["items"]] == [
        (w.made["card"].id, "/resources/card", True, "available"),
        (w.made["book2"].id, "/resources/lorebooks/0", True, "available"),
        (w.made["book1"].id, "/resources/lorebooks/1", True, "available"),
    ]
    assert listed["total"] == 3 and "data" not in listed["items"][0]  # compact: no asset bodies

    books = await w.read({"action": "list", "kind": "lorebook", "limit": 1, "offset": 1}, mode="chat")
    assert (books["total"], [i["name"] for i in books["items"]]) == (2, ["Harbor"])
    assert (await w.read({"action": "list", "kind": "persona"}))["items"] == []  # the library has one; none is bound

    refused = await w.read({"action": "list", "kind": "persona", "scope": "library"}, mode="chat")
    assert (refused["code"], refused["pointer"]) == ("asset.library_agent_only", "/scope")


async def test_chat_get_reads_bound_assets_and_refuses_every_other_id(store: EventStore) -> None:
    w = await world(store)
    card = await w.read({"action": "get", "id": w.made["card"].id})
    assert card["asset"]["data"]["description"] == "A lighthouse keeper."
    assert (card["asset"]["bound"], card["asset"]["binding"], card["truncated"]) == (True, "/resources/card", False)

    for args in [
        {"id": w.made["persona"].id},
        {"id": w.made["book3"].id},
        {"id": w.made["card"].id, "kind": "lorebook"},
        {"id": "ast_nope"},
    ]:
        err = await w.read({"action": "get", **args}, mode="chat")
        assert (err["code"], err["pointer"], err["details"]["assetId"]) == ("asset.not_bound", "/id", args["id"])


async def test_agent_browses_the_library_without_claiming_bindings(store: EventStore) -> None:
    w = await world(store)
    books = await w.read({"action": "list", "kind": "lorebook"}, mode="agent")
    assert (books["mode"], books["scope"], books["total"]) == ("agent", "library", 3)
    assert {i["name"]: i["bound"] for i in books["items"]} == {"Harbor": True, "Fog": True, "Unbound": False}
    assert "binding" not in next(i for i in books["items"] if i["name"] == "Unbound")

    persona = await w.read({"action": "get", "id": w.made["persona"].id}, mode="agent")
    assert persona["asset"]["bound"] is False and persona["asset"]["data"]["name"] == "Mira"
    missing = await w.read({"action": "get", "id": "ast_nope"}, mode="agent")
    assert missing["code"] == "asset.not_found"
    wrong_kind = await w.read({"action": "get", "id": w.made["persona"].id, "kind": "card"}, mode="agent")
    assert wrong_kind["code"] == "asset.not_found"

    assert (await w.read({"action": "list"}, mode="agent"))["pointer"] == "/kind"  # the library needs a kind
    bound_view = await w.read({"action": "list", "scope": "bound"}, mode="agent")
    assert [i["id"] for i in bound_view["items"]] == [w.made[k].id for k in ("card", "book2", "book1")]
    # Arguments of the other action are refused, not ignored.
    mixed = await w.read({"action": "list", "id": w.made["card"].id}, mode="agent")
    assert (mixed["code"], mixed["pointer"]) == ("asset.invalid_arguments", "/id")


async def test_get_with_the_wrong_kind_says_what_the_id_really_is(store: EventStore) -> None:
    w = await world(store)
    persona = w.made["persona"]
    err = await w.read({"action": "get", "id": persona.id, "kind": "card"}, mode="agent")
    assert err["code"] == "asset.not_found"
    assert err["message"] == f"asset {persona.id!r} is a persona ('Mira'), not a card"
    assert (err["details"]["kind"], err["details"]["expected"]) == ("persona", "card")
    missing = await w.read({"action": "get", "id": "ast_nope", "kind": "card"}, mode="agent")
    assert missing["message"] == "no asset 'ast_nope'" and "kind" not in missing["details"]


async def test_a_dangling_binding_reads_as_unavailable_and_stays_bound(store: EventStore) -> None:
    w = await world(store)
    await w.assets.delete(w.made["book2"].id)
    listed = await w.read({"action": "list"})
    gone = listed["items"][1]
    assert gone == {
        "id": w.made["book2"].id, "kind": "lorebook", "status": "unavailable", "bound": True, "binding": "/resources/lorebooks/0",
        "error": {"code": "asset.unavailable", "message": gone["error"]["message"], "reason": "missing"},
    }  # fmt: skip
    assert [i["status"] for i in listed["items"]] == ["available", "unavailable", "available"]

    for mode in ("chat", "agent"):
        err = await w.read({"action": "get", "id": w.made["book2"].id}, mode=mode)
        assert (err["code"], err["details"]["binding"], err["details"]["reason"]) == (
            "asset.unavailable",
            "/resources/lorebooks/0",
            "missing",
        )
    library = await w.read({"action": "list", "kind": "lorebook"}, mode="agent")
    assert w.made["book2"].id not in [i["id"] for i in library["items"]]
    assert profile_of(await w.profile()).resources.lorebooks == (w.made["book2"].id, w.made["book1"].id)


async def test_a_large_lorebook_comes_back_as_an_outline_then_by_fields(store: EventStore) -> None:
    w = await world(store)
    big = await w.assets.create("lorebook", lorebook("Atlas", entries=40, size=600))
    first = await w.read({"action": "get", "id": big.id, "maxChars": 1000}, mode="agent")
    root = first["asset"]["data"]
    assert first["truncated"] is True and root["truncated"] is True and root["chars"] > 16_000
    assert [c["pointer"] for c in root["children"]] == ["/name", "/book"]

    entries = (await w.read({"action": "get", "id": big.id, "fields": ["/book/entries"], "maxChars": 1000}, mode="agent"))["asset"][
        "fields"
    ]["/book/entries"]
    assert entries["length"] == 40 and entries["children"][7] == {
        "pointer": "/book/entries/7", "type": "object", "chars": entries["children"][7]["chars"], "length": 4,
        "label": "entry 7", "keys": ["k7", "moon"],
    }  # fmt: skip

    picked = await w.read(
        {"action": "get", "id": big.id, "fields": ["/name", "/book/entries/7", "/book/entries/8"], "maxChars": 1000}, mode="agent"
    )
    fields = picked["asset"]["fields"]
    assert fields["/name"] == "Atlas" and fields["/book/entries/7"]["content"] == "x" * 600
    assert fields["/book/entries/8"]["truncated"] is True  # the second entry no longer fits: outlined, not cut
    assert len(json.dumps(picked)) < 3000

    for pointer, code in [("/book/entries/99", "asset.read.field_missing"), ("book", "asset.read.pointer_invalid")]:
        err = await w.read({"action": "get", "id": big.id, "fields": ["/name", pointer]}, mode="agent")
        assert (err["code"], err["pointer"]) == (code, "/fields/1")


async def test_create_and_update_validate_and_cas_and_ask_for_a_context_refresh(store: EventStore) -> None:
    w = await world(store)
    created = await w.call(
        "rp_asset", {"action": "create", "kind": "persona", "data": {"name": "Kai", "description": "A pilot."}}, mode="agent"
    )
    assert created.ok
    asset = json.loads(created.content)["asset"]  # type: ignore[arg-type]
    assert created.meta == {
        "kind": "rp-asset/write",
        "action": "create",
        "refreshContext": True,
        "target": "asset",
        "assetId": asset["id"],
        "revision": 1,
    }
    assert (await w.assets.get(asset["id"])).data["description"] == "A pilot."
    # Creating never binds.
    assert profile_of(await w.profile()).resources.persona is None

    before = (await w.assets.list("persona")).total
    bad = await w.call("rp_asset", {"action": "create", "kind": "persona", "data": {"description": "no name"}}, mode="agent")
    assert not bad.ok and bad.error["pointer"].startswith("/data/")  # type: ignore[index]
    assert (await w.assets.list("persona")).total == before

    edit = {"action": "update", "id": asset["id"], "data": {"name": "Kai", "description": "A retired pilot."}, "expectedRevision": 1}
    updated = await w.call("rp_asset", edit, mode="agent")
    assert updated.ok and updated.meta["revision"] == 2 and updated.meta["refreshContext"] is True  # type: ignore[index]

    stale = await w.call("rp_asset", {**edit, "data": {"name": "Kai", "description": "Overwritten?"}}, mode="agent")
    assert not stale.ok and stale.error["code"] == "asset.revision_conflict"  # type: ignore[index]
    assert stale.error["details"] == {"assetId": asset["id"], "expectedRevision": 1, "currentRevision": 2}  # type: ignore[index]
    now = await w.assets.get(asset["id"])
    assert (now.revision, now.data["description"]) == (2, "A retired pilot.")

    missing = await w.call("rp_asset", {"action": "update", "id": asset["id"], "data": {"name": "Kai"}}, mode="agent")
    assert (missing.error["code"], missing.error["pointer"]) == ("asset.invalid_arguments", "/expectedRevision")  # type: ignore[index]


async def test_bind_is_a_native_rp_session_apply_with_profile_cas(store: EventStore) -> None:
    w = await world(store)
    persona, book3 = w.made["persona"].id, w.made["book3"].id
    args = {
        "action": "bind",
        "bind": {"persona": persona, "lorebooks": [w.made["book1"].id, book3], "card": None},
        "expectedProfileRevision": 1,
    }
    out = await w.call("rp_asset", args, mode="agent")
    assert out.ok, out.error
    bindings = {
        "characterId": None,
        "lorebookIds": [w.made["book1"].id, book3],
        "personaId": persona,
        "presetId": None,
        "writingStyleIds": [],
    }
    assert out.meta is not None and out.meta["bindings"] == bindings
    assert {k: out.meta[k] for k in ("kind", "action", "refreshContext", "target", "assetId", "revision")} == {
        "kind": "rp-asset/write", "action": "bind", "refreshContext": True, "target": "profile", "assetId": None, "revision": 2,
    }  # fmt: skip

    runs = [e for e in await w.service.events(w.sid) if e.type == "command/run" and e.payload["name"] == SESSION_APPLY]
    assert runs[-1].payload["commandId"] == out.meta["commandId"]
    assert runs[-1].payload["args"] == {"patch": {"resources": args["bind"]}, "expectedRevision": 1}
    assert runs[-1].payload["source"] == {"tool": "rp_asset", "callId": "call_1", "turnId": "turn_1", "stepId": "step_1"}
    state = await w.profile()
    assert state["revision"] == 2
    assert state["profile"]["resources"] == {
        "card": None,
        "lorebooks": [w.made["book1"].id, book3],
        "persona": persona,
        "preset": None,
        "writingStyles": [],
    }
    assert [i["id"] for i in (await w.read({"action": "list"}))["items"]] == [w.made["book1"].id, book3, persona]

    # A stale profile revision and an unknown (or wrong-kind) id are error results that change nothing.
    for bind, expected, code, pointer in [
        ({"persona": None}, 1, "profile.revision_conflict", "/expectedProfileRevision"),
        ({"preset": "ast_nope"}, 2, "profile.asset_not_found", "/bind/preset"),
        ({"writingStyles": [persona]}, 2, "profile.asset_not_found", "/bind/writingStyles/0"),
    ]:
        failed = await w.call("rp_asset", {"action": "bind", "bind": bind, "expectedProfileRevision": expected}, mode="agent")
        assert (failed.error["code"], failed.error["pointer"]) == (code, pointer)  # type: ignore[index]
        assert await w.profile() == {**state, "pending": {}}


async def test_rp_asset_is_refused_in_chat_and_inside_sub_agents(store: EventStore) -> None:
    w = await world(store)
    assert AGENT_ONLY_TOOLS == {"rp_asset"}
    head, personas = await store.head(w.sid), (await w.assets.list("persona")).total
    calls = [
        {"action": "create", "kind": "persona", "data": {"name": "Kai"}},
        {"action": "update", "id": w.made["persona"].id, "data": {"name": "Kai"}, "expectedRevision": 1},
        {"action": "bind", "bind": {"persona": w.made["persona"].id}, "expectedProfileRevision": 1},
    ]
    for args in calls:
        for mode, depth in [(None, 0), ("chat", 0), ("agent", 1)]:
            out = await w.call("rp_asset", args, mode=mode, depth=depth)
            assert not out.ok and out.error["code"] == "asset.agent_only", (args, mode, depth)  # type: ignore[index]
    assert await store.head(w.sid) == head and (await w.assets.list("persona")).total == personas
    assert (await w.assets.get(w.made["persona"].id)).revision == 1
    # The registry's own schema check still runs first.
    assert (await w.call("rp_asset", {"action": "delete"}, mode="agent")).error["code"] == "tool.invalid_arguments"  # type: ignore[index]


async def test_bind_retries_when_an_unrelated_append_moves_the_head(store: EventStore) -> None:
    w = await world(store)
    service, raced = w.service, []
    load = service.projection

    async def racing_projection(session_id: str, name: Any, **kw: Any) -> Any:
        loaded = await load(session_id, name, **kw)
        if not raced:  # a concurrent writer appends right after the tool loaded rp/session
            raced.append(
                await service.append(
                    session_id, [EventDraft("command/run", {"commandId": "cmd_other", "name": "other"})], expected_seq=loaded.upto_seq
                )
            )
        return loaded

    service.projection = racing_projection  # type: ignore[method-assign]
    out = await w.call(
        "rp_asset", {"action": "bind", "bind": {"persona": w.made["persona"].id}, "expectedProfileRevision": 1}, mode="agent"
    )
    assert raced and out.ok and out.meta["revision"] == 2  # type: ignore[index]
    runs = [e for e in await service.events(w.sid) if e.type == "command/run" and e.payload["name"] == SESSION_APPLY]
    assert len(runs) == 2  # the setup apply and one tool apply: the lost attempt wrote nothing
