"""Large event text as content-addressed parts: cutting, round trips, corruption."""

from __future__ import annotations

import json
import zlib

import pytest

from roleplay.errors import RpError
from roleplay.harness.store import texts
from roleplay.harness.store.texts import (
    MAX_PART_CHARS,
    externalise,
    reassemble,
    sha256_text,
    split_parts,
    texts_column,
    texts_column_pieces,
)


def conversation(turns: int) -> str:
    head = '<section name="Story state">\n' + "".join(f"fact {i}: the harbor bell rang {i} times\n" for i in range(40)) + "</section>\n"
    body = "".join(
        f"[User]\nI walk to pier {i} and ask about the wreck.\n\n[Writing reply]\nThe keeper answers slowly, line {i}.\n\n"
        for i in range(turns)
    )
    return head + '<section name="Conversation">\n' + body + '</section>\n<section name="Current input">\nnext\n</section>\n'


def test_parts_concatenate_to_the_text() -> None:
    for text in ("", "x", "a\n" * 5000, "无换行的长段落" * 5000, conversation(200), "\r\n".join(["line"] * 999)):
        assert "".join(split_parts(text)) == text


def test_a_line_longer_than_a_part_is_sliced() -> None:
    parts = split_parts("y" * (3 * MAX_PART_CHARS + 5))
    assert [len(p) for p in parts] == [MAX_PART_CHARS] * 3 + [5]


def test_consecutive_prompts_share_all_parts_but_those_around_the_change() -> None:
    before, after = conversation(300), conversation(301)
    old = set(split_parts(before))
    new = [p for p in split_parts(after) if p not in old]
    # One exchange more: only the part(s) holding the new lines and the section's end are new.
    assert sum(len(p) for p in new) < 3 * 8192 and len(new) <= 3
    assert sum(len(p) for p in new) < len(after) / 5


def test_externalise_blanks_large_strings_and_reassembles_them_exactly() -> None:
    big = conversation(50)
    payload = {"messageId": "m", "content": [{"type": "text", "text": big}, {"type": "text", "text": "small"}], "meta": {"a~/b": big}}
    ext = externalise(payload)
    assert ext is not None
    assert [t.path for t in ext.texts] == [("content", 0, "text"), ("meta", "a~/b")]
    assert big not in ext.stored_json and "small" in ext.stored_json
    ids = {h: n for n, h in enumerate(ext.parts)}
    stored = {n: zlib.compress(ext.parts[h].encode("utf-8")) for h, n in ids.items()}
    import json

    back = reassemble(json.loads(ext.stored_json), texts_column(ext.texts, ids), stored, where="s#1")
    assert back == payload
    assert externalise({"text": "short"}) is None


def test_a_large_root_string_round_trips() -> None:
    big = "長" * 2000
    ext = externalise(big)
    assert ext is not None and ext.texts[0].path == ()
    ids = {h: n for n, h in enumerate(ext.parts)}
    stored = {n: texts.compress(ext.parts[h]) for h, n in ids.items()}
    import json

    assert reassemble(json.loads(ext.stored_json), texts_column(ext.texts, ids), stored, where="snap") == big


def test_a_damaged_or_missing_part_is_store_corrupt_never_wrong_text() -> None:
    big = conversation(40)
    ext = externalise({"t": big})
    assert ext is not None
    ids = {h: n for n, h in enumerate(ext.parts)}
    column = texts_column(ext.texts, ids)
    stored = {n: texts.compress(ext.parts[h]) for h, n in ids.items()}
    stored[0] = texts.compress(ext.parts[next(iter(ext.parts))].replace("bell", "BELL"))
    with pytest.raises(RpError) as exc:
        reassemble({"t": ""}, column, stored, where="s#3")
    assert exc.value.code == "store.corrupt" and exc.value.pointer == "/t"
    stored.pop(0)
    with pytest.raises(RpError) as exc:
        reassemble({"t": ""}, column, stored, where="s#3")
    assert exc.value.code == "store.corrupt"
    assert sha256_text(big) == ext.texts[0].sha256


_UNITS = ["a\n", "fact 1: the bell\n", "\n", "\r", "\r\n", "\n\n", "长句子。" * 40 + "\n", "y" * 5000, "z" * 9000 + "\n", "\x1c", "ok"]


@pytest.mark.parametrize("seed", range(60))
def test_split_reusing_a_recent_texts_parts_equals_the_full_split(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hashed_parts`` starts from a recent text's leading parts: its result must be exactly the
    full split (with each part's sha256), whatever the next text keeps, changes or appends."""
    import random

    rng = random.Random(seed)
    monkeypatch.setattr(texts, "_RECENT_MIN_CHARS", 1)
    monkeypatch.setattr(texts, "_recent_splits", [])

    def some_text(n: int) -> str:
        return "".join(rng.choice(_UNITS) for _ in range(n))

    base = some_text(rng.randint(50, 400))
    for _ in range(6):
        cut = rng.randint(0, len(base))
        following = rng.choice(["", "\n", some_text(rng.randint(1, 30)), base[cut:]])
        new = base[:cut] + following + some_text(rng.randint(0, 20))
        got = texts.hashed_parts(new)
        assert got == [(p, sha256_text(p)) for p in texts._split(new)]
        assert split_parts(new) == texts._split(new)
        base = new if rng.random() < 0.7 else base


def test_a_part_ending_in_a_carriage_return_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recent text's part that ends with ``\\r`` at a cut: the next text adds ``\\n`` there,
    making ``\\r\\n`` one line and moving the cut; the split must still equal the full one."""
    import random

    monkeypatch.setattr(texts, "_RECENT_MIN_CHARS", 1)
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        monkeypatch.setattr(texts, "_recent_splits", [])
        base = "".join(rng.choice(["line of text\r", "more words here\n", "x" * 90 + "\r"]) for _ in range(rng.randint(20, 120)))
        parts = texts._split(base)
        ends = [sum(map(len, parts[: i + 1])) for i, p in enumerate(parts[:-1]) if p.endswith("\r")]
        if not ends:
            continue
        texts.hashed_parts(base)
        new = base[: ends[0]] + "\n" + base[ends[0] :]
        assert texts.hashed_parts(new) == [(p, sha256_text(p)) for p in texts._split(new)]
        checked += 1
    assert checked > 20


def test_consecutive_prompts_reuse_the_leading_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(texts, "_RECENT_MIN_CHARS", 1)
    monkeypatch.setattr(texts, "_recent_splits", [])
    before, after = conversation(300), conversation(301)
    texts.hashed_parts(before)
    reused, at = texts._recent_splits[-1].run(after, 0, 0)
    assert reused > 0 and at > len(before) * 0.9
    assert texts.hashed_parts(after) == [(p, sha256_text(p)) for p in texts._split(after)]


def test_texts_column_pieces_join_to_the_column_whatever_ids_are_known() -> None:
    ext = externalise({"a": conversation(40), "é": [conversation(45)], "b": "small"})
    assert ext is not None and len(ext.parts) > 2
    ids = {h: n * 7 for n, h in enumerate(ext.parts)}
    for known_count in (0, 1, len(ids)):
        known = dict(list(ids.items())[:known_count])
        pieces = texts_column_pieces(ext.texts, known)
        assert all((lit is None) != (ref is None) for lit, ref in pieces)
        assert {ref for _, ref in pieces if ref is not None} == set(ids) - set(known)
        assert "".join(lit if lit is not None else str(ids[ref]) for lit, ref in pieces) == texts_column(ext.texts, ids)


@pytest.mark.parametrize("seed", range(40))
def test_parts_read_one_at_a_time_equal_the_full_split(seed: int) -> None:
    """``_next_part`` reads lines from a cut on (``str.splitlines``' boundaries, long lines sliced)
    and stops at the next cut: chained, its parts are the full split's."""
    import random

    rng = random.Random(seed)
    text = "".join(rng.choice([*_UNITS, "\x0b", "\x0c", "\x85", "\u2028", "\r\r\n", "w" * 4096]) for _ in range(rng.randint(0, 300)))
    parts, pos = [], 0
    while pos < len(text):
        parts.append(texts._next_part(text, pos))
        pos += len(parts[-1])
    assert parts == texts._split(text)


def test_a_change_before_the_conversation_hashes_only_the_parts_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state section sits before the conversation and changes at every turn: the parts after
    it are the previous prompt's again, found by their content, not cut and hashed anew."""
    monkeypatch.setattr(texts, "_RECENT_MIN_CHARS", 1)
    monkeypatch.setattr(texts, "_recent_splits", [])
    head = "preset line\n" * 400
    before = f"{head}state: trust 40\n\n{conversation(300)}"
    after = f"{head}state: trust 41, mood calm\n\n{conversation(301)}"
    texts.hashed_parts(before)
    hashed: list[str] = []
    real = texts.sha256_text
    monkeypatch.setattr(texts, "sha256_text", lambda part: hashed.append(part) or real(part))
    got = texts.hashed_parts(after)
    assert got == [(p, real(p)) for p in texts._split(after)]
    assert sum(map(len, hashed)) < len(after) * 0.1


def test_parts_offered_for_reuse_are_bounded_and_a_full_index_changes_no_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(texts, "_KNOWN_MAX_CHARS", 5_000)
    monkeypatch.setattr(texts, "_known", {})
    monkeypatch.setattr(texts, "_known_chars", 0)
    for turns in range(40, 60):
        text = f"state {turns}\n\n{conversation(turns)}"
        assert texts.hashed_parts(text) == [(p, sha256_text(p)) for p in texts._split(text)]
        assert texts._known_chars <= 5_000 + texts.MAX_PART_CHARS


def test_a_long_texts_digest_is_kept_for_that_very_string(monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    monkeypatch.setattr(texts, "_recent_digests", [])
    long = conversation(800)
    assert len(long) >= texts._DIGEST_KEPT_FROM
    expected = hashlib.sha256(long.encode("utf-8")).hexdigest()
    assert sha256_text(long) == expected and texts._recent_digests[-1][0] is long
    assert sha256_text(long) == expected  # from the kept pair
    # An equal string made elsewhere is hashed on its own (identity, not equality, is kept).
    copy = long[:-1] + long[-1:]
    assert copy is not long and sha256_text(copy) == expected and len(texts._recent_digests) == 2


def test_blanking_copies_only_the_way_to_the_blanked_strings() -> None:
    big = conversation(60)
    state = {"nodes": [{"id": f"m{i}", "content": [{"type": "text", "text": big if i % 7 == 0 else "short"}]} for i in range(30)], "n": 1}
    found: list[tuple[tuple[str | int, ...], str]] = []
    texts._find_large(state, (), found)
    paths = {path for path, _ in found}
    blanked = texts._blank(state, paths)
    expected = {"nodes": [{"id": f"m{i}", "content": [{"type": "text", "text": "" if i % 7 == 0 else "short"}]} for i in range(30)], "n": 1}
    assert blanked == expected and state["nodes"][0]["content"][0]["text"] == big  # the original is untouched
    assert blanked["nodes"][1] is state["nodes"][1] and blanked["nodes"][0] is not state["nodes"][0]
    assert texts._blank(big, {()}) == ""


# -- the write path's CPU (issue 16) --------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# A v1 payload and a part as the code before issue 16 wrote them (level 6, 32 KiB window, memLevel
# 9 for payloads): rows already stored must read back whatever the writer's settings now are.
_V1_TEXT = (
    '{"turnId":"turn_1","stepId":"step_1","messageId":"msg_1","content":[{"type":"text",'
    '"text":"她把灯芯剪短，雾又浓了。The bell is silent."}],"finishReason":"stop"}'
)
_V1_BYTES = bytes.fromhex(
    "01ab46cbca861879d9104b66068911ccab4f97ee7cd6d5f5bc71fd8baef54f3b573d9fbff6fd9e9e97b3f73dedef"
    "78b675f2935d6d8f1b9a423252158069234721b358a1383307689e1e38c3614bc8b50022edf537"
)
_OLD_PART = bytes.fromhex("789c2b482c2a512849ad28e12a18658db2a8c602005aa3dae9")


def test_rows_written_before_the_smaller_windows_still_read_back() -> None:
    assert texts.decompress_payload(_V1_BYTES, where="s#1") == _V1_TEXT
    assert zlib.decompress(_OLD_PART).decode("utf-8") == "part text\n" * 60
    stored = {7: _OLD_PART}
    column = json.dumps([[["t"], sha256_text("part text\n" * 60), [7]]])
    assert reassemble({"t": ""}, column, stored, where="s#1") == {"t": "part text\n" * 60}


_JSONISH = st.lists(
    st.sampled_from(['{"', '":"', '","', "turn_", "msg_", "灯塔", "雾", "the bell ", "\\n", "0", "9", "é", "\U0001f56f"]), max_size=120
).map("".join)


@given(_JSONISH, st.integers(min_value=1, max_value=200))
@settings(max_examples=150, deadline=None)
def test_payloads_compressed_with_a_window_their_size_decode_with_the_v1_reader(piece: str, times: int) -> None:
    """The window is chosen by the payload's size (up to 32 KiB, then the largest): the bytes are
    still the v1 format, raw deflate with the v1 dictionary, which the reader inflates with its
    32 KiB window; and compressing pays as it did with the full window."""
    text = piece * times
    packed = texts.compress_payload(text)
    raw = text.encode("utf-8")
    full = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, texts._PAYLOAD_DICT_V1)
    full_size = 1 + len(full.compress(raw) + full.flush()) + 4
    if packed is None:
        assert len(raw) < texts.MIN_COMPRESSED_BYTES or full_size >= len(raw) * 0.9 * 0.98
    else:
        assert packed[0] == texts._PAYLOAD_V1 and texts.decompress_payload(packed, where="s#1") == text
        assert len(packed) <= full_size * 1.02 + 8


@given(_JSONISH, st.integers(min_value=0, max_value=120))
@settings(max_examples=100, deadline=None)
def test_parts_compressed_with_a_window_their_size_read_back(piece: str, times: int) -> None:
    text = piece * times
    assert zlib.decompress(texts.compress(text)).decode("utf-8") == text


_LINES = ["a\n", "fact 1: the bell\n", "\n", "\r", "\r\n", "长句子。" * 40 + "\n", "y" * 5000, "\x1c", "[User]\n", "x" * 300 + "\n"]


@given(
    st.lists(st.sampled_from(_LINES), min_size=0, max_size=300),
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**6),
            st.integers(min_value=0, max_value=40),
            st.lists(st.sampled_from(_LINES), max_size=12),
        ),
        max_size=4,
    ),
    st.lists(st.sampled_from(_LINES), max_size=20),
    st.integers(min_value=0, max_value=20),
)
@settings(max_examples=300, deadline=None)
def test_runs_of_a_recent_texts_parts_equal_the_full_split(
    lines: list[str], edits: list[tuple[int, int, list[str]]], tail: list[str], dropped: int
) -> None:
    """The next text drops some leading lines (a sliding window), replaces some runs of lines
    and appends some: wherever it goes on with a recent text's parts they are reused as runs, and
    the split is exactly the full one."""
    import random

    texts._recent_splits = []
    old_min = texts._RECENT_MIN_CHARS
    texts._RECENT_MIN_CHARS = 1
    try:
        texts.hashed_parts("".join(lines))
        new = list(lines[dropped:])
        for at, removed, added in edits:
            at = at % (len(new) + 1)
            new[at : at + removed] = added
        new += tail
        text = "".join(new)
        assert texts.hashed_parts(text) == [(p, sha256_text(p)) for p in texts._split(text)]
        again = text[: random.Random(len(text)).randint(0, len(text))] + "\n" + text
        assert texts.hashed_parts(again) == [(p, sha256_text(p)) for p in texts._split(again)]
    finally:
        texts._RECENT_MIN_CHARS = old_min
        texts._recent_splits = []


def _prompt(first: int, last: int, state: int) -> str:
    head = "preset line of the declaration, long enough to matter\n" * 80
    body = "".join(
        f"[User]\nI walk to pier {i} and ask about the wreck.\n\n[Writing reply]\nThe keeper answers, line {i}. "
        + "The lantern swings. " * 20
        + "\n\n"
        for i in range(first, last)
    )
    return head + f"<state>\ntrust {state}\n</state>\n" + body + "<input>\nnext\n</input>\n"


def test_a_prompt_that_mostly_repeats_the_last_costs_lookups_by_its_changes_not_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state section changes, the oldest exchange drops out and a new one comes in: the parts
    cut afresh and the lookups of known parts are as many for a story four times as long (the
    rest is matched as runs of the previous prompt's parts)."""

    class CountingDict(dict):  # type: ignore[type-arg]
        lookups = 0

        def get(self, key, default=None):  # type: ignore[no-untyped-def]
            CountingDict.lookups += 1
            return super().get(key, default)

    work = []
    real_next_part = texts._next_part
    for exchanges in (300, 1200):
        monkeypatch.setattr(texts, "_recent_splits", [])
        monkeypatch.setattr(texts, "_known", CountingDict())
        monkeypatch.setattr(texts, "_known_chars", 0)
        fresh: list[int] = []
        monkeypatch.setattr(texts, "_next_part", lambda text, pos: fresh.append(pos) or real_next_part(text, pos))
        texts.hashed_parts(_prompt(0, exchanges, 40))
        CountingDict.lookups, fresh[:] = 0, []
        after = _prompt(1, exchanges + 1, 41)
        assert texts.hashed_parts(after) == [(p, sha256_text(p)) for p in texts._split(after)]
        assert len(texts._split(after)) > exchanges / 4
        work.append((len(fresh), CountingDict.lookups))
    assert work[0] == work[1] and work[0][1] < 20, work


@given(st.lists(st.sampled_from([*_LINES, "\x0b", "\u2028", "\r\r\n", "w" * 4095, "v" * 4097 + "\n", "u" * 500]), max_size=200))
@settings(max_examples=300, deadline=None)
def test_parts_cut_one_at_a_time_skipping_short_lines_equal_the_full_split(units: list[str]) -> None:
    text = "".join(units)
    parts, pos = [], 0
    while pos < len(text):
        parts.append(texts._next_part(text, pos))
        pos += len(parts[-1])
    assert parts == texts._split(text)
