"""Large event text as content-addressed parts: cutting, round trips, corruption."""

from __future__ import annotations

import zlib

import pytest

from roleplay.errors import RpError
from roleplay.harness.store import texts
from roleplay.harness.store.texts import MAX_PART_CHARS, externalise, reassemble, sha256_text, split_parts, texts_column


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
