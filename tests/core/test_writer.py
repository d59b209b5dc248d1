"""``rp_write_turn``: the Writer's prompt stays exactly recoverable, and costs storage in
proportion to what each turn adds (issue 12)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from roleplay.core.run import play_turn
from roleplay.core.writer import WRITER_RESULT_KIND
from roleplay.harness.events import message_text
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore, open_store
from tests.tests_support import sample_story

pytestmark = pytest.mark.anyio
DEMO = Route("demo", "demo")
TURNS = 30


class Recording:
    """The demo model, keeping every request it was sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stream(self, request: Any) -> Any:
        self.requests.append(request)
        return self.inner.stream(request)


def prompt_cost(dump: list[tuple[Any, ...]], children: set[str]) -> int:
    """Stored bytes of the Writer children's prompt rows plus the parts they reference."""
    cost, used = 0, set()
    for row in dump:
        if row[0] == "event" and row[1] in children and row[3] == "user/message":
            texts = row[6] if len(row) == 8 else None  # ('event', session, seq, type, v, payload, texts, created)
            cost += len(str(row[5]).encode("utf-8")) + len(texts or "")
            used |= {i for entry in json.loads(texts or "[]") for i in entry[2]}
    return cost + sum(len(row[4]) for row in dump if row[0] == "text_part" and row[1] in used)


async def test_the_first_writer_prompt_of_a_long_story_is_recovered_exactly(store: EventStore, store_url: str) -> None:
    rt, sid = await sample_story(store)
    model = Recording(rt.model_for(DEMO))
    rt.models[DEMO.spec] = model
    for turn in range(TURNS):
        result = await play_turn(rt, sid, f"我沿着第{turn}号码头走去，问起晨星号。", parent_route=DEMO)
        assert result.turn.outcome == "completed", result.turn.error
    sent = [r for r in model.requests if not r.tools]  # the Writer has no tools
    assert len(sent) == TURNS
    first_prompt = sent[0].messages[-1].content
    assert isinstance(first_prompt, str) and len(first_prompt) > 1000

    results = [
        e
        for e in await rt.service.events(sid)
        if e.type == "tool/result" and (e.payload.get("meta") or {}).get("kind") == WRITER_RESULT_KIND
    ]
    assert len(results) == TURNS
    first = results[0].payload["meta"]
    # A store opened afresh (no cache of this process) reads it back from the parts.
    fresh = open_store(store_url)
    try:
        [prompt_event] = [e for e in await fresh.read(first["childSessionId"]) if e.type == "user/message"]
        recovered = message_text(prompt_event.payload)
        assert recovered == first_prompt
        assert hashlib.sha256(recovered.encode("utf-8")).hexdigest() == first["promptHash"]

        children = {r.payload["meta"]["childSessionId"] for r in results}
        verbatim = 0
        for child in children:
            verbatim += sum(len(message_text(e.payload).encode("utf-8")) for e in await fresh.read(child) if e.type == "user/message")
        cost = prompt_cost(await fresh.dump(), children)
    finally:
        await fresh.close()
    # Verbatim, each turn stores the whole story again; as parts, about what the turn added.
    assert cost < verbatim / 3, (cost, verbatim)


# -- the live reply stream -----------------------------------------------------------------------


async def reply_stream(store: EventStore, sid: str, play: Any) -> tuple[Any, list[dict[str, Any]]]:
    """Play a turn while collecting the session's ``assistant/chunk`` notifications."""
    async with store.subscribe(sid) as sub:
        result = await play()
        chunks: list[dict[str, Any]] = []
        while True:
            try:
                note = await sub.next(timeout=0.2)
            except TimeoutError:
                break
            if note.kind == "chunk":
                chunks.append(note.data)  # type: ignore[arg-type]
    return result, chunks


async def test_a_refused_draft_that_streamed_is_reset_and_the_retry_streams_once_with_macros_expanded(store: EventStore) -> None:
    from tests.core.test_run_recovery import SCRIPTED, director
    from tests.core.test_run_recovery import sample_story as scripted_story

    rt, sid, model = await scripted_story(store)
    refusal = "I can't continue this story."
    model._responder = director([{"text": refusal, "finish_reason": "content_filter"}, "  {{user}} 走近。 {{char}} 抬起灯， 雾散了。\n"])  # type: ignore[attr-defined]
    result, chunks = await reply_stream(store, sid, lambda: play_turn(rt, sid, "我问起钟声。", parent_route=SCRIPTED))
    assert result.committed and result.reply == "User 走近。 林汐 抬起灯， 雾散了。"
    assert all(c["type"] == "assistant/chunk" and c["turnId"] == result.turn.turn_id for c in chunks)
    reset = next(i for i, c in enumerate(chunks) if c.get("reset"))
    first, second = chunks[:reset], chunks[reset + 1 :]
    # The refused attempt streamed live, was discarded, and the retry streamed exactly the reply:
    # macros expanded as it arrived, without the draft's outer whitespace.
    assert "".join(c["text"] for c in first) == refusal and {c["attempt"] for c in first} == {1}
    assert chunks[reset] == {"type": "assistant/chunk", "turnId": result.turn.turn_id, "attempt": 1, "reset": True, "text": ""}
    assert "".join(c["text"] for c in second) == result.reply and {c["attempt"] for c in second} == {2}
    assert len(second) > 1 and not any(c.get("reset") for c in second)


class NoDeltas:
    """A model that delivers its answer only in the final event (no live text)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: Any) -> Any:
        from roleplay.harness.models.types import TextDelta

        async for event in self.inner.stream(request):
            if not isinstance(event, TextDelta):
                yield event


async def test_a_writer_without_live_deltas_still_delivers_its_draft_once(store: EventStore) -> None:
    rt, sid = await sample_story(store)
    rt.models[DEMO.spec] = NoDeltas(rt.model_for(DEMO))
    result, chunks = await reply_stream(store, sid, lambda: play_turn(rt, sid, "我敲门。", parent_route=DEMO))
    assert result.committed and not any(c.get("reset") for c in chunks)
    assert "".join(c["text"] for c in chunks) == result.reply
