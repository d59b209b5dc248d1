"""Surface folding: the model-visible message list and its ``surfaceOp`` replace semantics."""

from __future__ import annotations

from typing import Any

from roleplay.harness.events import Event
from roleplay.harness.projections import fold
from roleplay.harness.surface import replaced_seqs, surface_projection, to_model_messages


def ev(seq: int, type_: str, payload: dict[str, Any]) -> Event:
    return Event("s", seq, type_, payload, "t")


def msg(seq: int, role: str, mid: str, text: str = "x", op: dict[str, Any] | None = None, **extra: Any) -> Event:
    payload: dict[str, Any] = {"messageId": mid, "content": [{"type": "text", "text": text}] if text else [], **extra}
    if op:
        payload["surfaceOp"] = op
    return ev(seq, f"{role}/message", payload)


def ids(state: dict[str, Any]) -> list[str]:
    return [n["id"] for n in state["nodes"]]


def texts(state: dict[str, Any]) -> list[str]:
    return ["".join(b.get("text", "") for b in n["content"]) if isinstance(n["content"], list) else n["content"] for n in state["nodes"]]


BASE = [msg(1, "user", "u1", "hello"), msg(2, "assistant", "a1", "hi"), msg(3, "user", "u2", "go"), msg(4, "assistant", "a2", "went")]


def test_messages_append_in_order_and_non_message_events_are_ignored() -> None:
    events = BASE[:2] + [ev(3, "turn/start", {"turnId": "t"}), ev(4, "command/run", {"commandId": "c", "name": "n", "args": {}})]
    state = fold(surface_projection, events)
    assert ids(state) == ["u1", "a1"]
    assert [n["seq"] for n in state["nodes"]] == [1, 2]


def test_edit_replaces_one_node_and_keeps_the_message_id() -> None:
    edit = msg(5, "assistant", "a1-edit", "HI!", op={"op": "replace", "range": "node", "targetMessageId": "a1"})
    state = fold(surface_projection, BASE + [edit])
    assert ids(state) == ["u1", "a1", "u2", "a2"]
    assert texts(state) == ["hello", "HI!", "go", "went"]
    assert state["nodes"][1]["seq"] == 5 and state["nodes"][1]["replaces"] == [2]
    again = msg(6, "assistant", "zzz", "HI!!", op={"op": "replace", "range": "node", "targetMessageId": "a1"})
    state = fold(surface_projection, [again], state)
    assert state["nodes"][1]["replaces"] == [2, 5] and ids(state)[1] == "a1"


def test_suffix_replacement_runs_from_the_target_to_the_end() -> None:
    regen = msg(5, "assistant", "a1b", "another reply", op={"op": "replace", "range": "suffix", "targetMessageId": "a1"})
    state = fold(surface_projection, BASE + [regen])
    assert ids(state) == ["u1", "a1b"]
    assert texts(state) == ["hello", "another reply"]


def test_empty_assistant_replacement_projects_to_nothing() -> None:
    delete = msg(5, "assistant", "del", "", op={"op": "replace", "range": "suffix", "targetMessageId": "u2"})
    state = fold(surface_projection, BASE + [delete])
    assert ids(state) == ["u1", "a1"]
    assert all(n["role"] != "assistant" or texts({"nodes": [n]}) != [""] for n in state["nodes"])
    remove_one = msg(6, "assistant", "del2", "   ", op={"op": "replace", "range": "node", "targetMessageId": "a1"})
    state = fold(surface_projection, [remove_one], state)
    assert ids(state) == ["u1"]
    assert to_model_messages(state) == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]


def test_plain_empty_assistant_never_reaches_history_but_tool_calls_do() -> None:
    empty = msg(5, "assistant", "e", "")
    reasoning_only = ev(6, "assistant/message", {"messageId": "r", "content": [{"type": "reasoning", "text": "think"}]})
    calls = ev(7, "assistant/message", {"messageId": "tc", "content": [], "toolCalls": [{"id": "c1", "name": "f", "arguments": "{}"}]})
    result = ev(8, "tool/result", {"callId": "c1", "name": "f", "ok": False, "content": "boom", "error": {"code": "x", "message": "boom"}})
    state = fold(surface_projection, BASE + [empty, reasoning_only, calls, result])
    assert ids(state) == ["u1", "a1", "u2", "a2", "tc", "tool:c1"]
    msgs = to_model_messages(state)
    assert msgs[-2]["toolCalls"][0]["id"] == "c1"
    assert msgs[-1] == {"role": "tool", "content": "boom", "toolCallId": "c1", "name": "f"}
    assert state["nodes"][-1]["isError"] is True


def test_compaction_checkpoint_replaces_the_active_surface() -> None:
    cp = ev(5, "compaction/checkpoint", {"checkpointId": "cp1", "summary": "They met and went.", "sourceEventSeqs": [1, 2, 3, 4]})
    state = fold(surface_projection, BASE + [cp, msg(6, "user", "u3", "next")])
    assert ids(state) == ["cp1", "u3"]
    assert state["nodes"][0]["kind"] == "compaction/summary"
    assert texts(state) == ["They met and went.", "next"]


def test_a_checkpoint_keeps_the_nodes_it_does_not_name_after_the_summary() -> None:
    # The summary replaces u1/a1 (and the edit a1 replaced); the latest exchange stays verbatim.
    edit = msg(5, "assistant", "a1e", "hi again", op={"op": "replace", "range": "node", "targetMessageId": "a1"})
    cp = ev(6, "compaction/checkpoint", {"checkpointId": "cp1", "summary": "They met.", "sourceEventSeqs": [1, 2, 5]})
    state = fold(surface_projection, BASE + [edit, cp])
    assert ids(state) == ["cp1", "u2", "a2"]
    assert texts(state)[0] == "They met."


def test_replacement_of_a_missing_target_is_counted_not_applied() -> None:
    bad = msg(5, "assistant", "x", "y", op={"op": "replace", "range": "suffix", "targetMessageId": "nope"})
    state = fold(surface_projection, BASE + [bad])
    assert ids(state) == ["u1", "a1", "u2", "a2"] and state["ignoredOps"] == 1


def test_replaced_seqs_names_what_an_op_would_replace() -> None:
    state = fold(
        surface_projection, BASE + [msg(5, "assistant", "e", "edit", op={"op": "replace", "range": "node", "targetMessageId": "a1"})]
    )
    assert replaced_seqs(state, {"range": "node", "targetMessageId": "a1"}) == [2, 5]
    assert replaced_seqs(state, {"range": "suffix", "targetMessageId": "u2"}) == [3, 4]
    assert replaced_seqs(state, {"range": "suffix", "targetMessageId": "a1"}) == [2, 3, 4, 5]
    assert replaced_seqs(state, {"range": "node", "targetMessageId": "missing"}) is None


def test_source_metadata_is_kept_on_nodes() -> None:
    m = msg(1, "user", "u", "x", source={"rpMessageAction": {"v": 1, "kind": "edit"}})
    assert fold(surface_projection, [m])["nodes"][0]["source"] == {"rpMessageAction": {"v": 1, "kind": "edit"}}


def test_a_surface_key_kept_without_a_copy_says_what_the_surface_held_whatever_is_folded_after() -> None:
    """``surface_key`` keeps a surface's own node list (no copy): folding appends, edits, deletions,
    regenerations and checkpoints afterwards leaves the key equal to a copy taken at the time
    (the reference: a key of the pairs then), and unequal to the surface after any rewrite."""
    from roleplay.harness.surface import SurfaceKey, surface_key

    node = {"op": "replace", "range": "node"}
    later = [
        [msg(5, "user", "u3", "more")],
        [msg(5, "assistant", "a1e", "HI", op={**node, "targetMessageId": "a1"})],
        [msg(5, "assistant", "a1e", "", op={**node, "targetMessageId": "a1"})],
        [msg(5, "assistant", "rg", "again", op={"op": "replace", "range": "suffix", "targetMessageId": "a1"})],
        [msg(5, "assistant", "del", "", op={"op": "replace", "range": "suffix", "targetMessageId": "u2"})],
        [ev(5, "compaction/checkpoint", {"checkpointId": "c", "summary": "s", "sourceEventSeqs": [1, 2]})],
        [msg(5, "user", "u3", "more"), msg(6, "assistant", "a2e", "x", op={**node, "targetMessageId": "a2"}), msg(7, "user", "u4")],
    ]
    for events in later:
        state = fold(surface_projection, BASE)
        key = surface_key(state["nodes"])
        copied = SurfaceKey([dict(n) for n in state["nodes"]])
        pairs = [(n["id"], n["seq"]) for n in state["nodes"]]
        state = fold(surface_projection, events, state)
        assert key == copied and list(key.pairs()) == pairs and len(key) == 4
        assert [(n["id"], n["seq"]) for n in key.nodes()] == pairs
        now = state["nodes"]
        rewritten = [(n["id"], n["seq"]) for n in now[: len(pairs)]] != pairs
        assert (surface_key(now[: len(key)]) == key) is (not rewritten)
        assert surface_key(now) != key or len(now) == len(pairs)
