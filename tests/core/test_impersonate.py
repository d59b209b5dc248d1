"""Impersonate: a draft of the player's next message, in their persona, never sent by itself."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.demo import DEMO_DRAFT
from roleplay.core.impersonate import IMPERSONATE_PRESET, clean_draft, impersonate
from roleplay.core.player_prompts import IMPERSONATE_MARK
from roleplay.core.run import play_turn
from roleplay.errors import RpError
from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.routes import Route
from roleplay.harness.models.types import ModelRequest, StreamEvent
from roleplay.harness.store import EventStore
from roleplay.testing.fake_openai import serve_fake_openai
from tests_support import sample_story

DEMO = Route("demo", "demo")


class Recording:
    """The demo model, remembering every request it was sent."""

    def __init__(self, model: DemoModel) -> None:
        self.requests: list[ModelRequest]
        self.inner, self.requests = model, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async for event in self.inner.stream(request):
            yield event


CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


@pytest.mark.anyio
async def test_a_draft_in_the_persona_from_the_writers_material_and_nothing_in_the_story(store: EventStore) -> None:
    model = Recording(DemoModel())
    rt, sid = await sample_story(store, model)
    await play_turn(rt, sid, "我敲了敲铁门。", parent_route=DEMO)
    head = await store.head(sid)

    drafted = await impersonate(rt, sid, parent_route=DEMO)
    assert drafted.draft.endswith(DEMO_DRAFT) and drafted.route == "demo/demo"
    assert await store.head(sid) == head  # nothing was played or written to the story

    child = await rt.service.get(drafted.child_session_id)
    assert child.parent_id == sid and child.preset == IMPERSONATE_PRESET
    request = model.requests[-1]
    system, prompt = request.messages[0].text(), request.messages[-1].text()
    assert IMPERSONATE_MARK in system and not request.tools
    assert "{{user}}" not in system and "{{char}}" not in system and "林汐" in system  # the names are the story's
    # The Writer's own material: the card, the conversation so far, and the instruction as input.
    assert "我敲了敲铁门。" in prompt and "Draft the user's next message" in prompt
    await rt.aclose()


@pytest.mark.anyio
async def test_an_archived_story_is_refused(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    await rt.service.archive(sid)
    with pytest.raises(RpError) as refused:
        await impersonate(rt, sid, parent_route=DEMO)
    assert refused.value.code == "run.session_archived"
    await rt.aclose()


def test_clean_draft_drops_the_name_a_chat_log_puts_first() -> None:
    assert clean_draft("  Alex: I open the door. ", "Alex") == "I open the door."
    assert clean_draft("**Alex**：我推开门。", "Alex") == "我推开门。"
    assert clean_draft("Alexander waits.", "Alex") == "Alexander waits."
    assert clean_draft("I wait.", None) == "I wait."


def invoke(home: Path, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env={**CLEAN, **(env or {})}, obj=CliState())


def test_rp_impersonate_prints_a_draft_and_sends_nothing(tmp_path: Path) -> None:
    sid = json.loads(invoke(tmp_path, "new", "--sample", "--model", "demo", "--json").stdout)["sessionId"]
    before = json.loads(invoke(tmp_path, "sessions", "events", sid, "--json").stdout)
    plain = invoke(tmp_path, "impersonate", sid)
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.strip().endswith(DEMO_DRAFT) and "not sent" in plain.stderr
    as_json = json.loads(invoke(tmp_path, "impersonate", sid, "--json").stdout)
    assert as_json["sessionId"] == sid and as_json["draft"].endswith(DEMO_DRAFT) and as_json["childSessionId"]
    assert json.loads(invoke(tmp_path, "sessions", "events", sid, "--json").stdout) == before  # the story is as it was
    missing = invoke(tmp_path, "impersonate", "ses_nope", "--json")
    assert missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] == "session.not_found"


def test_the_fake_server_drafts_and_continues_offline(tmp_path: Path) -> None:
    """The README's offline "real provider path": both helpers through an OpenAI-compatible server."""
    with serve_fake_openai() as fake:
        env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "x"}
        sid = json.loads(invoke(tmp_path, "new", "--sample", "--model", "openai/fake", "--json", env=env).stdout)["sessionId"]
        said = invoke(tmp_path, "say", sid, "I knock.", "--json", env=env)
        assert json.loads(said.stdout)["committed"], said.output
        drafted = json.loads(invoke(tmp_path, "impersonate", sid, "--json", env=env).stdout)
        assert drafted["draft"].startswith("I wait by the door") and drafted["route"] == "openai/fake"
        cont = invoke(tmp_path, "continue", sid, "--json", env=env)
        assert cont.exit_code == 0, cont.output
        out = json.loads(cont.stdout)
        assert out["committed"] and out["reply"].startswith("The lamp turns once more")
        assert out["extendedReply"]["text"].endswith(out["reply"]) and "I knock." in out["extendedReply"]["text"]
    assert os.environ.get("OPENAI_BASE_URL") != fake.base_url  # the test did not leak its environment
