"""The loop's request history fitted to the route's window (issue 12): a plain ``rp chat`` session
sends its newest whole exchanges only, the current turn always whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.harness.plain_chat import chat_spec
from roleplay.harness.history import exchange_starts, fit_history, message_tokens, reply_reserve, tools_tokens
from roleplay.harness.converted import CONVERTED
from roleplay.harness.loop import AgentLoop, AgentSpec, LoopHooks
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ChatMessage, ModelRequest
from roleplay.harness.prompts import PromptAssembly, PromptSection
from roleplay.harness.sessions import SessionService
from roleplay.harness.store import EventStore

from .test_chat import events_of, invoke

pytestmark = pytest.mark.anyio
LINE = "The lighthouse keeper counts the steps again, one hundred and eight of them, slowly. "


def request_tokens(request: ModelRequest) -> int:
    return sum(message_tokens(m) for m in request.messages) + tools_tokens(request.tools)


async def test_a_chat_session_keeps_its_request_under_the_window_with_the_newest_exchanges(store: EventStore) -> None:
    window = 2_000
    service = SessionService(store)
    sid = (await service.create("chat")).id
    model = ScriptedModel(responder=lambda request: {"text": f"reply {len(request.messages)}: " + LINE * 3})
    loop = AgentLoop(service, model, chat_spec(window))
    for n in range(40):
        result = await loop.run_turn(sid, f"message {n}: " + LINE * 3)
        assert result.outcome == "completed"
    limit = window - reply_reserve(window, None)
    assert all(request_tokens(r) <= limit for r in model.requests)
    last = model.requests[-1].messages
    users = [m.text().split(":")[0] for m in last if m.role == "user"]
    assert users[-1] == "message 39" and 1 < len(users) < 40
    assert users == [f"message {n}" for n in range(40 - len(users), 40)]  # contiguous, newest kept
    assert last[1].role == "user"  # whole exchanges: never a reply without its message
    assert result.history is not None and result.history.omitted == 2 * (40 - len(users))
    # Later requests carry as many exchanges as the budget allows: the size stops growing.
    sizes = [request_tokens(r) for r in model.requests[20:]]
    assert max(sizes) - min(sizes) < 200


async def test_without_a_window_the_whole_history_is_sent(store: EventStore) -> None:
    service = SessionService(store)
    sid = (await service.create("chat")).id
    model = ScriptedModel(responder=lambda request: {"text": "ok"})
    loop = AgentLoop(service, model, chat_spec())
    for n in range(5):
        result = await loop.run_turn(sid, f"m{n}")
    assert len(model.requests[-1].messages) == 1 + 9 and result.history is None


class StoryView(LoopHooks):
    """Earlier turns reduced to their user messages: the hook's view is what the model sees."""

    async def history(self, session_id: str, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [n for n in nodes if n["role"] == "user"]


async def test_the_history_hook_sees_only_earlier_turns_and_the_current_turn_stays_whole(store: EventStore) -> None:
    service = SessionService(store)
    sid = (await service.create("chat")).id
    model = ScriptedModel(["first reply", "second reply"])
    spec = AgentSpec(prompt=PromptAssembly([PromptSection("harness:identity", "x", 0)]), hooks=StoryView())
    loop = AgentLoop(service, model, spec)
    await loop.run_turn(sid, "one")
    await loop.run_turn(sid, "two")
    assert [(m.role, m.text()) for m in model.requests[-1].messages[1:]] == [("user", "one"), ("user", "two")]


def test_exchanges_start_at_user_messages_so_tool_results_stay_with_their_calls() -> None:
    messages = [
        ChatMessage("assistant", "opening"),
        ChatMessage("user", "a"),
        ChatMessage("assistant", "", tool_calls=[]),
        ChatMessage("tool", "result", tool_call_id="c1"),
        ChatMessage("assistant", "done"),
        ChatMessage("user", "b"),
        ChatMessage("assistant", "reply"),
    ]
    assert exchange_starts(messages) == [0, 1, 5]
    last_two = sum(message_tokens(m) for m in messages[5:])
    cut, fit = fit_history(messages, window=last_two, reply_reserve=0, fixed_tokens=0)
    assert cut == 5 and fit.omitted == 5 and fit.messages == 7


def test_rp_chat_cli_logs_the_history_fit_of_a_bounded_route(tmp_path: Path) -> None:
    env = {"RP_HOME": str(tmp_path)}
    words = "lighthouse " * 300
    args = ["chat", "--model", "demo", "--context-window", "2000", "--json"]
    for n in range(8):
        args += ["-m", f"{n} {words}"]
    result = invoke(env, *args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert [t["outcome"] for t in summary["turns"]] == ["completed"] * 8
    events = events_of(tmp_path, summary["sessionId"])
    fits = [e.payload["history"] for e in events if e.type == "model/request"]
    assert len(fits) == 8 and fits[-1]["window"] == 2000 and fits[-1]["omitted"] > 0


def _reference_fit(earlier: list[ChatMessage], budget: int, floor: int) -> int:
    """The cut as first written: exchanges listed, then costed newest first."""
    cut, spent = len(earlier), 0
    starts = exchange_starts(earlier) if earlier else []
    ends = starts[1:] + [len(earlier)]
    for start, end in zip(reversed(starts), reversed(ends)):
        if start < floor:
            break
        cost = sum(message_tokens(m) for m in earlier[start:end])
        if spent + cost > budget:
            break
        spent += cost
        cut = start
    return cut


@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), st.integers(0, 40)), max_size=30),
    st.integers(0, 400),
    st.integers(0, 30),
)
@settings(max_examples=300, deadline=None)
def test_the_cut_with_known_costs_is_the_cut_without(shape: list[tuple[str, int]], budget: int, floor: int) -> None:
    earlier = [ChatMessage(role, "word " * size, tool_call_id="c" if role == "tool" else None) for role, size in shape]
    costs = [message_tokens(m) for m in earlier]
    kw: dict[str, Any] = {"window": budget + 100, "reply_reserve": 60, "fixed_tokens": 40, "floor": floor}
    cut, fit = fit_history(earlier, **kw)
    assert cut == _reference_fit(earlier, budget, floor)
    assert fit_history(earlier, costs=costs, **kw) == (cut, fit)


async def test_converted_messages_are_kept_across_turns_by_session_node_and_seq(store: EventStore) -> None:
    """Each turn has a loop of its own; the conversion and token count of the earlier history is
    the service's, so a later turn converts only what is new."""
    service = SessionService(store)
    sid = (await service.create("chat")).id
    model = ScriptedModel([{"text": "first"}, {"text": "second"}])
    spec = AgentSpec(prompt=PromptAssembly([PromptSection("s", "system", 0)]), context_window=100_000)
    await AgentLoop(service, model, spec).run_turn(sid, "hello")
    converted = service.derived[CONVERTED]
    kept = dict(converted._by_key)
    first_input = (await service.surface(sid))["nodes"][0]
    assert (sid, first_input["id"], first_input["seq"]) in kept
    await AgentLoop(service, model, spec).run_turn(sid, "again")
    assert all(converted._by_key[k] is v for k, v in kept.items())
    second = model.requests[-1].messages
    assert [m.text() for m in second[1:]] == ["hello", "first", "again"]
    other = (await service.create("chat")).id  # same ids and seqs in another session: converted anew
    assert converted.convert(other, [])[0] == []
    view = tuple((await service.surface(sid))["nodes"])
    once = converted.convert(sid, view)
    assert converted.convert(sid, view) == once and converted.convert(sid, view)[0] is once[0]  # a tuple: converted once
    assert converted.convert(other, view)[0] is not once[0]
    assert converted.convert(sid, list(view))[0] is not once[0]  # a list may have changed since: converted again


def test_counts_remembered_by_object_answer_only_for_that_object() -> None:
    import copy

    from roleplay.harness.history import remember_tokens

    message = ChatMessage("user", LINE * 3)
    exact = message_tokens(message)
    remember_tokens(message, exact)
    assert message_tokens(message) == exact
    twin = copy.deepcopy(message)
    twin.content = "short"  # a copy starts without the recorded count: it may be changed
    assert message_tokens(twin) == message_tokens(ChatMessage("user", "short")) != exact
    shallow = copy.copy(message)
    shallow.content = "short"
    assert message_tokens(shallow) == message_tokens(twin) and message_tokens(message) == exact
    assert message_tokens(ChatMessage("user", LINE * 3)) == exact


def test_a_remembered_request_is_summed_from_its_figures_and_equals_the_sum_of_its_messages() -> None:
    from roleplay.harness.history import messages_tokens, remember_request

    messages = [ChatMessage("system", "rules"), *(ChatMessage("user" if i % 2 else "assistant", "word " * i) for i in range(12))]
    plain = [message_tokens(m) for m in messages]
    remember_request(messages, plain)
    for start, stop in [(0, None), (1, 5), (1, 0), (3, 3), (2, -1), (0, 40)]:
        assert messages_tokens(messages, start, stop) == sum(plain[start:stop])
    # Another list with the same messages, or the list once changed, is summed message by message.
    assert messages_tokens(list(messages)) == sum(plain)
    messages.append(ChatMessage("user", "more words"))
    assert messages_tokens(messages) == sum(plain) + message_tokens(messages[-1])


def test_a_request_remembered_by_its_runs_is_summed_like_its_messages() -> None:
    from itertools import accumulate

    from roleplay.harness.history import messages_tokens, remember_request_runs

    earlier = [ChatMessage("user" if i % 3 == 0 else "assistant", "word " * (i + 1)) for i in range(20)]
    running = list(accumulate((message_tokens(m) for m in earlier), initial=0))
    current = [ChatMessage("user", "now"), ChatMessage("assistant", "and then " * 4)]
    system = ChatMessage("system", "rules " * 5)
    for cut in (0, 1, 7, 19, 20):
        messages = [system, *earlier[cut:], *current]
        plain = [message_tokens(m) for m in messages]
        remember_request_runs(messages, (plain[0],), running, cut, plain[len(plain) - len(current) :])
        for start in range(len(messages) + 2):
            for stop in (None, *range(-2, len(messages) + 2)):
                assert messages_tokens(messages, start, stop) == sum(plain[start:stop])
    # The running sums may be extended afterwards (the kept history grows): the request is not.
    messages = [system, *earlier[5:], *current]
    plain = [message_tokens(m) for m in messages]
    remember_request_runs(messages, (plain[0],), running, 5, plain[-2:])
    running.append(running[-1] + 1000)
    assert messages_tokens(messages) == sum(plain) and messages_tokens(messages, 1, -2) == sum(plain[1:-2])


def test_a_story_converted_turn_by_turn_equals_one_converted_whole() -> None:
    """The next turn's story (the last one plus new nodes) is converted by extending the last
    answer in place: at every length it equals a fresh conversion, and what an earlier answer
    held is still there (it only grew at the end)."""
    from roleplay.harness.converted import ConvertedMessages

    def node(i: int) -> dict[str, object]:
        role = "user" if i % 3 == 0 else "assistant"
        return {"id": f"m{i}", "seq": i + 1, "role": role, "content": [{"type": "text", "text": f"line {i} " * (i % 5 + 1)}]}

    nodes = [node(i) for i in range(30)]
    kept = ConvertedMessages()
    seen: list[tuple[object, list[object]]] = []
    for k in (0, 1, 2, 5, 5, 9, 17, 30):
        got = kept.converted("s", tuple(nodes[:k]))
        fresh = ConvertedMessages().converted("s", tuple(nodes[:k]))
        assert [m.text() for m in got.messages] == [m.text() for m in fresh.messages]
        assert (got.costs, got.running, got.starts) == (fresh.costs, fresh.running, fresh.starts)
        seen.append((got, [list(part) for part in got]))
    for got, then in seen:
        assert all(list(part)[: len(was)] == was for part, was in zip(got, then))  # type: ignore[call-overload]
