"""The Writer conversation's kept per-message figures (``core.conversation_window``) must equal
what they replace, computed from scratch, through growth, edits, truncation and forks."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.core import context_build as cb
from roleplay.core.conversation import Entry, render_entries, text_of_entries
from roleplay.core.conversation_window import HistoryTally, history_text, tally
from roleplay.harness.models.tokens import _stats, _total, count_tokens

_TEXT = st.lists(
    st.sampled_from(["她推开门", "rain", " ", "  ", "\n", "\n\n", "\n  indented", "42", "</section>", "<item>", "🙂", "。", "word " * 40]),
    min_size=1,
    max_size=30,
).map(lambda parts: "".join(parts).strip() or "x")
_ENTRY = st.tuples(st.sampled_from(["user", "writing", "non-writing"]), _TEXT)
_ESCAPES = (cb.escape_control_tags, cb.escape_request_tags)


def _cost(entry: Entry, escape: cb.Callable[[str], str]) -> int:
    return count_tokens(escape(render_entries((entry,)))) + 1


def _keep_by_loop(history: list[Entry], room: int, escape: cb.Callable[[str], str]) -> int:
    keep = 0
    for entry in reversed(history):
        room -= _cost(entry, escape)
        if room < 0:
            break
        keep += 1
    return keep


@given(
    st.lists(st.lists(_ENTRY, max_size=12), min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=40), min_size=6, max_size=6),
    st.integers(min_value=-5, max_value=3000),
    st.sampled_from(["", "[Character's note]\nAlice hums.\n\n", "\n trailing"]),
)
@settings(max_examples=120, deadline=None)
def test_a_tally_kept_across_changes_equals_a_fresh_computation(
    turns: list[list[tuple[str, str]]], cuts: list[int], room: int, between: str
) -> None:
    tally_ = HistoryTally()
    history: list[Entry] = []
    head = "Alice is a ferrywoman. " * 200 + "\n\n"
    for n, (added, cut) in enumerate(zip(turns, cuts)):
        # A turn adds messages; some rewrite the history's end (an edit, a regenerate, a fork).
        if cut % 4 == 0 and history:
            history = history[: cut % (len(history) + 1)]
        history = history + [Entry(f"m{n}_{i}", speaker, text) for i, (speaker, text) in enumerate(added)]
        tally_.sync(history)
        whole = tally_.text()
        assert whole == text_of_entries(history)
        # Hashed as it grows, kept with the text: the same as hashing the whole text now.
        assert tally_.digest(whole) == (hashlib.sha256(whole.encode("utf-8")).hexdigest() if whole else None)
        if whole:  # only for that very object: an equal text made elsewhere is hashed by its user
            assert tally_.digest(whole[:-1] + whole[-1:]) is None
        for escape in _ESCAPES:
            assert tally_.keep_within(room, escape) == _keep_by_loop(history, room, escape)
            for start in {0, len(history) // 2, max(len(history) - 1, 0)}:
                if start >= len(history):
                    continue
                assert tally_.text(start) == text_of_entries(history[start:])
                assert tally_.cost(start, escape) == _cost(history[start], escape)
                body = escape(text_of_entries(history[start:]))
                for text in (f"{head}{body}\n</section>", f"{head}{body}{between}", f"{head}{body}\n\n{between}{body}", f"x{body}{head}"):
                    assert tally_.count(text, start, escape) == _total(_stats(text))
                    if start == 0:  # a prompt that holds the whole conversation counts at least the floor
                        assert _total(_stats(text)) >= tally_.tokens_at_least(escape)


def test_histories_are_kept_apart_and_matched_by_their_messages() -> None:
    a = [Entry("a0", "user", "hello"), Entry("a1", "writing", "The harbour.")]
    b = [Entry("b0", "user", "other story")]
    assert history_text(a) == text_of_entries(a)
    assert history_text(b) == text_of_entries(b)
    grown = [*a, Entry("a2", "user", "more")]
    assert tally(grown) is tally(a[:1])  # the same chain, synced to each history asked about
    assert history_text(grown) == text_of_entries(grown)
    # An equal history made of new objects is the same history.
    copy = [Entry(e.message_id, e.speaker, e.text) for e in grown]
    assert history_text(copy) == text_of_entries(grown)
    assert history_text([]) == ""


_TAGGED = st.lists(
    st.sampled_from(
        ["她推开门", "rain", " ", "\n", "\n\n", "<section", "</ITEM", "<item>", "<roleplay_request", "<sections", "<", "/", "。"]
    ),
    min_size=1,
    max_size=12,
).map(lambda parts: "".join(parts).strip() or "x")


@given(
    st.lists(st.lists(st.tuples(st.sampled_from(["user", "writing", "non-writing"]), _TAGGED), max_size=8), min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=40), min_size=6, max_size=6),
)
@settings(max_examples=150, deadline=None)
def test_a_kept_escape_equals_escaping_the_text(turns: list[list[tuple[str, str]]], cuts: list[int]) -> None:
    """``HistoryTally.escaped`` of a text it gave equals the escape's regex over that text (tags at
    a message's end, where ``$`` matches alone and a line break follows in the joined text), is
    the text itself when nothing in it is escaped, and is None for any other text (an equal copy,
    a trimmed text the history's rewrite left behind)."""
    tally_ = HistoryTally()
    history: list[Entry] = []
    old: list[tuple[int, str]] = []
    for n, (added, cut) in enumerate(zip(turns, cuts)):
        before = len(history)
        if cut % 3 == 0 and history:
            history = history[: cut % (len(history) + 1)]
        truncated = len(history) < before
        history = history + [Entry(f"m{n}_{i}", speaker, text) for i, (speaker, text) in enumerate(added)]
        tally_.sync(history)
        for start, text in old:
            # A text given before is known while its messages are (then escaped right); a trimmed
            # one is forgotten when messages are dropped.
            got = tally_.escaped(text, cb.escape_control_tags)
            assert got is None or got == cb.escape_control_tags(text)
            if truncated and start:
                assert got is None
        old = []
        for start in sorted({0, len(history) // 3, len(history) // 2, max(len(history) - 1, 0)}):
            text = tally_.text(start)
            if not text:
                continue
            old.append((start, text))
            for escape in _ESCAPES:
                got = tally_.escaped(text, escape)
                assert got == escape(text)
                assert (got is text) == (escape(text) == text)
                assert tally_.escaped(text[:-1] + text[-1:], escape) is None
        whole = tally_.text()
        for escape in _ESCAPES:  # the whole text stays known after a later trimmed one
            assert tally_.escaped(whole, escape) == escape(whole) if whole else True
        if n == 2 and history:  # figures asked for after the escapes alone were kept
            escape = _ESCAPES[n % 2]
            assert [tally_.cost(i, escape) for i in range(len(history))] == [_cost(e, escape) for e in history]


def test_a_conversation_slot_is_rendered_from_the_kept_escapes() -> None:
    """The slot takes the tally's escape of the conversation's text (no regex pass over it) and
    renders the same bytes as escaping it."""
    history = [Entry("t0", "user", "open <section name='x'>"), Entry("t1", "writing", "The harbour.</item")]
    counts = tally(history)
    text = counts.text()
    source = cb.ContextSource(cb.CONVERSATION, "Conversation", text, "factual")
    slot = cb.Slot("conversation", "Conversation", (cb.CONVERSATION,), True)
    plain = cb.Slot("conversation", "Conversation", (cb.CONVERSATION,), False)
    calls: list[str] = []

    def known(value: str, escape: cb.Callable[[str], str]) -> str | None:
        calls.append(value)
        return counts.escaped(value, escape)

    for s in (slot, plain):
        assert cb._render_slot(s, [(source, text)], known) == cb._render_slot(s, [(source, text)])
    assert calls == [text, text]
