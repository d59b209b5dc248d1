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
