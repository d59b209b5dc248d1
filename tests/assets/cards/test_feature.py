"""The card feature's regex scripts on the Writer prompt (roleplay.assets.cards.feature): the
conversation the prompt reads is rewritten, the log and the page keep the words as written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests_support import core_runtime

from roleplay.assets.seeds import ensure_seeds
from roleplay.assets.service import AssetService
from roleplay.core.run import play_turn, prepare_run
from roleplay.core.session_create import StoryRequest, create_story
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore

pytestmark = pytest.mark.anyio

DEMO = Route("demo", "demo")
STATUS = "<status>HP 10</status>"


def scripted_card(*scripts: dict[str, Any]) -> bytes:
    data = {
        "name": "Scripted",
        "description": "d",
        "first_mes": f"The door opens. {STATUS}",
        "extensions": {"regex_scripts": list(scripts)},
    }
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}).encode()


async def test_prompt_scripts_rewrite_the_conversation_the_writer_reads_never_the_log(store: EventStore) -> None:
    strip_old = {"scriptName": "strip old status", "findRegex": "/<status>[\\s\\S]*?<\\/status>/g", "replaceString": "",
                 "placement": [2], "promptOnly": True, "minDepth": 2}  # fmt: skip
    shout = {"scriptName": "shout", "findRegex": "/knock/gi", "replaceString": "KNOCK", "placement": [1]}  # neither flag: both views
    panel = {"scriptName": "panel", "findRegex": "/HP (\\d+)/", "replaceString": "Health $1", "placement": [2], "markdownOnly": True}
    runaway = {"scriptName": "runaway", "findRegex": "/(a|aa)+$/", "replaceString": "X", "placement": [1], "promptOnly": True}
    rt = core_runtime(store)
    await ensure_seeds(rt.assets)
    card = (await AssetService(store).import_file(scripted_card(strip_old, shout, panel, runaway), "scripted.json")).asset_id
    record, _ = await create_story(rt, StoryRequest(card=card))
    first = await prepare_run(rt, record.id, "I knock.", parent_route=DEMO)
    prompt = first.build.writer_prompt
    assert STATUS in prompt and "Health" not in prompt  # the opening is depth 1: too new to strip; display-only stays out
    assert "I KNOCK." in prompt and "I knock." not in prompt  # the current input (depth 0) too
    await play_turn(rt, record.id, "I knock again.", parent_route=DEMO)
    later = (await prepare_run(rt, record.id, "a" * 60 + "b", parent_route=DEMO)).build
    assert STATUS not in later.writer_prompt and "I KNOCK again." in later.writer_prompt  # now depth ≥ 2: stripped
    assert any(d.code == "card.regex_script_skipped" and "runaway" in d.message for d in later.diagnostics)
    messages = [e.payload for e in await rt.service.events(record.id) if e.type in ("user/message", "assistant/message")]
    said = json.dumps(messages[:2], ensure_ascii=False)  # the opening and the player's message, as written
    assert STATUS in said and "I knock again." in said and "KNOCK" not in said
