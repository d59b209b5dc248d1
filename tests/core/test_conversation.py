"""The surface projected into Writer material: what is excluded, how replies are labelled, the
context notes, and the summary of the active checkpoint."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.core import conversation as conv
from roleplay.harness.events import Event
from roleplay.harness.surface import apply_surface, initial_surface


def text(t: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": t}]


def user(id_: str, t: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {"id": id_, "role": "user", "seq": seq, "content": text(t), **extra}


def assistant(id_: str, t: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {"id": id_, "role": "assistant", "seq": seq, "content": text(t) if t else [], **extra}


CALL = [{"id": "c1", "name": "rp_write_turn", "arguments": "{}"}]


def surface() -> list[dict[str, Any]]:
    return [
        assistant("open", "The ferry waits in the fog.", 1),
        user("u1", "I step aboard.", 2),
        user("ctx1", '<roleplay_request mode="chat">…</roleplay_request>', 3, source={"rpRunContext": True}),
        assistant("a-tools", "Let me write.", 4, toolCalls=CALL),
        {"id": "tool:c1", "role": "tool", "seq": 5, "toolCallId": "c1", "name": "rp_write_turn", "content": text("draft")},
        assistant("w1", "Alice pushes off from the pier.", 6, toolCalls=[{"id": "c2", "name": "rp_commit_turn", "arguments": "{}"}]),
        {"id": "tool:c2", "role": "tool", "seq": 7, "toolCallId": "c2", "name": "rp_commit_turn", "content": text("ok")},
        user("u2", "Wait, is Alice older than Bob?", 8),
        {
            "id": "n1",
            "role": "assistant",
            "seq": 9,
            "content": [{"type": "reasoning", "text": "SECRET THOUGHT"}, {"type": "text", "text": "Yes. Let's keep her 40."}],
        },
        user("u3", "OK, continue.", 10, content=[{"type": "image", "mediaType": "image/png", "data": "x"}, *text("OK, continue.")]),
        assistant("after", "in-progress step", 11, toolCalls=CALL),
    ]


def test_project_labels_and_exclusions() -> None:
    entries = conv.project(surface(), current_input_ids=["u3"], writing_ids={"w1"}, opening_id="open")
    assert [(e.message_id, e.speaker) for e in entries] == [
        ("open", "writing"),
        ("u1", "user"),
        ("w1", "writing"),
        ("u2", "user"),
        ("n1", "non-writing"),
    ]
    assert entries[-1].text == "Yes. Let's keep her 40."  # reasoning dropped


def test_uncommitted_tool_message_is_not_a_reply() -> None:
    entries = conv.project(surface(), current_input_ids=["u3"], writing_ids=set())
    ids = [e.message_id for e in entries]
    assert "w1" not in ids and "a-tools" not in ids
    assert ("open", "non-writing") in [(e.message_id, e.speaker) for e in entries]  # not selected as opening


def test_conversation_text_exact() -> None:
    out = conv.conversation_text(surface(), current_input_ids=["u3"], writing_ids=["w1"], opening_id="open")
    assert out == (
        conv.CONVERSATION_NOTE
        + "\n\n[Writing reply]\nThe ferry waits in the fog."
        + "\n\n[User]\nI step aboard."
        + "\n\n[Writing reply]\nAlice pushes off from the pier."
        + "\n\n[User]\nWait, is Alice older than Bob?"
        + "\n\n[Non-writing reply]\nYes. Let's keep her 40."
    )
    assert "OK, continue." not in out and "in-progress" not in out and "roleplay_request" not in out
    again = conv.conversation_text(surface(), current_input_ids=["u3"], writing_ids=["w1"], opening_id="open")
    assert again == out


def test_notes_say_what_they_must() -> None:
    for note in (conv.CONVERSATION_NOTE, conv.SUMMARY_NOTE):
        assert "more recent conversation wins" in note
        assert "not story events" in note
    assert "compressed record of earlier conversation" in conv.SUMMARY_NOTE
    assert "visible conversation kept verbatim" in conv.CONVERSATION_NOTE
    assert "style" in conv.CONVERSATION_NOTE and "dialogue" in conv.CONVERSATION_NOTE


def test_no_history_gives_empty_text() -> None:
    nodes = [user("u1", "Hello there.", 1)]
    assert conv.conversation_text(nodes, current_input_ids=["u1"]) == ""
    assert conv.conversation_text([]) == ""


def test_checkpoint_goes_to_summary_not_conversation() -> None:
    state = initial_surface()
    for seq, (type_, payload) in enumerate(
        [
            ("user/message", {"messageId": "old", "content": text("ancient")}),
            ("compaction/checkpoint", {"checkpointId": "cp1", "summary": "They crossed the river."}),
            ("user/message", {"messageId": "u5", "content": text("And then?")}),
            ("assistant/message", {"messageId": "a5", "content": text("They rested.")}),
            ("user/message", {"messageId": "u6", "content": text("Now?")}),
        ],
        start=1,
    ):
        apply_surface(state, Event("s", seq, type_, payload, "t"))
    nodes = state["nodes"]
    assert conv.summary_text(nodes) == "They crossed the river."
    assert conv.summary_source_text(nodes) == f"{conv.SUMMARY_NOTE}\n\nThey crossed the river."
    out = conv.conversation_text(nodes, current_input_ids=["u6"], writing_ids=["a5"])
    assert "crossed" not in out and "ancient" not in out
    assert out.endswith("[User]\nAnd then?\n\n[Writing reply]\nThey rested.")


def test_no_checkpoint_no_summary() -> None:
    assert conv.summary_text(surface()) is None
    assert conv.summary_source_text(surface()) == ""
    empty = [{"id": "cp", "role": "user", "kind": "compaction/summary", "seq": 1, "content": text("  ")}]
    assert conv.summary_text(empty) is None


def test_without_current_input_everything_counts_but_tool_steps() -> None:
    entries = conv.project(surface(), writing_ids=["w1"])
    assert [e.message_id for e in entries][-1] == "u3"


# -- the folds kept across turns (issue 12) ------------------------------------------------------

_KINDS = ["user", "user", "context", "continue", "writing", "writing", "reply", "empty", "step", "tool", "opening", "summary"]


def _node(kind: str, n: int) -> dict[str, Any]:
    from roleplay.core.player_prompts import CONTINUE_SOURCE
    from roleplay.names import OPENING_SOURCE, RUN_CONTEXT_SOURCE

    if kind == "user":
        return user(f"u{n}", f"input {n}", n)
    if kind == "context":
        return user(f"x{n}", "<roleplay_request/>", n, source={RUN_CONTEXT_SOURCE: {"v": 1}})
    if kind == "continue":
        return user(f"k{n}", "go on", n, source={CONTINUE_SOURCE: {"v": 1}})
    if kind == "opening":
        return assistant(f"a{n}", f"opening {n}", n, source={OPENING_SOURCE: {"index": 0}})
    if kind == "empty":
        return assistant(f"a{n}", "", n)
    if kind == "step":
        return assistant(f"a{n}", f"step {n}", n, toolCalls=CALL)
    if kind == "tool":
        return {"id": f"tool:{n}", "role": "tool", "seq": n, "toolCallId": "c1", "name": "x", "content": "done"}
    if kind == "summary":
        return {"id": f"cp{n}", "role": "user", "kind": conv.SUMMARY_KIND, "seq": n, "content": text(f"summary {n}")}
    return assistant(f"a{n}", f"reply {n}", n, toolCalls=CALL if kind == "writing" else None)


def _opening(nodes: list[dict[str, Any]]) -> str | None:
    from roleplay.core.run import opening_message_id

    return opening_message_id(nodes)


@given(
    st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 3), st.booleans()), min_size=1, max_size=60),
    st.randoms(use_true_random=False),
)
@settings(max_examples=150, deadline=None)
def test_folds_kept_across_turns_equal_fresh_projections(steps: list[tuple[str, int, bool]], rng: Any) -> None:
    """Nodes arrive a few at a time (a turn), writing replies are recorded as commits succeed
    (sometimes for a message the fold already saw as a step), and now and then the surface is
    rewritten: the kept folds always answer what a fresh projection of the same nodes gives."""
    from roleplay.harness.history import message_tokens
    from roleplay.harness.converted import nodes_to_messages
    from roleplay.harness.projections import Loaded
    from roleplay.harness.sessions import SessionService

    service = SessionService(None)  # type: ignore[arg-type]  # only its folds and derived views are used
    folds = service.folds
    nodes: list[dict[str, Any]] = []
    writing: list[str] = []
    seq, since = 0, 0
    for n, (kind, late, rewrite) in enumerate(steps, start=1):
        seq += 1
        if rewrite and nodes and rng.random() < 0.2:
            nodes = [x for x in nodes if rng.random() < 0.7]  # an edit, delete or compaction
            since = seq
        nodes = nodes + [_node(kind, seq)]
        assistants = [x["id"] for x in nodes if x["role"] == "assistant" and x["id"] not in writing]
        if kind == "writing" or (late == 3 and assistants):
            writing = writing + [nodes[-1]["id"] if kind == "writing" else rng.choice(assistants)]
        loaded = Loaded({"nodes": nodes}, seq, 0, 0, appends_since=since)
        entries, summary = conv.history_entries(folds, "s", loaded, writing)
        assert entries == conv.project(nodes, writing_ids=writing, opening_id=_opening(nodes))
        assert summary == conv.summary_source_text(nodes)
        split = max(0, len(nodes) - late)
        story = conv.history_story(folds, "s", loaded, writing, split)
        assert list(story) == conv.story_nodes(nodes[:split], writing_ids=writing, opening_id=_opening(nodes[:split]))
        expected = sum(message_tokens(m) for m in nodes_to_messages(story))
        assert conv.story_tokens(service, "s", loaded, writing, split) == expected


def test_a_commit_recorded_for_a_message_already_folded_starts_the_fold_again() -> None:
    from roleplay.harness.projections import Loaded
    from roleplay.harness.surface_folds import SurfaceFolds

    folds = SurfaceFolds()
    nodes = [user("u1", "hi", 1), assistant("a1", "drafted", 2, toolCalls=CALL)]
    loaded = Loaded({"nodes": nodes}, 2, 0, 0, appends_since=0)
    assert conv.history_entries(folds, "s", loaded, [])[0] == [conv.Entry("u1", "user", "hi")]
    entries, _ = conv.history_entries(folds, "s", loaded, ["a1"])  # its commit succeeded after all
    assert entries == [conv.Entry("u1", "user", "hi"), conv.Entry("a1", "writing", "drafted")]
