"""Sessions over HTTP: the two-step setup, listing and filters, show, archive, fork, branch, the log."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from web.web_support import new_story, wait_idle

pytestmark = pytest.mark.anyio

API = "/api/v1"


async def test_create_story_binds_the_sample_card_and_opens_it(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, rt = api
    r = await client.post(f"{API}/sessions", json={"sample": True, "title": "Lighthouse", "model": "demo"})
    assert r.status_code == 201
    body = r.json()
    assert body["title"] == "Lighthouse" and body["route"] == "demo/demo" and body["opening"]
    shown = (await client.get(f"{API}/sessions/{body['sessionId']}")).json()
    assert shown["id"] == body["sessionId"] and shown["profile"]["resources"]["card"]
    assert shown["profile"]["runtime"]["route"] == {"provider": "demo", "model": "demo"}


async def test_create_refuses_bad_input_with_the_one_envelope(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    missing = await client.post(f"{API}/sessions", json={})
    assert missing.status_code == 422 and missing.json()["code"] == "story.card_required" and missing.json()["pointer"] == "/card"
    unknown = await client.post(f"{API}/sessions", json={"card": "ast_nope"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "asset.not_found"
    typo = await client.post(f"{API}/sessions", json={"sample": True, "titel": "x"})
    assert typo.status_code == 422 and typo.json()["code"] == "request.invalid" and typo.json()["problems"][0]["pointer"] == "/titel"
    route = await client.post(f"{API}/sessions", json={"sample": True, "model": "nowhere/x"})
    assert route.status_code in (400, 404, 422) and route.json()["code"].startswith("model.")
    out_of_range = await client.post(f"{API}/sessions", json={"sample": True, "openingIndex": 99})
    assert out_of_range.status_code == 422 and out_of_range.json()["code"] == "story.opening_out_of_range"
    assert (await client.get(f"{API}/sessions")).json() == []  # nothing was created


async def test_an_explicit_null_leaves_a_kind_out_where_omitting_it_takes_the_default(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    defaulted = (await client.post(f"{API}/sessions", json={"sample": True, "opening": "skip"})).json()
    resources = (await client.get(f"{API}/sessions/{defaulted['sessionId']}")).json()["profile"]["resources"]
    assert resources["persona"] and resources["preset"] and len(resources["writingStyles"]) == 1 and resources["lorebooks"]
    none = {"card": None, "persona": None, "preset": None, "lorebooks": None, "writingStyles": None, "opening": "skip"}
    bare = await client.post(f"{API}/sessions", json=none)
    assert bare.status_code == 201, bare.text
    resources = (await client.get(f"{API}/sessions/{bare.json()['sessionId']}")).json()["profile"]["resources"]
    assert {k: resources[k] for k in ("card", "persona", "preset", "lorebooks", "writingStyles")} == {
        "card": None, "persona": None, "preset": None, "lorebooks": [], "writingStyles": []
    }  # fmt: skip
    preview = await client.get(f"{API}/sessions/{bare.json()['sessionId']}/prompt", params={"model": "demo"})
    sections = preview.json()["writer"]["sections"]  # no persona, card, lorebook, preset or style section
    assert "player" in sections and not {"persona", "character", "world"} & set(sections)
    assert not [s for s in sections if s.startswith(("preset-", "style-"))]
    missing = await client.post(f"{API}/sessions", json={"opening": "skip"})  # omitted card: still a choice to make
    assert missing.status_code == 422 and missing.json()["code"] == "story.card_required"


async def test_second_step_rechooses_the_opening_until_the_first_turn(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    r = await client.put(f"{API}/sessions/{sid}/opening", json={"opening": "custom", "openingText": "A new dawn."})
    assert r.status_code == 200 and r.json()["opening"] == "A new dawn."
    listed = (await client.get(f"{API}/sessions/{sid}/messages")).json()["messages"]
    assert [m["text"] for m in listed] == ["A new dawn."]
    assert (await client.post(f"{API}/sessions/{sid}/turns", json={"text": "hello"})).status_code == 202
    await wait_idle(client, sid)
    late = await client.put(f"{API}/sessions/{sid}/opening", json={"opening": "skip"})
    assert late.status_code == 400 and late.json()["code"] == "story.not_blank"


async def test_list_filters_archive_and_unarchive(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    a = await new_story(client, title="Alpha")
    b = await new_story(client, title="Beta")
    assert {s["id"] for s in (await client.get(f"{API}/sessions")).json()} == {a, b}
    assert [s["id"] for s in (await client.get(f"{API}/sessions", params={"q": "alp"})).json()] == [a]
    archived = await client.post(f"{API}/sessions/{a}/archive")
    assert archived.status_code == 200 and archived.json()["archived"] is True
    assert [s["id"] for s in (await client.get(f"{API}/sessions")).json()] == [b]
    assert [s["id"] for s in (await client.get(f"{API}/sessions", params={"archived": "true"})).json()] == [a]
    assert len((await client.get(f"{API}/sessions", params={"archived": "all"})).json()) == 2
    assert (await client.post(f"{API}/sessions/{a}/unarchive")).json()["archived"] is False
    bad = await client.get(f"{API}/sessions", params={"archived": "maybe"})
    assert bad.status_code == 422 and bad.json()["problems"][0]["pointer"] == "/query/archived"
    assert (await client.post(f"{API}/sessions/ses_nope/archive")).status_code == 404
    assert (await client.get(f"{API}/sessions/ses_nope")).json()["code"] == "session.not_found"


async def test_fork_branch_tree_and_log(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    assert (await client.post(f"{API}/sessions/{sid}/turns", json={"text": "I knock."})).status_code == 202
    await wait_idle(client, sid)
    log = (await client.get(f"{API}/sessions/{sid}/log")).json()
    assert [e["seq"] for e in log] == list(range(1, len(log) + 1)) and log[-1]["type"] == "turn/end"
    page = (await client.get(f"{API}/sessions/{sid}/log", params={"after": 2, "limit": 3})).json()
    assert [e["seq"] for e in page] == [3, 4, 5]
    fork = await client.post(f"{API}/sessions/{sid}/fork", json={"atSeq": len(log) - 1})
    assert fork.status_code == 201 and fork.json()["forkPoint"]["snapped"] is True
    branch = await client.post(f"{API}/sessions/{sid}/branch", json={"title": "What if"})
    assert branch.status_code == 201
    made = branch.json()["branch"]
    assert made["title"] == "What if" and made["sourceSessionId"] == sid
    tree = (await client.get(f"{API}/sessions/{sid}/branches")).json()
    assert tree["sessionId"] == sid and any(b["sessionId"] == made["sessionId"] for b in tree["branches"])
    past = await client.post(f"{API}/sessions/{sid}/fork", json={"atSeq": 9999})
    assert past.status_code == 422 and past.json()["code"] == "session.fork_out_of_range" and past.json()["pointer"] == "/atSeq"
    subs = (await client.get(f"{API}/sessions/{sid}/subagents")).json()
    assert subs and all(s["parentId"] == sid for s in subs)


async def test_profile_changes_go_through_the_revision(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    read = await client.get(f"{API}/sessions/{sid}/profile")
    revision = read.json()["revision"]
    assert read.headers["etag"] == f'"{revision}"' and read.json()["profile"]["participation"] == "adaptive"
    changed = await client.patch(
        f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "director"}}, headers={"If-Match": f'"{revision}"'}
    )
    assert changed.status_code == 200 and changed.json()["profile"]["participation"] == "director"
    assert changed.json()["revision"] == revision + 1 and changed.headers["etag"] == f'"{revision + 1}"'
    stale = await client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "actor"}, "revision": revision})
    assert stale.status_code == 409 and stale.json()["code"] == "profile.revision_conflict"
    blind = await client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "actor"}})
    assert blind.status_code == 422 and blind.json()["code"] == "profile.revision_required"
    invalid = await client.patch(f"{API}/sessions/{sid}/profile", json={"patch": {"participation": "ghost"}, "revision": revision + 1})
    assert invalid.status_code == 422 and invalid.json()["code"].startswith("profile.")
    assert (await client.get(f"{API}/sessions/{sid}/profile")).json()["profile"]["participation"] == "director"
    assert (await client.get(f"{API}/sessions/ses_nope/profile")).status_code == 404
