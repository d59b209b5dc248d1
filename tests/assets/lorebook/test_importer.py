"""Importer: the real corpus, every field age, card books, ids, limits, and garbage input."""

from __future__ import annotations

import base64
import json
import struct
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.assets.lorebook import (
    ChatMessage,
    ImportLimits,
    LoreEngine,
    ScanSettings,
    Slot,
    TurnInput,
    classify_slot,
    import_lorebook,
    parse_lorebook,
)
from roleplay.errors import RpError, ValidationError


def load(corpus_dir: Path, name: str):
    data = (corpus_dir / "lorebooks" / name).read_bytes()
    return parse_lorebook(data, book_id=name), json.loads(data)


def card_chunks(path: Path) -> dict[str, dict]:
    """Decode the tEXt ``chara``/``ccv3`` payloads of a PNG card (test helper, stdlib only)."""
    data, pos, out = path.read_bytes(), 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"tEXt":
            key, value = body.split(b"\0", 1)
            if key in (b"chara", b"ccv3"):
                out[key.decode()] = json.loads(base64.b64decode(value))
    return out


# --------------------------------------------------------------------------- corpus


def test_eldoria_legacy_2023_is_default_filled(corpus_dir):
    book, raw = load(corpus_dir, "Eldoria.2023-legacy.json")
    assert book.source_format == "st-world-info" and book.warnings == ()
    assert [e.id for e in book.entries] == ["0", "1", "2", "3"]
    e = book.entry("0")
    assert e.keys == ("eldoria", "wood", "forest", "magical forest")
    # Fields absent from the ten-field 2023 schema get ST's template defaults.
    assert (e.selective_logic, e.probability, e.use_probability, e.depth, e.group_weight) == (0, 100, True, 4, 100)
    assert (e.sticky, e.cooldown, e.delay, e.delay_until_recursion, e.scan_depth) == (0, 0, 0, 0, None)
    assert e.slot is Slot.WORLD_DESCRIPTION and e.raw == raw["entries"]["0"]
    assert set(e.raw) == {"uid", "key", "keysecondary", "comment", "content", "constant", "selective", "order", "position", "disable"}


def test_eldoria_2024_legacy_types(corpus_dir):
    book, raw = load(corpus_dir, "Eldoria.json")
    legacy, _ = load(corpus_dir, "Eldoria.2023-legacy.json")
    assert len(book.entries) == 4
    for e in book.entries:
        assert raw["entries"][e.id]["role"] is None and e.role == 0
        assert raw["entries"][e.id]["delayUntilRecursion"] is False and e.delay_until_recursion == 0
        assert "selectiveLogic" not in raw["entries"][e.id] and e.selective_logic == 0
    assert [e.keys for e in book.entries] == [e.keys for e in legacy.entries]
    assert book.entry("0").fingerprint != legacy.entry("0").fingerprint
    assert "{{user}}" in book.entry("0").content


def test_eorzea_selective_logic_and_positions(corpus_dir):
    book, _ = load(corpus_dir, "Eorzea.json")
    assert len(book.entries) == 29
    assert Counter(e.selective_logic for e in book.entries) == {0: 27, 1: 1, 2: 1}
    assert Counter(e.slot for e in book.entries) == {Slot.WORLD_DESCRIPTION: 28, Slot.IMPORTANT_RULES: 1}
    assert book.entry("0").keys == ("Ascians", "Paragons", "Bringers of Chaos")


def test_gi_core_large_book_and_activation(corpus_dir):
    book, raw = load(corpus_dir, "GI-Core.json")
    assert len(book.entries) == 256 and len({e.id for e in book.entries}) == 256
    assert Counter(e.position for e in book.entries) == {0: 229, 1: 1, 2: 5, 3: 21}
    assert Counter(e.slot for e in book.entries) == {Slot.WORLD_DESCRIPTION: 229, Slot.IMPORTANT_RULES: 26, Slot.CHARACTER_DESCRIPTIONS: 1}
    assert sum(e.exclude_recursion for e in book.entries) == sum(bool(v["excludeRecursion"]) for v in raw["entries"].values())
    rex = book.entry("0")
    assert rex.comment == "Rex Lapis" and rex.slot is Slot.IMPORTANT_RULES  # position 3 = AN bottom
    result = LoreEngine([book]).activate(TurnInput(run_id="r", messages=[ChatMessage("I met Zhongli.", "User")]))
    decision = result.explain(book.id, "0")
    assert decision.activated and decision.details["key"] == "Zhongli"


def test_hsr_mixed_schema_ages(corpus_dir):
    book, raw = load(corpus_dir, "HSR.json")
    assert len(book.entries) == 251
    missing = [k for k, v in raw["entries"].items() if "selectiveLogic" not in v]
    assert len(missing) == 8 and all(book.entry(k).selective_logic == 0 for k in missing)
    assert Counter(e.slot for e in book.entries) == {Slot.WORLD_DESCRIPTION: 194, Slot.CHARACTER_DESCRIPTIONS: 6, Slot.IMPORTANT_RULES: 51}
    flagged = {k for k, v in raw["entries"].items() if v.get("matchCharacterDescription")}
    assert {e.id for e in book.entries if "character_description" in e.match_sources} == flagged
    sizes = Counter(len(e.raw) for e in book.entries)
    assert set(sizes) == {31, 32, 37, 38}


def test_every_corpus_lorebook_imports_and_activates(corpus_dir):
    for path in sorted((corpus_dir / "lorebooks").glob("*.json")):
        book = parse_lorebook(path.read_bytes(), book_id=path.name)
        assert book.entries and all(e.id for e in book.entries)
        engine = LoreEngine([book], ScanSettings(scan_depth=4))
        text = " ".join(e.keys[0] for e in book.entries[:5] if e.keys)
        result = engine.activate(TurnInput(run_id="r", messages=[text]))
        assert len(result.report()) == len(book.entries)


# --------------------------------------------------------------------------- card books


def test_seraphina_v2_and_v3_character_books(corpus_dir):
    chunks = card_chunks(corpus_dir / "cards" / "default_Seraphina.png")
    v2 = import_lorebook(chunks["chara"], book_id="s2")
    v3 = import_lorebook(chunks["ccv3"], book_id="s3")
    world, _ = load(corpus_dir, "Eldoria.json")
    assert (v2.source_format, v3.source_format) == ("character-book-v2", "character-book-v3")
    assert v2.name == v3.name == "Eldoria"
    assert [e.keys for e in v2.entries] == [e.keys for e in world.entries]
    assert [e.content for e in v3.entries] == [e.content for e in world.entries]
    e = v2.entry("0")
    assert e.raw["use_regex"] is True and e.position == 0 and e.slot is Slot.WORLD_DESCRIPTION
    assert e.selective and not e.disabled and e.order == 100
    # use_regex on plain keys is ignored like ST: "eldoria" still matches as a word.
    result = LoreEngine([v2]).activate(TurnInput(run_id="r", messages=["Welcome to Eldoria"]))
    assert "0" in [a.entry_id for a in result.activated]


def test_sakana_after_char_book(corpus_dir):
    chunks = card_chunks(corpus_dir / "cards" / "contest_Assistant_Sakana.png")
    book = import_lorebook(chunks["chara"], book_id="sakana")
    assert len(book.entries) == 14 and book.source_format == "character-book-v2"
    assert {e.slot for e in book.entries} == {Slot.CHARACTER_DESCRIPTIONS}
    assert book.entry("0").keys[:3] == ("program", "code", "create")


def test_chinese_mvu_card_book(corpus_dir):
    chunks = card_chunks(corpus_dir / "cards" / "呕吐内心的少女_头像.png")
    book = import_lorebook(chunks["ccv3"], book_id="zh")
    raw_entries = chunks["ccv3"]["data"]["character_book"]["entries"]
    assert len(book.entries) == 16
    assert [e.id for e in book.entries] == [str(r["id"]) for r in raw_entries]
    assert [e.disabled for e in book.entries] == [not r["enabled"] for r in raw_entries]
    first = book.entry(str(raw_entries[0]["id"]))
    assert first.comment == "===变量开始===" and first.sticky == 0 and first.vectorized is True
    assert first.extensions["outlet_name"] == "" and first.triggers == ()


# --------------------------------------------------------------------------- shapes & ids


def test_card_mapping_defaults_and_extensions():
    book = import_lorebook(
        {
            "entries": [
                {
                    "keys": ["a"],
                    "content": "x",
                    "insertion_order": 5,
                    "position": "before_char",
                    "secondary_keys": ["b"],
                    "extensions": {"position": 4, "depth": 2, "role": 1, "sticky": 3, "group": "g", "exclude_recursion": True},
                },
                {"keys": ["c"], "content": "y", "case_sensitive": True, "selective": True},
            ]
        },
        book_id="c",
    )
    a, c = book.entries
    assert (a.id, c.id) == ("0", "1")  # no ids: array index, as ST
    assert (a.position, a.slot, a.depth, a.role, a.sticky, a.group) == (4, Slot.IMPORTANT_RULES, 2, 1, 3, "g")
    assert a.selective is False and a.exclude_recursion and a.order == 5
    assert c.position == 1 and c.case_sensitive is True and c.order == 100  # absent position: after
    codes = Counter(w.code for w in book.warnings)
    assert codes == {"lore.entry.enabled_missing": 2, "lore.entry.order_missing": 1}
    assert not c.disabled


def test_whole_card_and_lorebook_v3_wrappers():
    inner = {
        "name": "Book",
        "scan_depth": 3,
        "entries": [{"id": 7, "keys": ["k"], "content": "v", "enabled": True, "insertion_order": 1, "use_regex": False, "extensions": {}}],
    }
    card = import_lorebook({"spec": "chara_card_v3", "data": {"character_book": inner}}, book_id="x")
    wrapped = import_lorebook({"spec": "lorebook_v3", "data": inner}, book_id="y")
    assert card.entries[0].id == wrapped.entries[0].id == "7"
    assert card.name == "Book" and card.hints == {"scan_depth": 3}
    with pytest.raises(ValidationError) as err:
        import_lorebook({"spec": "chara_card_v2", "data": {"name": "n"}}, book_id="x")
    assert err.value.code == "lore.card.no_book" and err.value.pointer == "/data/character_book"


def test_ids_unique_stable_and_derived_for_duplicates():
    entry = {"key": ["a"], "content": "same"}
    book = import_lorebook(
        {
            "entries": {
                "0": {"uid": 5, **entry},
                "1": {"uid": 5, "key": ["b"], "content": "other"},
                "2": {"uid": 9, **entry},
                "x": {**entry},
                "y": {**entry},
            }
        },
        book_id="d",
    )
    ids = [e.id for e in book.entries]
    assert len(set(ids)) == 5 and ids[2] == "9"
    assert all(i.startswith("h") for i in ids[:2])
    assert ids[3].startswith("h") and ids[4] == ids[3] + "-2"  # identical duplicates
    source = {"0": {"uid": 5, **entry}, "1": {"uid": 5, "key": ["b"], "content": "other"}}
    first = import_lorebook({"entries": source}, book_id="d")
    reordered = import_lorebook({"entries": dict(reversed(source.items()))}, book_id="d")
    # Derived from content, not from file order.
    assert {e.raw["key"][0]: e.id for e in first.entries} == {e.raw["key"][0]: e.id for e in reordered.entries}
    assert [e.id for e in first.entries] == ids[:2]


def test_unknown_keys_kept_and_coercions_reported():
    book = import_lorebook(
        {
            "entries": {
                "0": {
                    "uid": 0,
                    "key": ["a", 7, None],
                    "content": "c",
                    "order": "5",
                    "constant": "false",
                    "myPlugin": {"x": [1]},
                    "stateCondition": {"bad": 1},
                }
            },
            "name": "N",
            "extraTop": True,
        },
        book_id="u",
    )
    e = book.entries[0]
    assert e.keys == ("a", "7") and e.order == 5 and e.constant is False
    assert e.raw["myPlugin"] == {"x": [1]} and book.raw_top["extraTop"] is True and book.name == "N"
    assert e.state_condition == '{"bad":1}'  # kept as text so the gate fails closed
    pointers = {(w.code, w.pointer) for w in book.warnings}
    assert ("lore.entry.coerced", "/entries/0/order") in pointers
    assert ("lore.entry.coerced", "/entries/0/key/2") in pointers
    assert ("lore.entry.state_condition_type", "/entries/0/stateCondition") in pointers


@pytest.mark.parametrize(
    ("position", "slot"),
    [
        (0, Slot.WORLD_DESCRIPTION),
        (1, Slot.CHARACTER_DESCRIPTIONS),
        (2, Slot.IMPORTANT_RULES),
        (3, Slot.IMPORTANT_RULES),
        (4, Slot.IMPORTANT_RULES),
        (5, Slot.CHARACTER_DESCRIPTIONS),
        (6, Slot.CHARACTER_DESCRIPTIONS),
        (7, Slot.WORLD_DESCRIPTION),
        (42, Slot.WORLD_DESCRIPTION),
    ],
)
def test_slot_classification(position, slot):
    assert classify_slot(position) is slot


def test_explicit_slot_wins_and_unknown_position_warns():
    book = import_lorebook(
        {"entries": {"0": {"uid": 0, "position": 0, "slot": "important-rules"}, "1": {"uid": 1, "position": 42}}}, book_id="s"
    )
    assert book.entries[0].slot is Slot.IMPORTANT_RULES
    assert [w.code for w in book.warnings] == ["lore.entry.position_unknown"]


# --------------------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ([{"keywords": ["a"], "content": "x"}], "lore.format.unsupported"),
        ({"lorebookVersion": 5, "entries": []}, "lore.format.unsupported"),
        ({"type": "risu", "data": []}, "lore.format.unsupported"),
        ({"kind": "memory", "entries": []}, "lore.format.unsupported"),
        ({"name": "x"}, "lore.format.unsupported"),
        ({"entries": "nope"}, "lore.entries.invalid"),
        ({"entries": {"0": 5}}, "lore.entry.invalid"),
        ("string", "lore.format.invalid"),
    ],
)
def test_unsupported_shapes_are_rejected(value, code):
    with pytest.raises(ValidationError) as err:
        import_lorebook(value, book_id="x")
    assert err.value.code == code and err.value.pointer is not None and err.value.message


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (b"{not json", "lore.json.invalid"),
        (b'{"entries": NaN}', "lore.json.invalid"),
        (b'{"entries": {"0": {"order": 1e400}}}', "lore.json.invalid"),
        (b"\xff\xfe{}", "lore.json.encoding"),
        (b"[" * 100 + b"]" * 100, "lore.json.too_deep"),
        # Python refuses integers over 4,300 digits with a bare ValueError; found by the import fuzz.
        (b'{"entries": {"0": {"uid": 0, "order": ' + b"9" * 5000 + b"}}}", "lore.json.invalid"),
    ],
)
def test_bad_json_is_rejected(source, code):
    with pytest.raises(ValidationError) as err:
        parse_lorebook(source, book_id="x")
    assert err.value.code == code


@pytest.mark.parametrize(
    "source",
    [
        b'{"entries": {"0": {"uid": 0, "key": ["a\\ud800"], "content": "x"}}}',
        {"entries": {"0": {"uid": 0, "key": ["a\ud800"], "content": "x"}}},
    ],
)
def test_lone_surrogates_are_refused_with_a_pointer_not_a_crash(source):
    """Found by the import fuzz: the entry id hash could not encode them (UnicodeEncodeError)."""
    with pytest.raises(ValidationError) as err:
        parse_lorebook(source, book_id="x")
    assert (err.value.code, err.value.pointer) == ("lore.lone_surrogate", "/entries/0/key/0")
    assert err.value.problems[0].details == {"char": "U+D800", "offset": 1}


def test_limits_report_every_problem_with_pointers():
    with pytest.raises(ValidationError) as err:
        parse_lorebook({"entries": {str(i): {"uid": i} for i in range(3)}}, book_id="x", limits=ImportLimits(max_entries=2))
    assert (err.value.code, err.value.pointer) == ("lore.limit.entries", "/entries")
    limits = ImportLimits(max_key_chars=5, max_content_chars=10, max_keys_per_entry=3)
    with pytest.raises(ValidationError) as err:
        parse_lorebook(
            {"entries": {"0": {"uid": 0, "key": ["ok", "toolong"], "content": "x" * 11}, "1": {"uid": 1, "key": ["a", "b", "c", "d"]}}},
            book_id="x",
            limits=limits,
        )
    assert err.value.code == "lore.invalid"
    assert [(p.code, p.pointer) for p in err.value.problems] == [
        ("lore.limit.key_length", "/entries/0/key/1"),
        ("lore.limit.content_length", "/entries/0/content"),
        ("lore.limit.keys", "/entries/1/key"),
    ]
    with pytest.raises(ValidationError) as err:
        parse_lorebook(b"{}" + b" " * 100, book_id="x", limits=ImportLimits(max_source_bytes=50))
    assert err.value.code == "lore.limit.size"


# --------------------------------------------------------------------------- fuzz

_scalars = st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats() | st.text(max_size=12)
_json = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25
)
_field = st.sampled_from(
    [
        "uid",
        "key",
        "keysecondary",
        "content",
        "order",
        "position",
        "selectiveLogic",
        "probability",
        "group",
        "sticky",
        "delayUntilRecursion",
        "characterFilter",
        "scanDepth",
        "extensions",
        "enabled",
        "keys",
        "insertion_order",
        "id",
        "role",
        "caseSensitive",
        "triggers",
        "stateCondition",
        "slot",
        "groupWeight",
    ]
)
_entry = st.dictionaries(_field, _json, max_size=8)
_book = st.one_of(
    st.fixed_dictionaries({"entries": st.dictionaries(st.text(max_size=3), _entry, max_size=4)}),
    st.fixed_dictionaries({"entries": st.lists(_entry, max_size=4)}),
    st.fixed_dictionaries(
        {
            "spec": st.sampled_from(["chara_card_v2", "chara_card_v3", "lorebook_v3"]),
            "data": _json | st.fixed_dictionaries({"character_book": _json}),
        }
    ),
    _json,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_book)
def test_fuzz_garbage_only_raises_rp_error(value):
    try:
        book = parse_lorebook(value, book_id="fuzz")
    except RpError as err:
        assert err.code.startswith("lore.") and err.pointer is not None
        return
    engine = LoreEngine([book], ScanSettings(regex_total_seconds=0.2))
    result = engine.activate(TurnInput(run_id="f", messages=["a b c 1 true"], chat_length=3))
    assert len(result.report()) == len(book.entries)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_fuzz_bytes_only_raise_rp_error(source):
    try:
        parse_lorebook(source, book_id="fuzz")
    except RpError as err:
        assert err.code.startswith("lore.")
