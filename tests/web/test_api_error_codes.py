"""Every documented error code of the HTTP API, made to happen by a real request.

The documented codes are the table in ``docs/api.md``; ``CASES`` holds one request (or a short
story of them) per code, asserting the status the table gives, the code and the pointer where one
applies. A code added to the table without a case here, or a case for a code the table lacks,
fails ``test_every_documented_code_has_a_case``; a code the web package raises that the table
lacks fails ``test_every_code_the_web_package_raises_is_documented``; and every error response
any case sees must carry a documented code with its documented status.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest

from roleplay.harness.models.routes import key_file, use_key_file
from roleplay.harness.models.secrets import KeyFile
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.testing.fake_openai import serve_fake_openai
from web.api_coverage import Api, documented_codes, raised_codes, recorded_api
from web.web_support import wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"
DOCUMENTED = documented_codes()
UNSET: Any = object()

# Codes the web package writes that no request can produce: each guards an invariant of the code
# around it. A code belongs here only with the reason no request reaches it.
GUARDS = {
    "run.no_turn": "runs.py: a turn-shaped call that returned without a turn; every call the routes start fails first or appends turn/start",
    "profile.rejected": "routes_sessions.py: a refused profile change whose error has no code; the command runner always names one",
}


@dataclass
class Ctx:
    api: Api
    db_url: str
    monkeypatch: pytest.MonkeyPatch
    opened: list[Api]
    home: Path  # where a key file may be kept

    @property
    def client(self) -> httpx.AsyncClient:
        return self.api.client

    @asynccontextmanager
    async def other_app(self, **kw: Any) -> AsyncIterator[Api]:
        """Another app on the same database (a token, other limits); its responses are checked too."""
        async with recorded_api(self.db_url, **kw) as api:
            self.opened.append(api)
            yield api

    async def story(self, **body: Any) -> str:
        r = await self.client.post(f"{API}/sessions", json={"sample": True, **body})
        assert r.status_code == 201, r.text
        return str(r.json()["sessionId"])

    async def played(self) -> str:
        sid = await self.story()
        r = await self.client.post(f"{API}/sessions/{sid}/turns", json={"text": "I knock on the door."})
        assert r.status_code == 202, r.text
        await wait_idle(self.client, sid)
        return sid

    async def persona(self) -> dict[str, Any]:
        r = await self.client.post(f"{API}/assets", json={"kind": "persona", "data": {"name": "Ada", "description": "a clockmaker"}})
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body


def expect(r: httpx.Response, code: str, pointer: Any = UNSET) -> dict[str, Any]:
    """``r`` is the envelope of ``code`` with its documented status (and ``pointer`` when given)."""
    body: dict[str, Any] = r.json()
    assert (r.status_code, body.get("code")) == (DOCUMENTED[code], code), r.text
    assert {"code", "message", "pointer", "problems"} <= body.keys() and body["message"], r.text
    if pointer is not UNSET:
        assert body["pointer"] == pointer, r.text
    return body


Case = Callable[[Ctx], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(code: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        assert code not in CASES, code
        CASES[code] = fn
        return fn

    return register


# -- the envelope and the transport ---------------------------------------------------------------------


@case("request.invalid")
async def _request_invalid(ctx: Ctx) -> None:
    sid = await ctx.story()
    wrong_type = expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": 5}), "request.invalid", "/text")
    assert wrong_type["problems"][0]["code"] == "request.string_type"
    expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi", "txet": "x"}), "request.invalid", "/txet")
    broken = ctx.client.post(f"{API}/sessions/{sid}/turns", content=b'{"text": ', headers={"content-type": "application/json"})
    expect(await broken, "request.invalid", "")  # the whole document, not a character offset
    expect(await ctx.client.get(f"{API}/sessions/{sid}/log", params={"limit": 0}), "request.invalid", "/query/limit")


@case("value.invalid")
async def _value_invalid(ctx: Ctx) -> None:
    # No route lets an unconverted value reach a library model today; this is the net's own test:
    # a model deeper in refusing a value must still be the client's 422, with the pointer.
    from pydantic import BaseModel

    class Strict(BaseModel):
        count: int

    async def refuse(*_: Any, **__: Any) -> Any:
        Strict.model_validate({"count": "many"})

    ctx.monkeypatch.setattr(ctx.api.rt.store, "list_sessions", refuse)
    expect(await ctx.client.get(f"{API}/sessions"), "value.invalid", "/count")


@case("http.bad_request")
async def _bad_request(ctx: Ctx) -> None:
    broken = b"--xyz\r\nno headers and no end"
    r = await ctx.client.post(f"{API}/assets/import", content=broken, headers={"content-type": "multipart/form-data; boundary=xyz"})
    expect(r, "http.bad_request", None)


@case("http.not_found")
async def _not_found(ctx: Ctx) -> None:
    expect(await ctx.client.get(f"{API}/nothing-here"), "http.not_found", None)


@case("http.method_not_allowed")
async def _method_not_allowed(ctx: Ctx) -> None:
    expect(await ctx.client.delete(f"{API}/sessions"), "http.method_not_allowed", None)


@case("http.too_large")
async def _too_large(ctx: Ctx) -> None:
    async with ctx.other_app(max_body_bytes=1024) as small:
        declared = await small.client.post(f"{API}/sessions", content=b"x" * 1025, headers={"content-type": "application/json"})
        expect(declared, "http.too_large", None)

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it arrives
            for _ in range(3):
                yield b"x" * 512

        streamed = await small.client.post(f"{API}/sessions", content=chunks(), headers={"content-type": "application/json"})
        expect(streamed, "http.too_large", None)


@case("http.auth_required")
async def _auth_required(ctx: Ctx) -> None:
    async with ctx.other_app(token="s3cret") as guarded:
        refused = expect(await guarded.client.get(f"{API}/sessions"), "http.auth_required", None)
        assert "s3cret" not in str(refused)
        wrong = await guarded.client.get(f"{API}/sessions", headers={"Authorization": "Bearer nope"})
        expect(wrong, "http.auth_required")
        assert (await guarded.client.get(f"{API}/sessions", headers={"Authorization": "Bearer s3cret"})).status_code == 200
        assert (await guarded.client.get(f"{API}/health")).status_code == 200  # open: load balancers probe it


@case("http.cross_origin")
async def _cross_origin(ctx: Ctx) -> None:
    r = await ctx.client.post(f"{API}/sessions", json={"sample": True}, headers={"Origin": "https://evil.example"})
    expect(r, "http.cross_origin", None)
    assert (await ctx.client.get(f"{API}/sessions")).json() == []  # nothing was created
    same = await ctx.client.post(f"{API}/sessions", json={"sample": True}, headers={"Origin": "http://testserver"})
    assert same.status_code == 201


@case("server.internal")
async def _internal(ctx: Ctx) -> None:
    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("boom with a secret sk-live-123")

    async with ctx.other_app(raise_app_exceptions=False) as quiet:
        ctx.monkeypatch.setattr(quiet.rt.store, "list_sessions", broken)
        r = await quiet.client.get(f"{API}/sessions")
        expect(r, "server.internal", None)
        assert "sk-live" not in r.text and "boom" not in r.text


@case("server.shutting_down")
async def _shutting_down(ctx: Ctx) -> None:
    sid = await ctx.story()
    state = ctx.api.app.state.web
    state.loop = asyncio.get_running_loop()
    state.begin_shutdown()  # what rp serve does on the first Ctrl-C
    await asyncio.sleep(0)
    expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi"}), "server.shutting_down", None)
    assert (await ctx.client.get(f"{API}/sessions/{sid}/messages")).status_code == 200  # reads still answer


@case("store.closed")
async def _store_closed(ctx: Ctx) -> None:
    await ctx.api.rt.store.close()
    expect(await ctx.client.get(f"{API}/sessions"), "store.closed", None)


# -- sessions and turns ---------------------------------------------------------------------------------


@case("session.not_found")
async def _session_not_found(ctx: Ctx) -> None:
    body = expect(await ctx.client.get(f"{API}/sessions/ses_nope"), "session.not_found")
    assert body["details"] == {"sessionId": "ses_nope"}
    expect(await ctx.client.post(f"{API}/sessions/ses_nope/turns", json={"text": "hi"}), "session.not_found")


@case("story.card_required")
async def _card_required(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/sessions", json={}), "story.card_required", "/card")
    assert (await ctx.client.post(f"{API}/sessions", json={"card": None})).status_code == 201  # none, said explicitly


@case("story.opening_out_of_range")
async def _opening_out_of_range(ctx: Ctx) -> None:
    r = await ctx.client.post(f"{API}/sessions", json={"sample": True, "openingIndex": 99})
    expect(r, "story.opening_out_of_range", "/openingIndex")


@case("story.not_blank")
async def _not_blank(ctx: Ctx) -> None:
    sid = await ctx.played()
    expect(await ctx.client.put(f"{API}/sessions/{sid}/opening", json={"opening": "skip"}), "story.not_blank")


@case("session.fork_out_of_range")
async def _fork_out_of_range(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.post(f"{API}/sessions/{sid}/fork", json={"atSeq": 9999}), "session.fork_out_of_range", "/atSeq")


@case("run.busy")
async def _busy(ctx: Ctx) -> None:
    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        ctx.monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        ctx.monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        sid = await ctx.story(model="openai/fake")
        first = await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "Tell me a long story."})
        assert first.status_code == 202
        expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "and another"}), "run.busy")
        expect(await ctx.client.post(f"{API}/sessions/{sid}/continue"), "run.busy")
        expect(await ctx.client.post(f"{API}/sessions/{sid}/undo"), "run.busy")
        assert (await ctx.client.post(f"{API}/sessions/{sid}/abort", json={"turnId": first.json()["turnId"]})).status_code == 200
        await wait_idle(ctx.client, sid)


@case("run.not_running")
async def _not_running(ctx: Ctx) -> None:
    sid = await ctx.story()
    body = expect(await ctx.client.post(f"{API}/sessions/{sid}/abort"), "run.not_running", None)
    assert body["details"] == {"sessionId": sid}
    expect(await ctx.client.post(f"{API}/sessions/{sid}/abort", json={"turnId": "turn_x"}), "run.not_running")


@case("run.session_archived")
async def _archived(ctx: Ctx) -> None:
    sid = await ctx.story()
    assert (await ctx.client.post(f"{API}/sessions/{sid}/archive")).status_code == 200
    expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi"}), "run.session_archived")
    assert (await ctx.client.post(f"{API}/sessions/{sid}/unarchive")).status_code == 200
    assert (await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": "hi"})).status_code == 202
    await wait_idle(ctx.client, sid)


@case("run.empty_input")
async def _empty_input(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.post(f"{API}/sessions/{sid}/turns", json={"text": ""}), "run.empty_input", "/text")


@case("events.invalid_cursor")
async def _invalid_cursor(ctx: Ctx) -> None:
    sid = await ctx.story()
    r = await ctx.client.get(f"{API}/sessions/{sid}/events", headers={"Last-Event-ID": "abc"})
    expect(r, "events.invalid_cursor", "/Last-Event-ID")


@case("events.cursor_ahead")
async def _cursor_ahead(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.get(f"{API}/sessions/{sid}/events", params={"after": 9999}), "events.cursor_ahead", "/after")


@case("chat.not_a_chat")
async def _not_a_chat(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.post(f"{API}/chats/{sid}/messages", json={"text": "hi"}), "chat.not_a_chat")


@case("chat.empty_message")
async def _empty_message(ctx: Ctx) -> None:
    chat = (await ctx.client.post(f"{API}/chats", json={})).json()["sessionId"]
    expect(await ctx.client.post(f"{API}/chats/{chat}/messages", json={"text": "  "}), "chat.empty_message", "/text")


@case("message.not_found")
async def _message_not_found(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.put(f"{API}/sessions/{sid}/messages/99", json={"text": "x"}), "message.not_found", "/messageId")


@case("turn.not_found")
async def _turn_not_found(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.delete(f"{API}/sessions/{sid}/messages/turn_nope"), "turn.not_found", "/turnId")


@case("message.no_alternatives")
async def _no_alternatives(ctx: Ctx) -> None:
    sid = await ctx.played()
    expect(await ctx.client.post(f"{API}/sessions/{sid}/swipe", json={"direction": "left"}), "message.no_alternatives")


@case("metrics.invalid_price")
async def _invalid_price(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.get(f"{API}/sessions/{sid}/metrics", params={"price": "cheap"}), "metrics.invalid_price", "/price")


# -- the profile and the execution mode -----------------------------------------------------------------


async def _profile(ctx: Ctx) -> tuple[str, int]:
    sid = await ctx.story()
    r = await ctx.client.get(f"{API}/sessions/{sid}/profile")
    assert r.headers["etag"] == f'"{r.json()["revision"]}"'
    return sid, int(r.json()["revision"])


@case("profile.revision_required")
async def _profile_revision_required(ctx: Ctx) -> None:
    sid, _ = await _profile(ctx)
    r = await ctx.client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "actor"}})
    expect(r, "profile.revision_required", "/revision")


@case("profile.invalid_if_match")
async def _profile_if_match(ctx: Ctx) -> None:
    sid, _ = await _profile(ctx)
    r = await ctx.client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {}}, headers={"If-Match": "yesterday"})
    expect(r, "profile.invalid_if_match", "/If-Match")


@case("profile.revision_mismatch")
async def _profile_mismatch(ctx: Ctx) -> None:
    sid, rev = await _profile(ctx)
    r = await ctx.client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {}, "revision": rev + 1}, headers={"If-Match": f'"{rev}"'})
    expect(r, "profile.revision_mismatch", "/revision")


@case("profile.revision_conflict")
async def _profile_conflict(ctx: Ctx) -> None:
    sid, rev = await _profile(ctx)
    ok = await ctx.client.patch(
        f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "actor"}}, headers={"If-Match": f'"{rev}"'}
    )
    assert ok.status_code == 200 and ok.headers["etag"] == f'"{rev + 1}"'
    stale = await ctx.client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "director"}, "revision": rev})
    body = expect(stale, "profile.revision_conflict", "/revision")
    assert body["details"] == {"expectedRevision": rev, "currentRevision": rev + 1}
    mode = ctx.client.put(f"{API}/sessions/{sid}/mode", json={"mode": "agent", "revision": rev})
    expect(await mode, "profile.revision_conflict", "/revision")
    route = ctx.client.put(f"{API}/sessions/{sid}/writer-route", json={"route": "follow"}, headers={"If-Match": f'"{rev}"'})
    expect(await route, "profile.revision_conflict", "/revision")


@case("profile.stale_apply")
async def _profile_stale_apply(ctx: Ctx) -> None:
    # Another profile change lands between this one's check and its effect (two processes at
    # once): the command ran on a stale snapshot and took no effect, as apply_profile reports it.
    from dataclasses import replace

    import roleplay.core.execution_mode as execution_mode

    sid, rev = await _profile(ctx)
    real = execution_mode.apply_profile

    async def overtaken(*args: Any, **kwargs: Any) -> Any:
        return replace(await real(*args, **kwargs), applied=False)

    ctx.monkeypatch.setattr(execution_mode, "apply_profile", overtaken)
    body = expect(
        await ctx.client.put(f"{API}/sessions/{sid}/mode", json={"mode": "agent", "revision": rev}), "profile.stale_apply", "/revision"
    )
    assert body["details"]["commandId"].startswith("cmd_")


@case("profile.invalid")
async def _profile_invalid(ctx: Ctx) -> None:
    sid, rev = await _profile(ctx)
    r = await ctx.client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "banana"}, "revision": rev})
    expect(r, "profile.invalid", "/patch/participation")


@case("profile.asset_not_found")
async def _profile_asset_not_found(ctx: Ctx) -> None:
    r = await ctx.client.post(f"{API}/sessions", json={"sample": True, "persona": "ast_nope"})
    expect(r, "profile.asset_not_found")
    assert (await ctx.client.get(f"{API}/sessions")).json() == []  # nothing half-created


@case("mode.invalid")
async def _mode_invalid(ctx: Ctx) -> None:
    sid = await ctx.story()
    expect(await ctx.client.put(f"{API}/sessions/{sid}/mode", json={"mode": "banana"}), "mode.invalid", "/mode")


@case("feature.off")
async def _feature_off(ctx: Ctx) -> None:
    sid = await ctx.played()
    for feature in ("rp-state", "rp-subagent-manager"):
        assert (await ctx.client.post(f"{API}/features/{feature}/disable")).status_code == 200
    async with ctx.other_app() as restarted:  # a server started after the change runs without them
        state = expect(await restarted.client.get(f"{API}/sessions/{sid}/state"), "feature.off")
        assert state["details"] == {"feature": "rp-state"}
        catalog = expect(await restarted.client.get(f"{API}/subagents"), "feature.off")
        assert catalog["details"] == {"feature": "rp-subagent-manager"}
        assert (await restarted.client.get(f"{API}/sessions/{sid}/messages")).status_code == 200


# -- assets ---------------------------------------------------------------------------------------------


@case("asset.not_found")
async def _asset_not_found(ctx: Ctx) -> None:
    body = expect(await ctx.client.get(f"{API}/assets/ast_nope"), "asset.not_found")
    assert body["details"] == {"assetId": "ast_nope"}
    persona = await ctx.persona()
    wrong_kind = expect(await ctx.client.get(f"{API}/assets/{persona['id']}/export"), "asset.not_found")
    assert wrong_kind["details"]["expected"] == "card"


@case("asset.unknown_kind")
async def _unknown_kind(ctx: Ctx) -> None:
    expect(await ctx.client.get(f"{API}/assets", params={"kind": "spell"}), "asset.unknown_kind", "/kind")
    expect(await ctx.client.post(f"{API}/assets", json={"kind": "spell", "data": {}}), "asset.unknown_kind", "/kind")
    expect(await ctx.client.put(f"{API}/defaults/spell", json={"assetId": "x"}), "asset.unknown_kind", "/kind")
    expect(await ctx.client.get("/library/spell"), "asset.unknown_kind", "/kind")


@case("asset.revision_required")
async def _asset_revision_required(ctx: Ctx) -> None:
    persona = await ctx.persona()
    r = await ctx.client.put(f"{API}/assets/{persona['id']}", json={"data": {"name": "Ada", "description": "x"}})
    expect(r, "asset.revision_required", "/revision")


@case("asset.invalid_if_match")
async def _asset_if_match(ctx: Ctx) -> None:
    persona = await ctx.persona()
    r = await ctx.client.put(f"{API}/assets/{persona['id']}", json={"data": {"name": "Ada"}}, headers={"If-Match": "v1"})
    expect(r, "asset.invalid_if_match", "/If-Match")
    expect(await ctx.client.delete(f"{API}/assets/{persona['id']}", headers={"If-Match": "v1"}), "asset.invalid_if_match", "/If-Match")


@case("asset.revision_mismatch")
async def _asset_mismatch(ctx: Ctx) -> None:
    persona = await ctx.persona()
    r = await ctx.client.put(f"{API}/assets/{persona['id']}", json={"data": {"name": "Ada"}, "revision": 2}, headers={"If-Match": '"1"'})
    expect(r, "asset.revision_mismatch", "/revision")


@case("asset.revision_conflict")
async def _asset_conflict(ctx: Ctx) -> None:
    persona = await ctx.persona()
    aid, rev = persona["id"], persona["revision"]
    data = {"name": "Ada", "description": "a watchmaker"}
    first = await ctx.client.put(f"{API}/assets/{aid}", json={"data": data}, headers={"If-Match": f'"{rev}"'})
    assert first.status_code == 200 and first.headers["etag"] == f'"{rev + 1}"'
    second = await ctx.client.put(
        f"{API}/assets/{aid}", json={"data": {**data, "description": "a thief"}}, headers={"If-Match": f'"{rev}"'}
    )
    assert expect(second, "asset.revision_conflict")["details"]["currentRevision"] == rev + 1
    expect(await ctx.client.delete(f"{API}/assets/{aid}", params={"revision": rev}), "asset.revision_conflict")
    assert (await ctx.client.get(f"{API}/assets/{aid}")).json()["data"]["description"] == "a watchmaker"


@case("asset.in_use")
async def _in_use(ctx: Ctx) -> None:
    sid = await ctx.story()
    card = (await ctx.client.get(f"{API}/sessions/{sid}/profile")).json()["profile"]["resources"]["card"]
    refused = expect(await ctx.client.delete(f"{API}/assets/{card}"), "asset.in_use")
    assert {s["sessionId"] for s in refused["details"]["impact"]["sessions"]} == {sid}  # by the card and its lorebook
    assert (await ctx.client.get(f"{API}/assets/{card}")).status_code == 200
    assert (await ctx.client.delete(f"{API}/assets/{card}", params={"force": True})).status_code == 200


@case("asset.no_isolated_prompts")
async def _no_isolated_prompts(ctx: Ctx) -> None:
    sid = await ctx.story()
    card = (await ctx.client.get(f"{API}/sessions/{sid}/profile")).json()["profile"]["resources"]["card"]
    body = expect(await ctx.client.post(f"{API}/assets/{card}/trust", json={"trusted": True}), "asset.no_isolated_prompts")
    assert body["details"] == {"assetId": card}


@case("persona.invalid")
async def _kind_invalid(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/assets", json={"kind": "persona", "data": {"name": 5}}), "persona.invalid", "/name")


@case("upload.too_large")
async def _upload_too_large(ctx: Ctx) -> None:
    async with ctx.other_app(max_upload_bytes=64 * 1024) as small:
        big = ("big.json", b" " * (100 * 1024), "application/json")
        body = expect(await small.client.post(f"{API}/assets/import", files={"files": big}), "upload.too_large", None)
        assert body["details"] == {"limit": 64 * 1024}
        expect(await small.client.post(f"{API}/mvu/inspect", files={"file": big}), "upload.too_large", None)


@case("asset.import.empty")
async def _import_empty(ctx: Ctx) -> None:
    body = expect(await ctx.client.post(f"{API}/assets/import", files={"files": ("x.json", b"", "application/json")}), "asset.import.empty")
    assert body["details"]["file"] == "x.json"
    expect(await ctx.client.post(f"{API}/mvu/inspect", files={"file": ("x.png", b"", "image/png")}), "asset.import.empty")
    # With a second file that imports, the failure is reported in the list and the rest lands.
    mixed = await ctx.client.post(
        f"{API}/assets/import",
        files=[("files", ("x.json", b"", "application/json")), ("files", (SAMPLE_CARD, sample_card_bytes(), "image/png"))],
    )
    assert mixed.status_code == 200 and mixed.json()[0]["error"]["code"] == "asset.import.empty" and "error" not in mixed.json()[1]


@case("asset.json.invalid")
async def _json_invalid(ctx: Ctx) -> None:
    r = await ctx.client.post(f"{API}/assets/import", files={"files": ("x.json", b"{not json", "application/json")})
    expect(r, "asset.json.invalid")


@case("card.format.unknown")
async def _card_format(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/mvu/inspect", files={"file": ("x.png", b"garbage", "image/png")}), "card.format.unknown")


@case("card.avatar.invalid")
async def _avatar_invalid(ctx: Ctx) -> None:
    persona = await ctx.persona()
    r = await ctx.client.put(f"{API}/assets/{persona['id']}/avatar", files={"file": ("a.png", b"not an image", "image/png")})
    expect(r, "card.avatar.invalid")


@case("editor.bad_draft")
async def _bad_draft(ctx: Ctx) -> None:
    persona = await ctx.persona()
    r = await ctx.client.post(f"/library/asset/{persona['id']}/edit", data={"draft": "[1, 2]", "base": "1"})
    expect(r, "editor.bad_draft", "/draft")


# -- sub-agents, settings, features, quick replies, models -----------------------------------------------

CARTOGRAPHER = {"name": "Cartographer", "usageContract": "Call it for maps.", "instructions": "Draw the map as text."}


@case("subagents.invalid")
async def _subagents_invalid(ctx: Ctx) -> None:
    body = expect(
        await ctx.client.post(f"{API}/subagents", json={**CARTOGRAPHER, "usageContract": ""}), "subagents.invalid", "/usageContract"
    )
    assert [p["pointer"] for p in body["problems"]] == ["/usageContract"]


@case("subagents.conflict")
async def _subagents_conflict(ctx: Ctx) -> None:
    revision = (await ctx.client.get(f"{API}/subagents")).json()["revision"]
    assert (await ctx.client.post(f"{API}/subagents", json={**CARTOGRAPHER, "revision": revision})).status_code == 201
    stale = await ctx.client.post(f"{API}/subagents", json={**CARTOGRAPHER, "name": "Other", "revision": revision})
    expect(stale, "subagents.conflict")
    expect(await ctx.client.delete(f"{API}/subagents/Cartographer", params={"revision": revision}), "subagents.conflict")


@case("subagents.duplicate_name")
async def _subagents_duplicate(ctx: Ctx) -> None:
    assert (await ctx.client.post(f"{API}/subagents", json=CARTOGRAPHER)).status_code == 201
    expect(await ctx.client.post(f"{API}/subagents", json=CARTOGRAPHER), "subagents.duplicate_name")


@case("subagents.unknown")
async def _subagents_unknown(ctx: Ctx) -> None:
    expect(await ctx.client.put(f"{API}/subagents/nobody", json={"enabled": False}), "subagents.unknown", "/name")
    expect(await ctx.client.delete(f"{API}/subagents/nobody"), "subagents.unknown", "/name")


@case("settings.unknown_key")
async def _settings_unknown(ctx: Ctx) -> None:
    expect(await ctx.client.get(f"{API}/settings/nope.key"), "settings.unknown_key")
    expect(await ctx.client.put(f"{API}/settings/nope.key", json={"value": 1}), "settings.unknown_key")


@case("settings.invalid_value")
async def _settings_invalid(ctx: Ctx) -> None:
    expect(await ctx.client.put(f"{API}/settings/language", json={"value": "klingon"}), "settings.invalid_value", "/value")


@case("settings.invalid_if_match")
async def _settings_if_match(ctx: Ctx) -> None:
    r = await ctx.client.put(f"{API}/settings/language", json={"value": "en"}, headers={"If-Match": "latest"})
    expect(r, "settings.invalid_if_match", "/If-Match")


@case("settings.revision_mismatch")
async def _settings_mismatch(ctx: Ctx) -> None:
    r = await ctx.client.put(f"{API}/settings/language", json={"value": "en", "revision": 3}, headers={"If-Match": '"2"'})
    expect(r, "settings.revision_mismatch", "/revision")


@case("settings.conflict")
async def _settings_conflict(ctx: Ctx) -> None:
    rev = (await ctx.client.get(f"{API}/settings/language")).json()["revision"]
    assert (await ctx.client.put(f"{API}/settings/language", json={"value": "zh", "revision": rev})).status_code == 200
    expect(await ctx.client.put(f"{API}/settings/language", json={"value": "en", "revision": rev}), "settings.conflict")
    expect(await ctx.client.delete(f"{API}/settings/language", params={"revision": rev}), "settings.conflict")


@case("features.unknown")
async def _features_unknown(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/features/rp-telepathy/enable"), "features.unknown", "/name")


@case("features.conflict")
async def _features_conflict(ctx: Ctx) -> None:
    rev = (await ctx.client.get(f"{API}/features")).json()["revision"]
    assert (await ctx.client.post(f"{API}/features/rp-state/disable", json={"revision": rev})).status_code == 200
    expect(await ctx.client.post(f"{API}/features/rp-state/enable", json={"revision": rev}), "features.conflict")


@case("quick_replies.invalid")
async def _quick_replies_invalid(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/quick-replies", json={"label": "", "text": "x"}), "quick_replies.invalid", "/label")
    expect(await ctx.client.post(f"{API}/quick-replies", json={"label": "x" * 41, "text": "x"}), "quick_replies.invalid", "/label")


@case("quick_replies.not_found")
async def _quick_replies_not_found(ctx: Ctx) -> None:
    expect(await ctx.client.put(f"{API}/quick-replies/nope", json={"text": "x"}), "quick_replies.not_found", "/label")
    expect(await ctx.client.delete(f"{API}/quick-replies/nope"), "quick_replies.not_found", "/label")


@case("quick_replies.conflict")
async def _quick_replies_conflict(ctx: Ctx) -> None:
    rev = (await ctx.client.get(f"{API}/quick-replies")).json()["revision"]
    assert (
        await ctx.client.post(f"{API}/quick-replies", json={"label": "Look", "text": "I look around.", "revision": rev})
    ).status_code == 201
    expect(
        await ctx.client.post(f"{API}/quick-replies", json={"label": "Wait", "text": "I wait.", "revision": rev}), "quick_replies.conflict"
    )


@case("model.unknown_provider")
async def _unknown_provider(ctx: Ctx) -> None:
    expect(await ctx.client.post(f"{API}/models/test", json={"model": "nowhere/x", "prompt": "hi"}), "model.unknown_provider")
    expect(await ctx.client.post(f"{API}/chats", json={"model": "nowhere/x"}), "model.unknown_provider")
    expect(await ctx.client.post(f"{API}/sessions", json={"sample": True, "model": "nowhere/x"}), "model.unknown_provider")
    assert (await ctx.client.get(f"{API}/sessions")).json() == []  # a bad route creates nothing


@contextmanager
def stored_keys(home: Path | None) -> Iterator[None]:
    """Model keys kept in ``home`` (``rp serve`` with a home directory), or nowhere (None)."""
    before = key_file()
    use_key_file(KeyFile(home) if home is not None else None)
    try:
        yield
    finally:
        use_key_file(before)


@case("keys.unavailable")
async def _keys_unavailable(ctx: Ctx) -> None:
    with stored_keys(None):
        expect(await ctx.client.put(f"{API}/models/keys/deepseek", json={"key": "sk-abc"}), "keys.unavailable", None)
        expect(await ctx.client.get(f"{API}/models/keys"), "keys.unavailable", None)


@case("keys.provider_not_found")
async def _keys_provider(ctx: Ctx) -> None:
    with stored_keys(ctx.home):
        r = await ctx.client.put(f"{API}/models/keys/nowhere", json={"key": "sk-abc"})
        assert "sk-abc" not in r.text
        expect(r, "keys.provider_not_found", "/provider")


@case("keys.invalid")
async def _keys_invalid(ctx: Ctx) -> None:
    with stored_keys(ctx.home):
        expect(await ctx.client.put(f"{API}/models/keys/openai", json={"key": "two\nlines"}), "keys.invalid", "/key")


# -- the tests ------------------------------------------------------------------------------------------


def test_every_documented_code_has_a_case() -> None:
    assert DOCUMENTED, "docs/api.md lists no error codes"
    assert sorted(CASES) == sorted(DOCUMENTED), "docs/api.md's error codes and this file's CASES differ"


def test_every_code_the_web_package_raises_is_documented() -> None:
    codes, suffixes = raised_codes()
    missing = {code: where for code, where in codes.items() if code not in DOCUMENTED and code not in GUARDS}
    assert missing == {}, "raised in the web package but not in docs/api.md (or GUARDS, with the reason no request reaches it)"
    for suffix, where in suffixes.items():
        assert any(code.endswith(suffix) for code in DOCUMENTED), f"{where} builds *{suffix} codes; docs/api.md has none"
    assert set(GUARDS) <= set(codes), "a guard that the web package no longer raises"
    assert not set(GUARDS) & set(DOCUMENTED), "a documented code cannot be a guard"


@pytest.mark.parametrize("code", sorted(DOCUMENTED))
async def test_documented_code(code: str, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with recorded_api(db_url) as api:
        ctx = Ctx(api, db_url, monkeypatch, [], tmp_path / "home")
        await CASES[code](ctx)
        seen = [s for a in [api, *ctx.opened] for s in a.recorder.errors()]
    assert any(s.code == code for s in seen), f"no response carried {code}"
    wrong = [(s.method, s.path, s.status, s.code) for s in seen if s.code not in DOCUMENTED or DOCUMENTED[s.code] != s.status]
    assert wrong == [], "error responses whose code is not documented, or not with this status"


async def test_the_openapi_document_declares_every_documented_status(db_url: str) -> None:
    async with recorded_api(db_url) as api:
        spec = (await api.client.get(f"{API}/openapi.json")).json()
    statuses = {str(s) for s in DOCUMENTED.values()} - {"405"}  # a method the path lacks: no operation to declare it on
    lacking = {
        f"{method.upper()} {path}": sorted(statuses - set(op["responses"]))
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if statuses - set(op["responses"])
    }
    assert lacking == {}
    error_out = spec["components"]["schemas"]["ErrorOut"]
    assert {"code", "message", "pointer", "problems"} <= set(error_out["properties"]) and "docs/api.md" in str(error_out)
