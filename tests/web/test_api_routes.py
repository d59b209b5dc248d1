"""Every route of the app, requested: a happy path for each, and for the API's routes bad input.

``test_every_route_has_a_happy_path`` plays one story through every route the app serves (the
API, the pages, the login, FastAPI's own docs) and fails when a route was never reached, so a new
route needs a request here. The sweeps then send each API route a missing id and an unknown field:
the answer must be the route's own refusal, with a documented code (``docs/api.md``) and status;
and every route that changes a story is 409 ``run.busy`` while a turn runs. Revision conflicts and
the other refusals are in ``test_api_error_codes.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from roleplay.harness.models.routes import key_file, use_key_file
from roleplay.harness.models.secrets import KeyFile
from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from roleplay.testing.fake_openai import serve_fake_openai
from web.api_coverage import Api, app_routes, documented_codes, recorded_api
from web.web_support import wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"
DOCUMENTED = documented_codes()
VALE = {  # a card with its own system prompt, held until trusted
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {"name": "Vale", "description": "A ferryman.", "first_mes": "The boat rocks.", "system_prompt": "Always rhyme."},
}
CARTOGRAPHER = {"name": "Cartographer", "usageContract": "Call it for maps.", "instructions": "Draw the map as text."}

# A valid body for every API route that takes JSON: the unknown-field sweep adds to it.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/v1/sessions"): {"sample": True},
    ("PUT", "/api/v1/sessions/{session_id}/opening"): {"opening": "card"},
    ("PATCH", "/api/v1/sessions/{session_id}/profile"): {"patch": {}, "revision": 1},
    ("POST", "/api/v1/sessions/{session_id}/fork"): {"atSeq": 1},
    ("POST", "/api/v1/sessions/{session_id}/branch"): {},
    ("POST", "/api/v1/sessions/{session_id}/turns"): {"text": "hi"},
    ("POST", "/api/v1/sessions/{session_id}/continue"): {},
    ("POST", "/api/v1/sessions/{session_id}/regenerate"): {},
    ("POST", "/api/v1/sessions/{session_id}/abort"): {},
    ("POST", "/api/v1/sessions/{session_id}/impersonate"): {},
    ("PUT", "/api/v1/sessions/{session_id}/messages/{ref}"): {"text": "hi"},
    ("POST", "/api/v1/sessions/{session_id}/swipe"): {"direction": "left"},
    ("POST", "/api/v1/chats"): {},
    ("POST", "/api/v1/chats/{session_id}/messages"): {"text": "hi"},
    ("PUT", "/api/v1/sessions/{session_id}/mode"): {"mode": "chat"},
    ("PUT", "/api/v1/sessions/{session_id}/writer-route"): {"route": "follow"},
    ("POST", "/api/v1/subagents"): CARTOGRAPHER,
    ("PUT", "/api/v1/subagents/{name}"): {"enabled": False},
    ("POST", "/api/v1/assets"): {"kind": "persona", "data": {"name": "Ada"}},
    ("PUT", "/api/v1/assets/{asset_id}"): {"data": {"name": "Ada"}, "revision": 1},
    ("POST", "/api/v1/assets/{asset_id}/trust"): {"trusted": True},
    ("PUT", "/api/v1/defaults/{kind}"): {"assetId": "ast_nope"},
    ("PUT", "/api/v1/settings/{key}"): {"value": "en"},
    ("POST", "/api/v1/features/{name}/enable"): {},
    ("POST", "/api/v1/features/{name}/disable"): {},
    ("POST", "/api/v1/quick-replies"): {"label": "Look", "text": "I look around."},
    ("PUT", "/api/v1/quick-replies/{label}"): {"text": "I look."},
    ("PUT", "/api/v1/models/keys/{provider}"): {"key": "sk-abc"},
    ("POST", "/api/v1/models/test"): {"prompt": "hi"},
    ("POST", "/api/v1/lorebooks/{lorebook_id}/test"): {"texts": ["hi"]},
}
UPLOADS = {
    ("POST", "/api/v1/assets/import"): "files",
    ("PUT", "/api/v1/assets/{asset_id}/avatar"): "file",
    ("POST", "/api/v1/mvu/inspect"): "file",
}
_PARAM = re.compile(r"\{(\w+)\}")


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[None]:
    """A home for model keys, as ``rp serve`` with a home directory has."""
    before = key_file()
    use_key_file(KeyFile(tmp_path / "home"))
    try:
        yield
    finally:
        use_key_file(before)


def _api_routes(api: Api) -> list[tuple[str, str]]:
    return sorted(k for k in app_routes(api.app) if k[1].startswith(API + "/") and not k[1].endswith("openapi.json"))


async def test_the_route_walk_sees_every_documented_operation(db_url: str) -> None:
    async with recorded_api(db_url) as api:
        spec = (await api.client.get(f"{API}/openapi.json")).json()
        walked = set(app_routes(api.app))
    operations = {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops}
    assert operations and operations <= walked
    assert {(m, p) for m, p in walked if p.startswith(API + "/") and not p.endswith("openapi.json")} == operations
    taking_json = {
        (method.upper(), path)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    }
    assert taking_json == set(BODIES), "BODIES needs a valid body for every route that takes JSON (and no other)"


async def test_every_route_has_a_happy_path(db_url: str, keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    async with recorded_api(db_url) as api:
        c = api.client

        async def call(method: str, url: str, status: int = 200, **kw: Any) -> httpx.Response:
            r = await c.request(method, url, **kw)
            assert r.status_code == status, f"{method} {url}: {r.status_code} {r.text[:300]}"
            return r

        # The server, its docs and the login.
        assert (await call("GET", f"{API}/health")).json()["ok"] is True
        assert "paths" in (await call("GET", f"{API}/openapi.json")).json()
        await call("GET", "/api/docs")
        await call("GET", "/docs/oauth2-redirect")
        await call("GET", "/login")
        assert (await call("POST", "/login", 303, data={"token": "x"})).headers["location"].startswith("/login?error")
        await call("POST", "/logout")

        # A story, start to finish.
        created = (await call("POST", f"{API}/sessions", 201, json={"sample": True})).json()
        sid = created["sessionId"]
        await call("PUT", f"{API}/sessions/{sid}/opening", json={"opening": "card"})
        profile = await call("GET", f"{API}/sessions/{sid}/profile")
        resources = profile.json()["profile"]["resources"]
        card, lorebook = resources["card"], resources["lorebooks"][0]
        patched = await call(
            "PATCH",
            f"{API}/sessions/{sid}/profile",
            json={"patch": {"participation": "actor"}},
            headers={"If-Match": profile.headers["etag"]},
        )
        assert patched.json()["profile"]["participation"] == "actor"
        assert [s["id"] for s in (await call("GET", f"{API}/sessions")).json()] == [sid]
        assert (await call("GET", f"{API}/sessions/{sid}")).json()["id"] == sid
        assert (await call("PUT", f"{API}/sessions/{sid}/mode", json={"mode": "agent"})).json()["executionMode"] == "agent"
        await call("PUT", f"{API}/sessions/{sid}/mode", json={"mode": "chat"})
        await call("PUT", f"{API}/sessions/{sid}/writer-route", json={"route": "follow"})
        for path, body in (("turns", {"text": "I knock on the door."}), ("regenerate", {}), ("continue", {})):
            accepted = await call("POST", f"{API}/sessions/{sid}/{path}", 202, json=body)
            assert accepted.json()["kind"] == ("turn" if path == "turns" else path)
            await wait_idle(c, sid)
            if path == "regenerate":  # two versions of the reply, before Continue adds to it
                swiped = await call("POST", f"{API}/sessions/{sid}/swipe", json={"direction": "left"})
                assert swiped.json()["reply"]["alternatives"]
        assert (await call("GET", f"{API}/sessions/{sid}/running")).json()["turnId"] is None
        messages = (await call("GET", f"{API}/sessions/{sid}/messages")).json()["messages"]
        assert len(messages) >= 3
        assert (await call("PUT", f"{API}/sessions/{sid}/messages/1", json={"text": "The door creaks."})).json()["edited"] is True
        for view in ("state", "activity", "reply-options", "metrics", "prompt", "branches", "subagents"):
            await call("GET", f"{API}/sessions/{sid}/{view}")
        log = (await call("GET", f"{API}/sessions/{sid}/log")).json()
        stream = await call("GET", f"{API}/sessions/{sid}/events", params={"after": 0, "follow": False})
        assert stream.headers["content-type"].startswith("text/event-stream") and f"id: {log[-1]['seq']}" in stream.text
        assert (await call("POST", f"{API}/sessions/{sid}/impersonate")).json()["sessionId"] == sid
        assert (await call("POST", f"{API}/sessions/{sid}/fork", 201, json={"atSeq": log[-1]["seq"]})).json()["forkPoint"]
        assert (await call("POST", f"{API}/sessions/{sid}/branch", 201, json={})).json()["branch"]
        last = len((await call("GET", f"{API}/sessions/{sid}/messages")).json()["messages"])
        await call("DELETE", f"{API}/sessions/{sid}/messages/{last}")
        await call("POST", f"{API}/sessions/{sid}/undo")
        assert (await call("POST", f"{API}/sessions/{sid}/archive")).json()["archived"] is True
        assert (await call("POST", f"{API}/sessions/{sid}/unarchive")).json()["archived"] is False
        with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:  # a turn long enough to abort
            monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            slow = await call("POST", f"{API}/sessions/{sid}/turns", 202, json={"text": "A long tale, please.", "model": "openai/fake"})
            await call("POST", f"{API}/sessions/{sid}/abort", json={"turnId": slow.json()["turnId"]})
            await wait_idle(c, sid)

        # A chat.
        chat = (await call("POST", f"{API}/chats", 201, json={})).json()["sessionId"]
        await call("POST", f"{API}/chats/{chat}/messages", 202, json={"text": "Hello?"})
        await wait_idle(c, chat)

        # Sub-agents.
        await call("GET", f"{API}/subagents")
        await call("POST", f"{API}/subagents", 201, json=CARTOGRAPHER)
        await call("PUT", f"{API}/subagents/Cartographer", json={"enabled": False})
        await call("DELETE", f"{API}/subagents/Cartographer")

        # Assets.
        assert {a["kind"] for a in (await call("GET", f"{API}/assets")).json()} >= {"card", "persona"}
        persona = (await call("POST", f"{API}/assets", 201, json={"kind": "persona", "data": {"name": "Ada", "description": "d"}})).json()
        pid = persona["id"]
        etag = (await call("GET", f"{API}/assets/{pid}")).headers["etag"]
        await call("PUT", f"{API}/assets/{pid}", json={"data": {"name": "Ada", "description": "e"}}, headers={"If-Match": etag})
        assert (await call("GET", f"{API}/assets/{pid}/impact")).json()["sessions"] == []
        png = (await call("GET", f"{API}/assets/{card}/export")).content
        await call("PUT", f"{API}/assets/{pid}/avatar", files={"file": ("a.png", png, "image/png")})
        assert (await call("GET", f"{API}/assets/{pid}/avatar")).headers["content-type"] == "image/png"
        imported = (
            await call("POST", f"{API}/assets/import", files={"files": ("vale.json", json.dumps(VALE).encode(), "application/json")})
        ).json()
        assert imported[0]["isolatedPrompts"] == ["system_prompt"]
        assert (await call("POST", f"{API}/assets/{imported[0]['assetId']}/trust", json={"trusted": True})).json()["trusted"] is True
        await call("GET", f"{API}/defaults")
        await call("PUT", f"{API}/defaults/persona", json={"assetId": pid})
        await call("POST", f"{API}/lorebooks/{lorebook}/test", json={"texts": ["The lighthouse stands on the cliff."]})
        await call("GET", f"{API}/cards/{card}/mvu")
        await call("POST", f"{API}/mvu/inspect", files={"file": (SAMPLE_CARD, sample_card_bytes(), "image/png")})

        # Settings, features, plugins, quick replies, models.
        await call("GET", f"{API}/settings")
        await call("GET", f"{API}/settings/language")
        await call("PUT", f"{API}/settings/language", json={"value": "en"})
        await call("DELETE", f"{API}/settings/language")
        await call("GET", f"{API}/features")
        await call("POST", f"{API}/features/rp-state/disable")
        await call("POST", f"{API}/features/rp-state/enable")
        await call("GET", f"{API}/plugins")
        await call("GET", f"{API}/quick-replies")
        await call("POST", f"{API}/quick-replies", 201, json={"label": "Look", "text": "I look around."})
        await call("PUT", f"{API}/quick-replies/Look", json={"text": "I look up."})
        await call("DELETE", f"{API}/quick-replies/Look")
        await call("GET", f"{API}/models")
        await call("PUT", f"{API}/models/keys/deepseek", 204, json={"key": "sk-abc"})
        assert (await call("GET", f"{API}/models/keys")).json()["keys"]["deepseek"]["stored"] is True
        await call("DELETE", f"{API}/models/keys/deepseek", 204)
        assert (await call("POST", f"{API}/models/test", json={"prompt": "hi"})).json()["demo"] is True

        # The pages.
        for page in ("/", "/new", "/new/opening", f"/s/{sid}", f"/s/{sid}/fragment", f"/s/{sid}/wiki", f"/s/{sid}/workbench",
                     f"/s/{sid}/workbench/preview", "/settings", "/library", "/library/persona", f"/library/asset/{pid}",
                     f"/library/asset/{pid}/edit"):  # fmt: skip
            assert (await call("GET", page)).headers["content-type"].startswith("text/html")
        await call("POST", f"/library/asset/{pid}/edit", data={"draft": '{"name": "Ada"}', "base": "1"})
        await call("DELETE", f"{API}/assets/{pid}")

        everything = app_routes(api.app)
        reached = api.recorder.reached()
        missed = sorted(key for key, endpoint in everything.items() if (key[0], endpoint) not in reached)
    assert missed == [], "routes no request reached: give each a happy path here"


def tiny_png() -> bytes:
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (4, 4), "teal").save(out, "PNG")
    return out.getvalue()


def _fill(template: str) -> str:
    return _PARAM.sub(lambda m: "ses_nope" if m[1] == "session_id" else "nope", template)


async def test_every_api_route_refuses_what_does_not_exist(db_url: str, keys: None) -> None:
    """Each route with a path parameter, sent one that names nothing: its own refusal, documented."""
    async with recorded_api(db_url) as api:
        routes = [k for k in _api_routes(api) if _PARAM.search(k[1])]
        answers: dict[tuple[str, str], tuple[int, str | None]] = {}
        for method, template in routes:
            kw: dict[str, Any] = {}
            if (method, template) in BODIES:
                kw["json"] = BODIES[(method, template)]
            if (method, template) in UPLOADS:
                kw["files"] = {UPLOADS[(method, template)]: ("a.png", tiny_png(), "image/png")}
            r = await api.client.request(method, _fill(template), **kw)
            answers[(method, template)] = (r.status_code, r.json().get("code") if r.status_code >= 400 else None)
        reached = api.recorder.reached()
        endpoints = app_routes(api.app)
    not_reached = [k for k in routes if (k[0], endpoints[k]) not in reached]
    assert not_reached == [], "routing refused these before the route could"
    undocumented = {k: a for k, a in answers.items() if a[1] not in DOCUMENTED or DOCUMENTED[a[1]] != a[0]}
    assert undocumented == {}, "an answer without a documented code and status"
    # Ids that name nothing are 404; names the server does not know (a kind, a setting, a feature) may be 422.
    for (method, template), (status, code) in answers.items():
        if re.search(r"\{(session_id|asset_id|card_id|lorebook_id)\}", template):
            assert status == 404, (method, template, status, code)


async def test_every_json_route_refuses_an_unknown_field(db_url: str) -> None:
    async with recorded_api(db_url) as api:
        for (method, template), body in BODIES.items():
            r = await api.client.request(method, _fill(template), json={**body, "bogus": 1})
            assert r.status_code == 422, (method, template, r.text)
            assert (r.json()["code"], r.json()["pointer"]) == ("request.invalid", "/bogus"), (method, template, r.text)


async def test_every_upload_route_needs_its_file(db_url: str) -> None:
    async with recorded_api(db_url) as api:
        for (method, template), field in UPLOADS.items():
            r = await api.client.request(method, _fill(template), data={"repair": "false"}, files={"other": ("x", b"x", "text/plain")})
            assert r.status_code == 422, (method, template, r.text)
            assert (r.json()["code"], r.json()["pointer"]) == ("request.invalid", f"/{field}"), (method, template, r.text)


# Every route that changes a story, with a body it would accept when the story is idle.
STORY_ACTIONS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "turns", {"text": "and another"}),
    ("POST", "continue", {}),
    ("POST", "regenerate", {}),
    ("POST", "impersonate", {}),
    ("PUT", "messages/1", {"text": "Rewritten."}),
    ("DELETE", "messages/2", None),
    ("POST", "undo", None),
    ("POST", "swipe", {"direction": "left"}),
    ("PUT", "opening", {"opening": "skip"}),
    ("PATCH", "profile", {"patch": {"participation": "director"}}),
    ("PUT", "mode", {"mode": "agent"}),
    ("PUT", "writer-route", {"route": "follow"}),
    ("POST", "branch", {}),
]


async def test_every_story_action_while_a_turn_runs_is_409_busy(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        async with recorded_api(db_url) as api:
            c = api.client
            sid = (await c.post(f"{API}/sessions", json={"sample": True, "model": "openai/fake"})).json()["sessionId"]
            before = (await c.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
            profile = (await c.get(f"{API}/sessions/{sid}/profile")).json()
            running = await c.post(f"{API}/sessions/{sid}/turns", json={"text": "Tell me a long story."})
            assert running.status_code == 202
            answers = {}
            for method, path, body in STORY_ACTIONS:
                if path == "profile":
                    body = {**(body or {}), "revision": profile["revision"]}
                r = await c.request(method, f"{API}/sessions/{sid}/{path}", **({"json": body} if body is not None else {}))
                answers[f"{method} {path}"] = (r.status_code, r.json().get("code"))
            assert (await c.get(f"{API}/sessions/{sid}/running")).json()["turnId"] == running.json()["turnId"]
            assert (await c.post(f"{API}/sessions/{sid}/abort")).status_code == 200
            await wait_idle(c, sid)
            after = (await c.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
            still = (await c.get(f"{API}/sessions/{sid}/profile")).json()
    assert {k: v for k, v in answers.items() if v != (409, "run.busy")} == {}
    assert after[0]["text"] == before[0]["text"] and still["profile"] == profile["profile"]


def _operations(spec: dict[str, Any]) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            yield (method.upper(), path), op


def _types(schema: dict[str, Any]) -> set[str]:
    return {schema["type"]} if "type" in schema else {t for s in schema.get("anyOf", []) for t in _types(s)}


async def test_every_typed_query_parameter_refuses_a_wrong_value(db_url: str) -> None:
    async with recorded_api(db_url) as api:
        spec = (await api.client.get(f"{API}/openapi.json")).json()
        checked = []
        for (method, template), op in _operations(spec):
            for param in op.get("parameters", []):
                if param["in"] == "query" and _types(param["schema"]) & {"integer", "boolean"}:
                    r = await api.client.request(method, _fill(template), params={param["name"]: "lots"})
                    assert r.status_code == 422, (method, template, param["name"], r.text)
                    assert (r.json()["code"], r.json()["pointer"]) == ("request.invalid", f"/query/{param['name']}"), r.text
                    checked.append(param["name"])
    assert {"limit", "after", "revision", "force", "all"} <= set(checked)


STALE = 999


async def test_every_route_that_takes_a_revision_refuses_a_stale_one(db_url: str) -> None:
    """The compare-and-swap routes: a revision the resource has moved past is 409, and nothing changes."""
    async with recorded_api(db_url) as api:
        c = api.client
        spec = (await c.get(f"{API}/openapi.json")).json()
        bodies = spec["components"]["schemas"]

        def takes_revision(op: dict[str, Any]) -> bool:
            params = {p["name"].lower() for p in op.get("parameters", [])}
            refs = [
                s.get("$ref", "")
                for v in op.get("requestBody", {}).get("content", {}).values()
                for s in [v["schema"], *v["schema"].get("anyOf", [])]
            ]
            fields = {f for ref in refs if ref for f in bodies[ref.rsplit("/", 1)[-1]].get("properties", {})}
            return bool({"revision", "if-match"} & (params | fields))

        revisioned = {key for key, op in _operations(spec) if takes_revision(op)}
        sid = (await c.post(f"{API}/sessions", json={"sample": True})).json()["sessionId"]
        pid = (await c.post(f"{API}/assets", json={"kind": "persona", "data": {"name": "Ada"}})).json()["id"]
        assert (await c.post(f"{API}/subagents", json=CARTOGRAPHER)).status_code == 201
        assert (await c.post(f"{API}/quick-replies", json={"label": "Look", "text": "I look."})).status_code == 201
        stale: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
            ("PATCH", f"{API}/sessions/{{session_id}}/profile"): (f"/sessions/{sid}/profile", {"json": {"patch": {"participation": "actor"}, "revision": STALE}}),
            ("PUT", f"{API}/sessions/{{session_id}}/mode"): (f"/sessions/{sid}/mode", {"json": {"mode": "agent", "revision": STALE}}),
            ("PUT", f"{API}/sessions/{{session_id}}/writer-route"): (f"/sessions/{sid}/writer-route", {"json": {"route": "demo", "revision": STALE}}),
            ("POST", f"{API}/subagents"): ("/subagents", {"json": {**CARTOGRAPHER, "name": "Other", "revision": STALE}}),
            ("PUT", f"{API}/subagents/{{name}}"): ("/subagents/Cartographer", {"json": {"enabled": False, "revision": STALE}}),
            ("DELETE", f"{API}/subagents/{{name}}"): ("/subagents/Cartographer", {"params": {"revision": STALE}}),
            ("PUT", f"{API}/assets/{{asset_id}}"): (f"/assets/{pid}", {"json": {"data": {"name": "Eve"}, "revision": STALE}}),
            ("DELETE", f"{API}/assets/{{asset_id}}"): (f"/assets/{pid}", {"headers": {"If-Match": f'"{STALE}"'}}),
            ("PUT", f"{API}/assets/{{asset_id}}/avatar"): (f"/assets/{pid}/avatar", {"files": {"file": ("a.png", tiny_png(), "image/png")}, "data": {"revision": str(STALE)}}),
            ("PUT", f"{API}/settings/{{key}}"): ("/settings/language", {"json": {"value": "zh"}, "headers": {"If-Match": f'"{STALE}"'}}),
            ("DELETE", f"{API}/settings/{{key}}"): ("/settings/language", {"params": {"revision": STALE}}),
            ("POST", f"{API}/features/{{name}}/enable"): ("/features/rp-state/enable", {"json": {"revision": STALE}}),
            ("POST", f"{API}/features/{{name}}/disable"): ("/features/rp-state/disable", {"json": {"revision": STALE}}),
            ("POST", f"{API}/quick-replies"): ("/quick-replies", {"json": {"label": "Wait", "text": "I wait.", "revision": STALE}}),
            ("PUT", f"{API}/quick-replies/{{label}}"): ("/quick-replies/Look", {"json": {"text": "I stare.", "revision": STALE}}),
            ("DELETE", f"{API}/quick-replies/{{label}}"): ("/quick-replies/Look", {"params": {"revision": STALE}}),
        }  # fmt: skip
        assert set(stale) == revisioned, "a route that takes a revision needs a stale request here"
        snapshot = [
            (await c.get(f"{API}{p}")).json()
            for p in (f"/sessions/{sid}/profile", f"/assets/{pid}", "/subagents", "/settings/language", "/features", "/quick-replies")
        ]
        answers = {}
        for (method, template), (path, kw) in stale.items():
            r = await c.request(method, f"{API}{path}", **kw)
            answers[f"{method} {template}"] = (r.status_code, r.json()["code"])
        after = [
            (await c.get(f"{API}{p}")).json()
            for p in (f"/sessions/{sid}/profile", f"/assets/{pid}", "/subagents", "/settings/language", "/features", "/quick-replies")
        ]
    wrong = {k: a for k, a in answers.items() if a[0] != 409 or not a[1].endswith("conflict") or DOCUMENTED.get(a[1]) != 409}
    assert wrong == {}
    assert after == snapshot
