"""Continue: the Writer extends the last reply as one committed turn, read as one message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.conversation import story_nodes
from roleplay.core.continue_turn import continue_turn, extended_reply, reply_to_continue, visible_entries
from roleplay.core.demo import DEMO_CONTINUED
from roleplay.core.message_actions import undo_last_turn
from roleplay.core.player_prompts import CONTINUE_INPUT, CONTINUE_SOURCE
from roleplay.core.replies import replies_projection
from roleplay.core.run import opening_message_id, play_turn, prepare_run
from roleplay.core.runtime import RoleplayRuntime
from roleplay.errors import RpError
from roleplay.harness.models.routes import Route
from roleplay.harness.projections import load
from roleplay.harness.store import EventStore
from roleplay.harness.surface import SURFACE
from roleplay.state.events import state_document
from tests_support import sample_story

pytestmark = pytest.mark.anyio

DEMO = Route("demo", "demo")
CLEAN = {"DEEPSEEK_API_KEY": "", "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "RP_MODEL": "", "RP_DATABASE_URL": ""}


async def trust(rt: RoleplayRuntime, sid: str) -> Any:
    doc = state_document((await rt.service.projection(sid, "rp/state")).state)
    return doc["namespaces"]["story"]["value"]["林汐"]["信任"]


async def test_continue_extends_the_last_reply_as_one_committed_turn(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    first = await play_turn(rt, sid, "我敲了敲铁门。", parent_route=DEMO)
    assert first.committed
    reply = (await visible_entries(rt, sid))[-1]
    before = await trust(rt, sid)

    result = await continue_turn(rt, sid, parent_route=DEMO)
    assert result.committed and result.turn.outcome == "completed"
    assert result.reply.endswith(DEMO_CONTINUED) and "我敲了敲铁门" not in result.reply  # only the next words
    assert await trust(rt, sid) == before + 1  # the continuation's effects commit normally

    # The Writer saw the reply to extend as the last writing reply and the instruction as the input.
    prompt = result.prepared.build.writer_prompt
    assert prompt.rindex(reply.text) < prompt.rindex(CONTINUE_INPUT)

    entries = await visible_entries(rt, sid)
    assert [e.speaker for e in entries[-2:]] == ["user", "writing"]  # no message for the instruction
    assert entries[-1].message_id == reply.message_id
    assert entries[-1].text == f"{reply.text}\n\n{result.reply}"  # one message, a new paragraph
    assert (await extended_reply(rt, sid)) == entries[-1]

    # The input is logged with its marker; the next turn's Writer and parent read one reply.
    events = await store.read(sid)
    marked = [e for e in events if e.type == "user/message" and (e.payload.get("source") or {}).get(CONTINUE_SOURCE)]
    assert len(marked) == 1 and marked[0].payload["source"][CONTINUE_SOURCE] == {"v": 1, "target": reply.message_id}
    nxt = await prepare_run(rt, sid, "我走进去。", parent_route=DEMO)
    assert nxt.build.writer_prompt.count("[Writing reply]\n") == 2  # the opening and the extended reply
    assert entries[-1].text in nxt.build.writer_prompt and CONTINUE_INPUT not in nxt.build.writer_prompt
    nodes = (await rt.service.projection(sid, SURFACE)).state["nodes"]
    writing = (await rt.service.projection(sid, replies_projection)).state["writing"]
    story = story_nodes(nodes, writing_ids=writing, opening_id=opening_message_id(nodes))
    assert [n["role"] for n in story] == ["assistant", "user", "assistant"]
    assert story[-1]["content"][0]["text"] == entries[-1].text

    # Undo takes the continuation back: the reply and the state read as before it.
    await undo_last_turn(rt, sid)
    assert (await visible_entries(rt, sid))[-1] == reply
    assert await trust(rt, sid) == before
    rebuilt = await load(store, sid, rt.service.projections.get("rp/state"), use_snapshot=False, snapshot_every=None)
    assert state_document(rebuilt.state) == state_document((await rt.service.projection(sid, "rp/state")).state)
    await rt.aclose()


async def test_continuing_twice_and_continuing_the_opening(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    opening = (await visible_entries(rt, sid))[-1]
    await continue_turn(rt, sid, parent_route=DEMO)
    await continue_turn(rt, sid, parent_route=DEMO)
    entries = await visible_entries(rt, sid)
    assert len(entries) == 1 and entries[0].message_id == opening.message_id
    assert entries[0].text.startswith(opening.text) and entries[0].text.count(DEMO_CONTINUED) == 2
    await rt.aclose()


async def test_nothing_to_continue_is_refused_and_writes_nothing(store: EventStore) -> None:
    rt, sid = await sample_story(store, opening="skip")
    head = await store.head(sid)
    with pytest.raises(RpError) as refused:
        await continue_turn(rt, sid, parent_route=DEMO)
    assert refused.value.code == "continue.nothing_to_continue" and await store.head(sid) == head
    await rt.aclose()


def test_only_a_story_reply_can_be_continued() -> None:
    from roleplay.core.conversation import Entry

    with pytest.raises(RpError, match="yours"):
        reply_to_continue([Entry("m1", "user", "hi")])
    with pytest.raises(RpError) as discussion:
        reply_to_continue([Entry("m1", "user", "hi"), Entry("m2", "non-writing", "an answer")])
    assert discussion.value.code == "continue.not_a_story_reply"
    assert reply_to_continue([Entry("m2", "writing", "story")]).message_id == "m2"


def test_rp_continue_streams_the_next_words_and_refuses_with_nothing_to_continue(tmp_path: Path) -> None:
    def rp(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", str(tmp_path), *args], env=CLEAN, obj=CliState())

    sid = json.loads(rp("new", "--sample", "--model", "demo", "--opening", "skip", "--json").stdout)["sessionId"]
    refused = rp("continue", sid, "--json")
    assert refused.exit_code == 1 and json.loads(refused.stdout)["error"]["code"] == "continue.nothing_to_continue"
    assert rp("say", sid, "I knock.").exit_code == 0
    went_on = rp("continue", sid)
    assert went_on.exit_code == 0, went_on.output
    assert went_on.stdout.strip().endswith(DEMO_CONTINUED) and "writing…" in went_on.stderr
    whole = json.loads(rp("continue", sid, "--json").stdout)["extendedReply"]["text"]
    assert whole.count(DEMO_CONTINUED) == 2 and "I knock." in whole
