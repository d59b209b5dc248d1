"""The web app's pages rendered in process: every page paints, carries the strict CSP, has no
inline script, and a stranger's card renders inert (roleplay.web.ui)."""

from __future__ import annotations

import json
import re
from html import unescape as html_unescape
from typing import Any

import httpx
import pytest

from roleplay.web.ui import CSP
from roleplay.web.ui.render import render_markdown
from web.web_support import new_story, wait_idle

EVIL = '<script>alert("x")</script> <img src=x onerror=alert(1)> [click](javascript:alert(1)) <a href="javascript:alert(2)">a</a>'


def assert_safe_page(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    assert r.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    html = r.text
    for tag in re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.S):
        assert tag.strip() == "", "an inline script"
    for attrs in re.findall(r"<script\b([^>]*)>", html):
        assert 'src="/static/' in attrs
    assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", html, flags=re.I), "an inline event handler"
    assert not re.search(r"<a\b[^>]*href=[\"']?\s*javascript:", html, flags=re.I)
    return html


async def evil_card(client: httpx.AsyncClient) -> str:
    data = {
        "name": "Evil <b>card</b>",
        "description": EVIL,
        "personality": "",
        "scenario": "",
        "first_mes": f"Hello {EVIL}",
        "mes_example": "",
        "alternate_greetings": [f"Alt {EVIL}"],
        "creator_notes": EVIL,
    }
    r = await client.post("/api/v1/assets", json={"kind": "card", "data": data})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_markdown_is_rendered_and_sanitised() -> None:
    html = str(render_markdown('*waves* "hi"\n**bold** ' + EVIL + " [ok](https://example.org)"))
    assert "<em>waves</em>" in html and "<strong>bold</strong>" in html and "<br" in html
    assert "<script" not in html and "onerror" not in html.replace("onerror=alert(1)&gt;", "")
    assert not re.search(r"<img[^>]*onerror", html)
    assert not re.search(r"<a\b[^>]*href=[\"']?\s*javascript:", html, flags=re.I)
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">ok</a>' in html


async def test_every_page_renders_with_the_csp_and_no_inline_script(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    cards = (await client.get("/api/v1/assets", params={"kind": "card"})).json()
    card = cards[0]["id"]
    for path in ["/", "/?archived=true", "/new", f"/new?card={card}", f"/new/opening?card={card}", f"/s/{sid}",
                 f"/s/{sid}/fragment", "/library", *(f"/library/{k}" for k in ("card", "lorebook", "persona", "preset", "writing-style")),
                 f"/library/asset/{card}", f"/s/{sid}/wiki", f"/s/{sid}/workbench", f"/s/{sid}/workbench/preview", "/settings"]:  # fmt: skip
        assert_safe_page(await client.get(path))
    for asset in (await client.get("/api/v1/assets")).json():
        assert_safe_page(await client.get(f"/library/asset/{asset['id']}/edit"))
    for name in (
        "app.css",
        "api.js",
        "chat.js",
        "dialogue.js",
        "editor.js",
        "library.js",
        "setup.js",
        "start.js",
        "settings.js",
        "wiki.js",
        "workbench.js",
    ):
        r = await client.get(f"/static/{name}")
        assert r.status_code == 200 and len(r.text) > 100


async def test_start_page_lists_the_story_with_its_card(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    html = assert_safe_page(await client.get("/"))
    assert f'href="/s/{sid}"' in html and "林汐" in html and "Resume" in html


async def test_setup_preselects_the_defaults_and_the_cards_lorebooks(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    await new_story(client)  # imports the sample card and its lorebook
    defaults = (await client.get("/api/v1/defaults")).json()
    html = assert_safe_page(await client.get("/new"))
    assert re.search(rf'value="{defaults["persona"]}" selected', html)
    assert re.search(rf'value="{defaults["preset"]}" selected', html)
    assert re.search(rf'value="{defaults["writing-style"]}" checked', html)
    book = next(a for a in (await client.get("/api/v1/assets", params={"kind": "lorebook"})).json())
    assert re.search(rf'name="lorebook" value="{book["id"]}" checked', html)


async def test_setup_offers_none_for_every_kind_distinct_from_the_default(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    await new_story(client)
    html = assert_safe_page(await client.get("/new"))
    for name in ("persona", "preset"):  # "None" is a choice of its own; the default stays preselected
        assert re.search(rf'<select name="{name}">\s*<option value="none" >None \(leave out\)', html)
    assert 'name="card" value="none"' in html and 'name="no_lorebooks"' in html and 'name="no_styles"' in html
    step2 = assert_safe_page(await client.get("/new/opening?card=none&persona=none&preset=none&no_lorebooks=true&no_styles=true"))
    choice = json.loads(html_unescape(re.search(r"data-choice='([^']*)'", step2).group(1)))  # type: ignore[union-attr]
    assert choice == {"card": None, "persona": None, "preset": None, "lorebooks": [], "writingStyles": []}
    assert "Without a character card" in step2 and 'value="card:' not in step2
    bare = await client.post("/api/v1/sessions", json={**choice, "opening": "skip"})
    assert bare.status_code == 201, bare.text
    sid = bare.json()["sessionId"]
    for path in (f"/s/{sid}", f"/s/{sid}/wiki", f"/s/{sid}/workbench", f"/s/{sid}/workbench/preview"):  # nothing bound: every view works
        assert_safe_page(await client.get(path))
    defaulted = assert_safe_page(await client.get("/new/opening?card=none"))
    assert json.loads(html_unescape(re.search(r"data-choice='([^']*)'", defaulted).group(1))) == {  # type: ignore[union-attr]
        "card": None,
        "lorebooks": [],
        "writingStyles": [],
    }  # fmt: skip  (no persona/preset key: the API's defaults)


async def test_a_hostile_card_renders_inert_everywhere(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    card = await evil_card(client)
    opening = assert_safe_page(await client.get(f"/new/opening?card={card}"))
    assert "&lt;script&gt;" in opening and "<script>alert" not in opening
    sid = await new_story(client, card=card, sample=False)
    for path in (f"/s/{sid}", f"/s/{sid}/fragment", f"/library/asset/{card}", f"/library/asset/{card}/edit", "/", "/library/card"):
        html = assert_safe_page(await client.get(path))
        assert "<script>alert" not in html and "<b>card</b>" not in html
    chat = (await client.get(f"/s/{sid}")).text
    assert "&lt;script&gt;alert" in chat  # shown as text, not dropped


async def test_the_chat_page_shows_turns_actions_and_the_resume_point(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, rt = api
    sid = await new_story(client)
    r = await client.post(f"/api/v1/sessions/{sid}/turns", json={"text": "I knock *twice*."})
    assert r.status_code == 202, r.text
    await wait_idle(client, sid)
    r = await client.post(f"/api/v1/sessions/{sid}/regenerate", json={})
    assert r.status_code == 202, r.text
    await wait_idle(client, sid)
    html = assert_safe_page(await client.get(f"/s/{sid}"))
    head = await rt.store.head(sid)
    assert f'data-head="{head}"' in html
    assert "I knock <em>twice</em>." in html
    assert re.search(r'class="swipe-count"[^>]*>2/2<', html)
    assert 'data-action="regenerate"' in html and 'data-action="swipe-left"' in html
    assert html.count('data-action="branch"') >= 2
    state = (await client.get(f"/api/v1/sessions/{sid}/state")).json()["values"]
    for namespace in state:
        assert f"<h4>{namespace}</h4>" in html
    from roleplay.reply_options.projection import PROJECTION, live_entries

    entries = live_entries((await rt.service.projection(sid, PROJECTION)).state)
    assert entries, "the demo offers reply options"
    last = [e for e in entries if e["messageId"] in html]
    for option in last[-1]["options"]:
        assert f'class="reply-option" data-text="{option}"' in html


async def test_a_long_story_paints_a_window_with_a_link_to_earlier_messages(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    sid = await new_story(client)
    for text in ("one", "two"):
        assert (await client.post(f"/api/v1/sessions/{sid}/turns", json={"text": text})).status_code == 202
        await wait_idle(client, sid)
    html = assert_safe_page(await client.get(f"/s/{sid}?show=2"))
    assert html.count("<article") == 2 and "Show 3 earlier messages" in html
    assert assert_safe_page(await client.get(f"/s/{sid}?show=0")).count("<article") == 5


async def test_unknown_pages_answer_in_the_error_envelope(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    assert (await client.get("/s/ses_nope")).status_code == 404
    assert (await client.get("/library/nonsense")).status_code in (400, 422)


pytestmark = pytest.mark.anyio


async def test_with_rp_state_off_the_saved_state_is_shown_read_only_with_a_notice(db_url: str) -> None:
    from web.web_support import api_client

    async with api_client(db_url) as (client, _):
        sid = await new_story(client)
        assert (await client.post(f"/api/v1/sessions/{sid}/turns", json={"text": "I knock."})).status_code == 202
        await wait_idle(client, sid)
        assert (await client.post("/api/v1/features/rp-state/disable", json={})).status_code == 200
    async with api_client(db_url) as (client, rt):  # a server started after the change
        assert "rp-state" not in rt.features
        html = assert_safe_page(await client.get(f"/s/{sid}"))
        assert "turned off on this server: this is the state saved before, read-only" in html
        assert "<h4>story</h4>" in html


async def test_display_features_turned_off_leave_the_chat_plain(db_url: str) -> None:
    from web.web_support import api_client

    async with api_client(db_url) as (client, _):
        sid = await new_story(client)
        assert (await client.post("/api/v1/quick-replies", json={"label": "Nod", "text": "*nods*"})).status_code == 201
        on = (await client.get(f"/s/{sid}")).text
        assert 'data-dialogue="on"' in on and 'class="avatar initial"' in on and 'data-action="edit"' in on and "quick-reply" in on
        for name in ("rp-dialogue-highlight", "rp-message-avatar", "rp-message-actions", "rp-quick-replies"):
            assert (await client.post(f"/api/v1/features/{name}/disable", json={})).status_code == 200
    async with api_client(db_url) as (client, _):
        off = assert_safe_page(await client.get(f"/s/{sid}"))
        assert 'data-dialogue="off"' in off and "avatar" not in off and 'data-action="edit"' not in off and "quick-reply" not in off
        assert 'data-action="copy"' in off


async def test_the_workbench_preview_shows_the_writer_prompt_and_none_of_the_commit_material(
    api: tuple[httpx.AsyncClient, Any],
) -> None:
    from roleplay.core.run import prepare_run
    from roleplay.harness.models.routes import Route

    client, rt = api
    sid = await new_story(client)
    html = html_unescape(assert_safe_page(await client.get(f"/s/{sid}/workbench/preview")))
    p = await prepare_run(rt, sid, "(next input)", parent_route=Route("demo", "demo"))
    writer_lines = {line.strip() for line in p.build.writer_prompt.splitlines() if len(line.strip()) > 30}
    commit_lines = {line.strip() for line in p.run_context.splitlines() if len(line.strip()) > 30} - writer_lines
    assert writer_lines and all(line in html for line in writer_lines)  # the exact Writer prompt
    assert commit_lines, "the sample story's commit context has material of its own (revision, protocol, rules)"
    leaked = sorted(line for line in commit_lines if line in html)
    assert not leaked, leaked[:5]
