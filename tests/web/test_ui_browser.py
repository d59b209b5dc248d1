"""The web app in a real browser: Playwright driving Debian's Chromium against a live server on the
offline demo model (roleplay.web.ui). The newcomer's path: import a card, the two-step setup, play
with the reply streaming in, regenerate, swipe, edit, reload, branch, delete with its impact; a
hostile card renders inert; one keyboard-only path. Screenshots of each screen, desktop and phone
width, go to ``test-artifacts/ui/``.

Skips (with the reason) only when chromium or playwright is missing locally; ``.ci/run`` installs
both, so CI runs them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from roleplay.samples import SAMPLE_CARD, sample_card_bytes
from tests_support import fresh_pg_schema
from web.web_support import LiveServer, start_live_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-quic"]  # fmt: skip

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium; .ci/run does)"),
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    if request.param == "postgres":
        with fresh_pg_schema() as url, start_live_server(url) as live:
            yield live
        return
    with start_live_server(f"sqlite:///{tmp_path / 'rp.db'}") as live:
        yield live


@pytest.fixture
def page(browser: Any, server: LiveServer) -> Iterator[Any]:
    context = browser.new_context(base_url=server.base, viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    problems: list[str] = []
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.problems = problems
    try:
        yield pg
    finally:
        context.close()


def shoot(page: Any, name: str) -> None:
    """The screen at desktop and at a 390 px phone width, and in the dark theme."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.screenshot(path=str(ARTIFACTS / f"{name}-desktop.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(ARTIFACTS / f"{name}-phone.png"), full_page=True)
    page.set_viewport_size(size)
    page.emulate_media(color_scheme="dark")  # the dark theme follows the system's
    page.screenshot(path=str(ARTIFACTS / f"{name}-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")


def import_card(page: Any, path: Path) -> None:
    page.goto("/library")
    page.set_input_files("#import-files", str(path))
    page.wait_for_selector("#import-report[data-done]")
    assert "imported as card" in page.inner_text("#import-results")


def card_file(tmp_path: Path, corpus: Path | None) -> Path:
    real = corpus / "cards" / "default_Seraphina.png" if corpus else None
    if real is not None and real.is_file():
        return real
    path = tmp_path / SAMPLE_CARD
    path.write_bytes(sample_card_bytes())
    return path


@pytest.fixture
def corpus() -> Path | None:
    found = Path(__file__).resolve().parents[3] / "shared" / "corpus"
    return found if found.is_dir() else None


def start_story(page: Any) -> str:
    page.goto("/new")
    page.check("input[name=card] >> nth=0")
    page.click("text=Next: the opening")
    page.wait_for_url("**/new/opening**")
    page.click("text=Start the story")
    page.wait_for_url("**/s/ses_*")
    page.wait_for_selector("#chat[data-ready]")
    return str(page.url.rsplit("/", 1)[-1])


def send(page: Any, text: str) -> None:
    before = page.locator("#messages article:not(.pending):not(.streaming)").count()
    page.fill("#draft", text)
    page.press("#draft", "Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('#messages article:not(.pending):not(.streaming)').length >= n + 2"
        " && document.querySelector('#chat').dataset.busy === 'false'",
        arg=before,
    )


def test_newcomer_path_import_setup_play_regenerate_swipe_edit_reload_branch_delete(page: Any, tmp_path: Path, corpus: Path | None) -> None:
    import_card(page, card_file(tmp_path, corpus))
    shoot(page, "library-import")
    page.goto("/new")
    shoot(page, "setup-step1")
    page.click("text=Next: the opening")
    page.wait_for_url("**/new/opening**")
    shoot(page, "setup-step2")
    sid = start_story(page)
    shoot(page, "chat-opening")
    assert page.locator("#messages article").count() == 1

    for i, text in enumerate(["I step inside, shaking off the rain.", "“Who are you?” I ask.", "I sit by the fire."], 1):
        send(page, text)
        assert page.locator("#messages article").count() == 1 + 2 * i
    # A finished reply is announced, by the imported card's name (the sample's when the corpus is absent).
    speaker = "Seraphina" if corpus is not None and (corpus / "cards" / "default_Seraphina.png").is_file() else "林汐"
    assert page.inner_text("#announce") == f"{speaker} replied."
    # The reply streamed in as deltas before the durable message replaced it.
    assert int(page.get_attribute("#chat", "data-chunks-seen") or 0) >= 3
    assert "I sit by the fire." in page.inner_text("#messages article.user >> nth=-1")
    shoot(page, "chat")

    # Regenerate: a second version, then swipe back to the first.
    last = page.locator("#messages article >> nth=-1")
    first_text = last.locator(".msg-body").inner_text()
    last.locator("[data-action=regenerate]").click()
    page.wait_for_selector(".swipe-count:text('2/2')")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
    page.click("[data-action=swipe-left]")
    page.wait_for_selector(".swipe-count:text('1/2')")
    assert page.locator("#messages article >> nth=-1").locator(".msg-body").inner_text() == first_text

    # Edit the reply in place; an unsaved edit survives a reload.
    page.locator("#messages article >> nth=-1").locator("[data-action=edit]").click()
    page.fill(".edit-box textarea", "An edited *reply*.")
    page.reload()
    page.wait_for_selector("#messages article >> nth=-1 >> .draft-mark")
    page.locator("#messages article >> nth=-1").locator("[data-action=edit]").click()
    assert page.input_value(".edit-box textarea") == "An edited *reply*."
    page.click(".edit-box >> text=Save")
    page.wait_for_selector("#messages article >> nth=-1 >> .msg-body em:text('reply')")

    # Reload: the history is all there, from the server.
    page.reload()
    page.wait_for_selector("#chat[data-ready]")
    assert page.locator("#messages article").count() == 7
    assert "An edited reply." in page.locator("#messages article >> nth=-1").inner_text()

    # Reply options send; the state panel shows the story state.
    if page.locator(".reply-option").count():
        option = page.locator(".reply-option >> nth=0").inner_text()
        page.click(".reply-option >> nth=0")
        page.wait_for_function("() => document.querySelectorAll('#messages article:not(.pending)').length >= 9"
                               " && document.querySelector('#chat').dataset.busy === 'false'")  # fmt: skip
        assert option in page.locator("#messages article.user >> nth=-1").inner_text()
    # Metrics on demand.
    page.locator("#messages article >> nth=-1").locator("[data-action=metrics]").click()
    page.wait_for_selector("#messages article:last-of-type .metrics:not([hidden])")
    assert "tokens in" in page.locator("#messages article >> nth=-1").locator(".metrics").inner_text()

    # Save and regenerate: your last message edited, and the reply to it written again.
    count = page.locator("#messages article").count()
    page.locator("#messages article[data-last-user] [data-action=edit]").click()
    page.fill(".edit-box textarea", "I stand up instead.")
    page.click(".edit-box >> text=Save and regenerate")
    page.wait_for_selector("#messages article[data-last-user] .msg-body:has-text('I stand up instead.')")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
    assert page.locator("#messages article").count() == count

    # Branch from the second message: a new story opens.
    page.locator("#m2 [data-action=branch]").click()
    page.wait_for_url(lambda url: "/s/ses_" in url and sid not in url)
    page.wait_for_selector("#chat[data-ready]")
    assert page.locator("#messages article").count() >= 2

    page.goto("/")
    assert page.locator(".story").count() == 2
    shoot(page, "stories")
    page.fill("input[name=q]", "no such story")
    page.press("input[name=q]", "Enter")
    page.wait_for_selector("text=No story's title contains")
    page.goto("/")
    page.locator(".story >> nth=0 >> [data-archive]").click()
    page.wait_for_function("() => document.querySelectorAll('.story').length === 1")
    page.goto("/?archived=true")
    page.locator(".story >> nth=0 >> [data-archive]").click()  # unarchive
    page.wait_for_function("() => document.querySelectorAll('.story').length === 0")

    # Delete the card: the dialog names the stories that use it.
    page.goto("/library/card")
    page.locator(".asset-item a >> nth=0").click()
    shoot(page, "card-detail")
    page.click("#delete-asset")
    page.wait_for_selector("#delete-impact[data-sessions='2']")
    assert "2 stories use it" in page.inner_text("#delete-impact")
    shoot(page, "delete-impact")
    page.click("#delete-confirm")
    page.wait_for_url("**/library/card")
    assert page.locator(".asset-item").count() == 0
    assert page.problems == []


def test_a_hostile_card_runs_nothing(page: Any, server: LiveServer) -> None:
    evil = '<script>alert("x")</script> <img src=x onerror=alert(1)> [c](javascript:alert(2)) <a href="javascript:alert(3)">a</a>'
    data = {"name": "Evil", "description": evil, "first_mes": f"Hi {evil}", "alternate_greetings": [evil], "creator_notes": evil}
    made = page.request.post("/api/v1/assets", data={"kind": "card", "data": data})
    assert made.ok, made.text()
    card = made.json()["id"]
    page.goto(f"/library/asset/{card}")
    page.goto(f"/new/opening?card={card}")
    page.click("text=Start the story")
    page.wait_for_selector("#chat[data-ready]")
    assert "<script>" in page.inner_text("#messages")  # visible as text
    page.wait_for_timeout(300)
    assert page.problems == []
    assert (
        page.evaluate("() => document.querySelectorAll('#messages script, #messages [onerror], #messages a[href^=javascript]').length") == 0
    )
    # And were one to get in, the CSP would refuse to run it: an inline script added to the page does nothing.
    blocked = page.evaluate(
        """() => new Promise((resolve) => {
            document.addEventListener("securitypolicyviolation", (e) => resolve(e.violatedDirective), { once: true });
            const s = document.createElement("script");
            s.textContent = "window.__pwned = 1";
            document.body.append(s);
            setTimeout(() => resolve(window.__pwned === 1 ? "ran" : "silent"), 500);
        })"""
    )
    assert blocked.startswith("script-src")


def test_keyboard_only_setup_send_regenerate(page: Any, tmp_path: Path) -> None:
    path = tmp_path / SAMPLE_CARD
    path.write_bytes(sample_card_bytes())
    import_card(page, path)
    page.goto("/new")
    page.focus("input[name=card]:checked")
    page.keyboard.press("Enter")  # submits step 1
    page.wait_for_url("**/new/opening**")
    page.focus("input[name=opening]:checked")
    page.keyboard.press("Enter")  # submits step 2
    page.wait_for_selector("#chat[data-ready]")
    page.focus("#draft")
    page.keyboard.type("I wave.")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'"
                           " && document.querySelectorAll('#messages article:not(.pending)').length === 3")  # fmt: skip
    page.focus("#draft")
    page.keyboard.press("ArrowUp")  # edits my last message
    assert page.evaluate("() => document.activeElement.closest('.edit-box') !== null")
    page.keyboard.press("Escape")  # cancels, focus back on the message's Edit
    page.wait_for_function("() => document.querySelectorAll('#messages article:not(.pending):not(.streaming)').length === 3"
                           " && document.querySelector('#chat').dataset.busy === 'false'")  # fmt: skip
    for _ in range(40):  # Tab through the controls to the last reply's Regenerate
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.dataset.action") == "regenerate":
            break
    else:
        raise AssertionError("Regenerate is not reachable with Tab")
    page.keyboard.press("Enter")
    page.wait_for_selector(".swipe-count:text('2/2')")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
    # Continue: the Writer goes on with the last reply.
    before = page.inner_text("#messages")
    page.click("[data-action=continue]")
    page.wait_for_function(
        "b => document.querySelector('#chat').dataset.busy === 'false' && document.getElementById('messages').innerText !== b", arg=before
    )
    assert page.problems == []


def test_a_fresh_install_starts_the_sample_story_from_the_start_page(page: Any) -> None:
    page.goto("/")
    shoot(page, "stories-empty")
    page.click("text=Start the sample story")
    page.wait_for_selector("#chat[data-ready]")
    assert page.locator("#messages article").count() == 1
    send(page, "I knock on the door.")
    # The state view: this turn's changes (before, after, why) beside the current state.
    page.click("#state-details summary")
    assert page.locator("#state-panel .state-current").inner_text().strip()
    assert page.locator("#state-panel .state-changes tbody tr").count() >= 1
    shoot(page, "chat-state")
    assert page.problems == []


def test_editors_save_cards_presets_and_lorebooks_by_revision(page: Any) -> None:
    assert page.request.post("/api/v1/sessions", data={"sample": True}).ok
    assets = page.request.get("/api/v1/assets").json()
    card = next(a["id"] for a in assets if a["kind"] == "card")
    preset = next(a["id"] for a in assets if a["kind"] == "preset")
    book = next(a["id"] for a in assets if a["kind"] == "lorebook")

    # Card: a field and a new alternate greeting.
    page.goto(f"/library/asset/{card}")
    page.click("text=Edit")
    page.fill("[data-key=description]", "A keeper of the *lighthouse*.")
    page.click("text=Add a greeting")
    page.keyboard.type("The fog lifts for a moment.")
    shoot(page, "editor-card")
    page.click("#editor button[type=submit]")
    page.wait_for_url(f"**/library/asset/{card}")
    assert "A keeper of the lighthouse." in page.inner_text(".asset-detail")
    assert "The fog lifts for a moment." in page.inner_text(".asset-detail")
    stored = page.request.get(f"/api/v1/assets/{card}").json()
    assert stored["revision"] == 2 and stored["data"]["alternate_greetings"][-1] == "The fog lifts for a moment."
    assert stored["data"]["extensions"] is not None  # fields the editor does not show are kept

    # Preset: the second field moved up by keyboard, a sampler set.
    before = [f["id"] for f in page.request.get(f"/api/v1/assets/{preset}").json()["data"]["fields"]]
    page.goto(f"/library/asset/{preset}/edit")
    page.focus("[data-list=fields] .row >> nth=1 >> [data-move=up]")
    page.keyboard.press("Enter")
    page.fill("[data-sampler=temperature]", "0.7")
    shoot(page, "editor-preset")
    page.click("#editor button[type=submit]")
    page.wait_for_url(f"**/library/asset/{preset}")
    data = page.request.get(f"/api/v1/assets/{preset}").json()["data"]
    assert [f["id"] for f in data["fields"]] == [before[1], before[0], *before[2:]]
    assert data["sampling"]["temperature"] == 0.7

    # Lorebook: a new entry, saved once, then the activation test says why it fires.
    page.goto(f"/library/asset/{book}/edit")
    count = page.locator("[data-list=entries] .rows > .row").count()
    page.click("text=Add an entry")
    row = page.locator("[data-list=entries] .rows > .row >> nth=-1")
    row.locator("[data-f=comment]").fill("The bell")
    row.locator("[data-f=keys]").fill("bellwether")
    row.locator("[data-f=content]").fill("A bell rings under the sea.")
    page.click("#editor button[type=submit]")
    page.wait_for_url(f"**/library/asset/{book}")
    entries = page.request.get(f"/api/v1/assets/{book}").json()["data"]["book"]["entries"]
    assert len(entries) == count + 1 and len({e["id"] for e in entries}) == count + 1
    page.goto(f"/library/asset/{book}/edit")
    page.fill("#lore-test-text", "I hear the bellwether.")
    page.click("#lore-test-run")
    page.wait_for_selector("#lore-test-result li")
    assert "The bell" in page.inner_text("#lore-test-result")
    shoot(page, "editor-lorebook")

    # The whole book is a local draft until saved: a reload offers it back, and one save keeps it.
    page.click("text=Add an entry")
    row = page.locator("[data-list=entries] .rows > .row >> nth=-1")
    row.locator("[data-f=comment]").fill("The tide")
    row.locator("[data-f=keys]").fill("tide")
    page.wait_for_timeout(600)  # the draft is kept after a short pause
    page.reload()
    page.wait_for_selector("#draft-banner:not([hidden])")
    page.click("#draft-restore button[type=submit]")
    page.wait_for_selector("[data-list=entries] [data-f=comment][value='The tide']")
    page.click("#editor button[type=submit]")
    page.wait_for_url(f"**/library/asset/{book}")
    entries = page.request.get(f"/api/v1/assets/{book}").json()["data"]["book"]["entries"]
    assert entries[-1]["comment"] == "The tide" and len(entries) == count + 2
    page.goto(f"/library/asset/{book}/edit")
    assert page.is_hidden("#draft-banner")  # saved: no draft left

    # A change made elsewhere meanwhile: the save is refused, nothing is overwritten.
    page.goto(f"/library/asset/{card}/edit")
    current = page.request.get(f"/api/v1/assets/{card}").json()
    other = {**current["data"], "creator": "someone else"}
    assert page.request.put(f"/api/v1/assets/{card}", data={"data": other, "revision": current["revision"]}).ok
    page.fill("[data-key=description]", "Mine.")
    page.click("#editor button[type=submit]")
    page.wait_for_selector("#editor-error:not([hidden])")
    assert "changed elsewhere" in page.inner_text("#editor-error")
    assert page.request.get(f"/api/v1/assets/{card}").json()["data"]["creator"] == "someone else"
    assert page.problems == []


def test_session_wiki_rebind_workbench_preview_and_mode_switch(page: Any) -> None:
    made = page.request.post("/api/v1/sessions", data={"sample": True}).json()
    sid = made["sessionId"]
    # A persona of its own, deleted later: the wiki then offers to select and bind another.
    persona = page.request.post(
        "/api/v1/assets", data={"kind": "persona", "data": {"name": "Wanderer", "description": "A traveller."}}
    ).json()
    current = page.request.get(f"/api/v1/sessions/{sid}/profile").json()
    assert page.request.patch(
        f"/api/v1/sessions/{sid}/profile", data={"patch": {"resources": {"persona": persona["id"]}}, "revision": current["revision"]}
    ).ok
    page.goto(f"/s/{sid}")
    page.wait_for_selector("#chat[data-ready]")
    send(page, "I look at the lamp.")

    page.click("#open-wiki")
    page.wait_for_selector("#wiki-body")
    assert "林汐" in page.inner_text("#view-card")
    page.focus("#tab-card")
    page.keyboard.press("End")  # the tabs follow the arrow keys, Home and End
    assert page.get_attribute("#tab-state", "aria-selected") == "true"
    assert page.locator("#view-state .state-changes tbody tr").count() >= 1
    shoot(page, "session-wiki-state")
    page.click("#tab-persona")
    assert "Wanderer" in page.inner_text("#view-persona")
    page.click("#close-wiki")

    assert page.request.delete(f"/api/v1/assets/{persona['id']}?force=true").ok
    page.click("#open-wiki")
    page.wait_for_selector("#wiki-body")
    page.click("#tab-persona")
    assert "Bound but missing" in page.inner_text("#view-persona")
    page.click("#view-persona form.bind button[type=submit]")
    page.wait_for_selector("#view-persona article.bound")
    assert page.request.get(f"/api/v1/sessions/{sid}/profile").json()["profile"]["resources"]["persona"] != persona["id"]
    page.click("#close-wiki")

    # Mode: Agent, then back to Chat; only while idle.
    page.click("[data-mode=agent]")
    page.wait_for_selector("[data-mode=agent][aria-pressed=true]")
    assert page.request.get(f"/api/v1/sessions/{sid}/profile").json()["profile"]["runtime"]["executionMode"] == "agent"
    page.click("[data-mode=chat]")
    page.wait_for_selector("[data-mode=chat][aria-pressed=true]")
    # The Writer route, from the header.
    page.click(".writer-route summary")
    page.fill("#writer-form [name=route]", "follow")
    page.click("#writer-form button")
    page.wait_for_selector('#writer-route:text("follows the conversation\'s route")')
    runtime = page.request.get(f"/api/v1/sessions/{sid}/profile").json()["profile"]["runtime"]
    assert runtime["writerRoute"] == {"followConversation": True}

    # Workbench: move a slot up, save, and the Writer preview follows.
    page.click("text=Prompt workbench")
    page.wait_for_selector("#slots")
    before = page.inner_text("#preview-text")
    second = page.locator("#slots .slot >> nth=1 >> .slot-name").inner_text()
    page.focus("#slots .slot >> nth=1 >> [data-move=up]")
    page.keyboard.press("Enter")
    assert page.locator("#slots .slot >> nth=0 >> .slot-name").inner_text() == second
    page.click("#save-layout")
    page.wait_for_function("b => document.getElementById('preview-text').textContent !== b", arg=before)
    after = page.inner_text("#preview-text")
    assert after != before
    shoot(page, "workbench")
    page.reload()
    assert page.locator("#slots .slot >> nth=0 >> .slot-name").inner_text() == second

    # Custom content: a slot of its own, and its text in the Writer prompt.
    page.fill("#add-custom [name=title]", "House rules")
    page.fill("#add-custom [name=text]", "Keep every scene under the lighthouse's beam.")
    page.click("#add-custom button")
    page.wait_for_selector(".custom-list >> text=House rules")
    assert page.locator("#slots .slot-name:text('House rules')").count() == 1
    assert "Keep every scene under the lighthouse's beam." in page.inner_text("#preview-text")
    assert page.problems == []


@pytest.fixture
def slow_page(browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A live server whose default model is an OpenAI-compatible fake taking 50 ms a frame."""
    from roleplay.harness.models.routes import resolve_route
    from roleplay.testing.fake_openai import serve_fake_openai

    with serve_fake_openai(flavor="openai", chunk_delay=0.05) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with start_live_server(f"sqlite:///{tmp_path / 'rp.db'}", default_route=resolve_route("openai/fake")) as live:
            context = browser.new_context(base_url=live.base, viewport={"width": 1280, "height": 900})
            pg = context.new_page()
            pg.set_default_timeout(30_000)
            problems: list[str] = []
            pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            pg.problems = problems
            try:
                yield pg
            finally:
                context.close()


def test_streaming_is_visible_before_completion_survives_a_reload_and_stop_leaves_an_interrupted_turn(slow_page: Any) -> None:
    page = slow_page
    sid = page.request.post("/api/v1/sessions", data={"sample": True}).json()["sessionId"]
    page.goto(f"/s/{sid}")
    page.wait_for_selector("#chat[data-ready]")
    page.fill("#draft", "I knock on the door.")
    page.press("#draft", "Enter")
    # Streaming: text in the live reply while the turn still runs, Stop in Send's place.
    page.wait_for_selector("#messages article.streaming .live-text:not(:empty)")
    assert page.is_visible("#stop") and not page.is_visible("#send") and page.is_visible("#writing")
    shoot(page, "chat-streaming")
    # A reload mid-reply: the page shows the running turn and picks the reply up when it is done.
    page.reload()
    page.wait_for_selector("#chat[data-ready]")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
    page.wait_for_function("() => document.querySelectorAll('#messages article:not(.streaming)').length === 3")
    assert "I knock on the door." in page.inner_text("#m2")

    # Stop: the turn ends interrupted, shown with Retry and Delete.
    page.fill("#draft", "I wait in the rain.")
    page.press("#draft", "Enter")
    page.wait_for_selector("#messages article.streaming .live-text:not(:empty)")
    page.click("#stop")
    page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
    page.wait_for_selector("#messages article [data-action=delete-turn]")
    assert page.locator("#messages [data-action=regenerate]").count() == 1  # Retry
    page.click("#messages [data-action=delete-turn]")
    page.click("#confirm button[value=ok]")
    page.wait_for_function("() => !document.querySelector('#messages [data-action=delete-turn]')")
    assert page.problems == []


def test_settings_features_values_quick_replies_and_model_test(page: Any) -> None:
    page.goto("/settings")
    shoot(page, "settings")
    # A feature off turns off what needs it; back on.
    with page.expect_navigation():  # the page reloads with the server's answer
        page.uncheck("[data-feature=rp-state]")
    assert not page.is_checked("[data-feature=rp-state]")
    assert not page.is_checked("[data-feature=rp-compat-mvu]")  # it needs rp-state
    with page.expect_navigation():
        page.check("[data-feature=rp-compat-mvu]")
    assert page.is_checked("[data-feature=rp-compat-mvu]")
    assert page.is_checked("[data-feature=rp-state]")  # and what it needs comes back

    # A setting changed is marked, and Reset brings the default back.
    form = page.locator("form.setting[data-key='replyOptions.count']")
    form.locator("input").fill("2")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("form.setting[data-key='replyOptions.count'] .badge")
    assert page.request.get("/api/v1/settings/replyOptions.count").json()["value"] == 2
    page.click("form.setting[data-key='replyOptions.count'] [data-reset]")
    page.wait_for_selector("form.setting[data-key='replyOptions.count']:not(:has(.badge))")

    # Sub-agents: one turned off, a new one added.
    page.wait_for_selector(".subagent")
    first = page.request.get("/api/v1/subagents").json()["items"][0]["name"]
    with page.expect_navigation():
        page.locator(".subagent >> nth=0 >> input[type=checkbox]").uncheck()
    item = page.request.get("/api/v1/subagents").json()["items"][0]
    assert item["name"] == first and item["enabled"] is False
    page.click("#subagents summary >> text=Add a sub-agent")
    page.fill("#add-subagent [name=name]", "Continuity")
    page.fill("#add-subagent [name=usageContract]", "Call it when a name or place comes back.")
    page.fill("#add-subagent [name=instructions]", "Check names and places against the story so far.")
    with page.expect_navigation():
        page.click("#add-subagent button")
    page.wait_for_selector(".subagent strong:text('Continuity')")

    # A quick reply, inserted into the draft at the cursor from the chat.
    page.fill("#add-quick [name=label]", "Nod")
    page.fill("#add-quick [name=text]", "*nods slowly*")
    page.click("#add-quick button")
    page.wait_for_selector(".quick-list >> text=Nod")
    sid = page.request.post("/api/v1/sessions", data={"sample": True}).json()["sessionId"]
    page.goto(f"/s/{sid}")
    page.wait_for_selector("#chat[data-ready]")
    page.fill("#draft", "I agree. ")
    page.click(".quick-reply >> text=Nod")
    assert page.input_value("#draft") == "I agree. *nods slowly*"
    assert page.locator("#messages article").count() == 1  # inserting never sends

    # The model test answers on the demo.
    page.goto("/settings")
    page.fill("#model-test [name=model]", "demo")
    page.click("#model-test button")
    page.wait_for_selector("#model-result:has-text('answered')")
    assert page.problems == []


def test_setup_with_styles_in_order_and_no_opening_shows_the_guide_until_the_first_message(page: Any) -> None:
    assert page.request.post("/api/v1/sessions", data={"sample": True}).ok  # the sample card in the library
    style = page.request.post(
        "/api/v1/assets", data={"kind": "writing-style", "data": {"name": "Terse", "applicability": "short", "requirements": "- Be brief."}}
    ).json()
    page.goto("/new")
    page.check(f"input[name=style][value={style['id']}]")
    page.locator(".style-row", has=page.locator(f"input[value={style['id']}]")).locator("[data-move=up]").click()
    page.click("text=Next: the opening")
    page.check("input[name=opening][value=skip]")
    page.click("text=Start the story")
    page.wait_for_selector("#chat[data-ready]")
    assert page.is_visible(".guide") and page.locator("#messages article").count() == 0
    sid = page.url.rsplit("/", 1)[-1]
    styles = page.request.get(f"/api/v1/sessions/{sid}/profile").json()["profile"]["resources"]["writingStyles"]
    assert styles[0] == style["id"] and len(styles) == 2
    send(page, "I arrive at the harbour.")
    assert not page.locator(".guide").count()
    assert page.problems == []


def test_setup_leaves_every_kind_out_and_the_story_still_plays(page: Any) -> None:
    assert page.request.post("/api/v1/sessions", data={"sample": True}).ok  # a card and defaults in the library
    page.goto("/new")
    page.check("input[name=card][value=none]")
    page.select_option("select[name=persona]", "none")
    page.select_option("select[name=preset]", "none")
    page.check("input[name=no_lorebooks]")
    page.check("input[name=no_styles]")
    page.click("text=Next: the opening")
    assert "Without a character card" in page.inner_text("main")
    page.check("input[name=opening][value=skip]")
    page.click("text=Start the story")
    page.wait_for_selector("#chat[data-ready]")
    sid = page.url.rsplit("/", 1)[-1]
    resources = page.request.get(f"/api/v1/sessions/{sid}/profile").json()["profile"]["resources"]
    assert {k: resources[k] for k in ("card", "persona", "preset", "lorebooks", "writingStyles")} == {
        "card": None, "persona": None, "preset": None, "lorebooks": [], "writingStyles": []
    }  # fmt: skip
    send(page, "I arrive at the harbour.")
    assert page.locator("#messages article").count() >= 2
    assert page.problems == []


def test_importing_several_files_reports_each_and_a_card_exports_as_png(page: Any, tmp_path: Path, corpus: Path | None) -> None:
    files = [card_file(tmp_path, corpus)]
    if corpus is not None:
        files += [corpus / "lorebooks" / "Eorzea.json", corpus / "presets" / "Default.json"]
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "half a card", ')
    files.append(broken)
    page.goto("/library")
    page.set_input_files("#import-files", [str(f) for f in files])
    page.wait_for_selector("#import-report[data-done]")
    report = page.locator("#import-results > li")
    assert report.count() == len(files)  # one line per file; a broken one does not stop the others
    assert "broken.json: not imported" in page.inner_text("#import-results")
    if corpus is not None:
        text = page.inner_text("#import-results")
        assert "imported as lorebook" in text and "imported as preset" in text and "carried over" in text
    shoot(page, "import-report")
    if corpus is not None:  # a card with its own system prompt: kept isolated until trusted, here
        page.set_input_files("#import-files", str(corpus / "cards" / "test_character.charx"))
        page.wait_for_selector("#import-results >> text=Trust these prompts")
        assert "stay out of the prompt until you trust them" in page.inner_text("#import-results")
        page.click("#import-results >> text=Trust these prompts")
        page.wait_for_selector("#import-results >> text=Trusted.")  # shown once the server has it
    page.goto("/library/card")
    page.fill("#library-search", "no such name")
    assert page.locator("#asset-list .asset-item:visible").count() == 0
    page.fill("#library-search", "")
    page.locator(".asset-item a >> nth=0").click()
    with page.expect_download() as download:
        page.click("text=Export PNG")
    path = download.value.path()
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert page.problems == []


def test_with_a_token_a_page_sends_you_to_the_login_and_back_to_it(browser: Any, tmp_path: Path) -> None:
    with start_live_server(f"sqlite:///{tmp_path / 'rp.db'}", token="tok-browser") as live:
        context = browser.new_context(base_url=live.base, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            page.goto("/library/card")
            page.wait_for_url("**/login?next=%2Flibrary%2Fcard")
            page.fill("input[name=token]", "wrong")
            page.click("text=Log in")
            page.wait_for_url("**/login?error=true&next=%2Flibrary%2Fcard")
            assert "not right" in page.inner_text("body")
            page.fill("input[name=token]", "tok-browser")
            page.click("text=Log in")
            page.wait_for_url(f"{live.base}/library/card")
            assert page.locator("h1").count() >= 1 and "auth_required" not in page.content()
            page.goto("/")  # the cookie now opens every page
            assert page.url == f"{live.base}/" and "auth_required" not in page.content()
        finally:
            context.close()


def test_a_story_whose_turn_runs_in_another_process_shows_it_and_the_reply_when_it_ends(browser: Any, tmp_path: Path) -> None:
    import time

    from web.web_support import turn_in_another_process

    with start_live_server(f"sqlite:///{tmp_path / 'roleplay.db'}") as live:
        context = browser.new_context(base_url=live.base, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(60_000)
        try:
            sid = page.request.post("/api/v1/sessions", data={"sample": True}).json()["sessionId"]
            with turn_in_another_process(tmp_path, sid, "I knock on the iron door.", chunk_delay=0.15) as proc:
                deadline = time.monotonic() + 60
                while not (m := page.request.get(f"/api/v1/sessions/{sid}/messages").json())["activeTurnId"]:
                    assert proc.poll() is None and time.monotonic() < deadline, "the run never showed as active"
                    time.sleep(0.05)
                page.goto(f"/s/{sid}")
                page.wait_for_selector("#chat[data-ready]")
                assert page.is_visible("#writing-elsewhere") and not page.is_visible("#stop") and not page.is_visible("#send")
                assert page.locator("#messages article[data-active=true]").count() == 1
                assert "a run is writing this turn" in page.inner_text("#messages article[data-active=true]")
                shoot(page, "chat-running-elsewhere")
                # the other process finishes: the page notices, paints the reply and is ready again
                page.wait_for_function("() => document.querySelector('#chat').dataset.busy === 'false'")
            page.wait_for_function("() => document.querySelectorAll('#messages article').length === 3")
            assert not page.is_visible("#writing-elsewhere") and page.is_visible("#send")
            assert page.locator("#messages article[data-active=true]").count() == 0
            assert m["running"] is True
        finally:
            context.close()


def test_settings_store_a_model_key_write_only(page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from roleplay.harness.models.routes import use_key_file
    from roleplay.harness.models.secrets import KeyFile

    secret = "sk-typed-into-the-page-0123456789"
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    use_key_file(KeyFile(tmp_path / "home"))
    try:
        page.goto("/settings#models")
        row = page.locator("tr[data-provider=deepseek]")
        assert "not set" in row.inner_text()
        page.select_option("#model-key [name=provider]", "deepseek")
        page.fill("#model-key [name=key]", secret)
        with page.expect_navigation():
            page.click("#model-key button[type=submit]")
        assert "stored on the server" in page.locator("tr[data-provider=deepseek]").inner_text()
        assert secret not in page.content() and page.input_value("#model-key [name=key]") == ""
        assert (tmp_path / "home" / "secrets.json").exists()
        with page.expect_navigation():
            page.click("#model-key-forget")
        assert "not set" in page.locator("tr[data-provider=deepseek]").inner_text()
        assert page.problems == []
    finally:
        use_key_file(None)
