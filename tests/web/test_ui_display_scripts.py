"""Card display scripts (SillyTavern ``regex_scripts``) change what the chat shows, never the log
(roleplay.web.ui.display_scripts)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from roleplay.web.ui.display_scripts import display_scripts
from web.web_support import new_story

pytestmark = pytest.mark.anyio

STATUS = {
    "scriptName": "status panel",
    "findRegex": "/<status>([\\s\\S]*?)<\\/status>/g",
    "replaceString": '<div class="panel" onclick="alert(1)">Status: $1 ({{match}})</div>',
    "trimStrings": ["<status>"],
    "placement": [2],
    "markdownOnly": True,
}


def card(*scripts: dict[str, Any], first: str = "Hello. <status>HP 10</status>") -> dict[str, Any]:
    return {"name": "Scripted", "description": "d", "first_mes": first, "extensions": {"regex_scripts": list(scripts)}}


def test_replacement_follows_javascript_and_sillytavern() -> None:
    scripts = display_scripts(card(STATUS, {"scriptName": "dollars", "findRegex": "/(\\w+)@(?<host>\\w+)/", "replaceString": "$2 $<host> $$ $&",
                                             "placement": [1, 2]}))  # fmt: skip
    out = scripts.apply("a <status>HP 1</status> b <status>MP 2</status> me@home", "assistant", 0)
    assert out == (
        'a <div class="panel" onclick="alert(1)">Status: HP 1 (HP 1</status>)</div> b '
        '<div class="panel" onclick="alert(1)">Status: MP 2 (MP 2</status>)</div> home home $ me@home'
    )


def test_which_scripts_apply() -> None:
    prompt_only = {**STATUS, "scriptName": "prompt", "promptOnly": True, "markdownOnly": False, "replaceString": "PROMPT"}
    user_only = {**STATUS, "scriptName": "user", "placement": [1], "replaceString": "USER"}
    disabled = {**STATUS, "scriptName": "off", "disabled": True, "replaceString": "OFF"}
    deep = {**STATUS, "scriptName": "deep", "minDepth": 2, "replaceString": "DEEP"}
    scripts = display_scripts(card(prompt_only, user_only, disabled, deep))
    text = "<status>x</status>"
    assert scripts.apply(text, "assistant", 0) == text  # none of them shows on the newest reply
    assert scripts.apply(text, "user", 0) == "USER"
    assert scripts.apply(text, "assistant", 3) == "DEEP"


def test_a_runaway_or_broken_script_is_skipped_and_said_so() -> None:
    runaway = {"scriptName": "runaway", "findRegex": "/(a|aa)+$/", "replaceString": "X", "placement": [2]}
    broken = {"scriptName": "broken", "findRegex": "not a regex", "replaceString": "X", "placement": [2]}
    scripts = display_scripts(card(runaway, broken))
    text = "a" * 60 + "b"
    assert scripts.apply(text, "assistant", 0) == text
    assert any("runaway" in s and "not applied" in s for s in scripts.skipped)
    assert any("broken" in s for s in scripts.skipped)


async def test_the_chat_shows_the_scripted_text_sanitised_and_the_log_keeps_the_original(api: tuple[httpx.AsyncClient, Any]) -> None:
    client, _ = api
    made = await client.post("/api/v1/assets", json={"kind": "card", "data": card(STATUS)})
    assert made.status_code == 201, made.text
    sid = await new_story(client, card=made.json()["id"], sample=False)
    html = (await client.get(f"/s/{sid}")).text
    assert "<div>Status: HP 10 (HP 10)</div>" in html  # the script's HTML, without its attributes or unknown tags
    assert "onclick" not in html and "&lt;status&gt;HP 10" in html  # the raw text stays for copy and edit
    messages = (await client.get(f"/api/v1/sessions/{sid}/messages")).json()["messages"]
    assert messages[0]["text"] == "Hello. <status>HP 10</status>"
