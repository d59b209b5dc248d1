"""Activation cases mirroring SillyTavern's ``checkWorldInfo`` behaviour, one feature at a time."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.assets.lorebook import (
    ChatMessage,
    GlobalScanData,
    LoreEngine,
    ScanSettings,
    Slot,
    TurnInput,
    import_lorebook,
    parse_decorators,
    unit_roll,
)
from roleplay.errors import ValidationError


def book(*entries: dict, book_id: str = "b"):
    return import_lorebook({"entries": {str(e["uid"]): e for e in entries}}, book_id=book_id)


def E(uid: int, keys=(), content=None, **fields) -> dict:
    return {"uid": uid, "key": list(keys), "content": content if content is not None else f"c{uid}", **fields}


def fired(engine: LoreEngine, *texts: str, **turn) -> list[str]:
    result = engine.activate(TurnInput(run_id=turn.pop("run_id", "run"), messages=list(texts), **turn))
    return [a.entry_id for a in result.activated]


def run(engine: LoreEngine, *texts: str, **turn):
    return engine.activate(TurnInput(run_id=turn.pop("run_id", "run"), messages=list(texts), **turn))


# --------------------------------------------------------------------------- keys


def test_primary_key_constant_and_no_keys():
    eng = LoreEngine([book(E(0, ["dragon"]), E(1, constant=True), E(2, []))])
    result = run(eng, "A dragon appears")
    assert [a.entry_id for a in result.activated] == ["0", "1"]
    assert result.explain("b", "0").reason == "key" and result.explain("b", "0").details["key"] == "dragon"
    assert result.explain("b", "1").reason == "constant"
    assert result.explain("b", "2").reason == "no_keys"
    assert fired(eng, "nothing here") == ["1"]


def test_first_matching_key_is_reported_and_keys_are_trimmed():
    eng = LoreEngine([book(E(0, ["  wyvern ", "dragon"]))])
    result = run(eng, "a Wyvern and a dragon")
    assert result.explain("b", "0").details["key"] == "  wyvern "


def test_case_sensitivity_global_and_per_entry():
    entries = (E(0, ["Dragon"]), E(1, ["Dragon"], caseSensitive=True), E(2, ["dragon"], caseSensitive=False))
    insensitive = LoreEngine([book(*entries)])
    assert sorted(fired(insensitive, "the DRAGON")) == ["0", "2"]
    sensitive = LoreEngine([book(*entries)], ScanSettings(case_sensitive=True))
    assert sorted(fired(sensitive, "the Dragon")) == ["0", "1", "2"]
    assert fired(sensitive, "the dragon") == ["2"]  # only the entry that overrides to insensitive


def test_whole_words_follow_javascript_ascii_boundaries():
    eng = LoreEngine([book(E(0, ["cat"]), E(1, ["国王"]), E(2, ["café"]), E(3, ["#tag"]), E(4, ["sea lion"]))])
    assert fired(eng, "concatenate") == []
    assert fired(eng, "the cat.") == ["0"]
    # CJK characters are \W for JavaScript: a CJK key inside CJK text matches ...
    assert fired(eng, "我是国王的人") == ["1"]
    # ... but not when glued to an ASCII word character.
    assert fired(eng, "a国王") == []
    assert fired(eng, "cafés") == [] and fired(eng, "café!") == ["2"]
    assert fired(eng, "see #tag here") == ["3"]  # not \b: punctuation-initial keys still match
    assert fired(eng, "sea lions") == ["4"]  # keys with spaces are plain substrings


def test_whole_words_off_globally_and_per_entry():
    entries = (E(0, ["cat"]), E(1, ["cat"], matchWholeWords=True))
    eng = LoreEngine([book(*entries)], ScanSettings(match_whole_words=False))
    assert fired(eng, "concatenate") == ["0"]


def test_regex_keys_ignore_case_and_whole_word_settings():
    eng = LoreEngine([book(E(0, ["/dra+gon/"]), E(1, ["/^start/"]), E(2, ["/(unclosed/"]))], ScanSettings(case_sensitive=True))
    assert fired(eng, "draaagon") == ["0"]
    assert fired(eng, "DRAGON") == []
    # The scan text starts with \x01, so a ^ anchor never matches a message start (as in ST).
    assert fired(eng, "start here") == []
    # An invalid regex is matched as plain text, like ST's parseRegexFromString fallback.
    assert fired(eng, "literally /(unclosed/ text") == ["2"]


def test_macro_keys_are_substituted_when_a_substitute_is_given():
    eng = LoreEngine([book(E(0, ["{{char}}"]))])
    sub = lambda s: s.replace("{{char}}", "Seraphina")  # noqa: E731
    assert fired(eng, "Seraphina smiles", substitute=sub) == ["0"]
    assert fired(eng, "Seraphina smiles") == []


# --------------------------------------------------------------------------- secondary logic


@pytest.mark.parametrize(
    ("logic", "text", "expected"),
    [
        (0, "dragon fire", True),  # AND_ANY: any secondary
        (0, "dragon", False),
        (1, "dragon fire ice", False),  # NOT_ALL: fires unless all secondaries present
        (1, "dragon fire", True),
        (2, "dragon", True),  # NOT_ANY: fires when no secondary present
        (2, "dragon ice", False),
        (3, "dragon fire ice", True),  # AND_ALL
        (3, "dragon fire", False),
    ],
)
def test_secondary_logic(logic, text, expected):
    eng = LoreEngine([book(E(0, ["dragon"], keysecondary=["fire", "ice"], selectiveLogic=logic))])
    result = run(eng, text)
    assert (result.activated != ()) is expected
    decision = result.explain("b", "0")
    assert decision.details["secondary"]["passed"] is expected
    assert decision.reason == ("key" if expected else "secondary")


def test_secondary_keys_ignored_when_not_selective_and_unknown_logic_never_passes():
    eng = LoreEngine(
        [book(E(0, ["dragon"], keysecondary=["ice"], selective=False), E(1, ["dragon"], keysecondary=["ice"], selectiveLogic=9))]
    )
    assert fired(eng, "dragon ice") == ["0"]


# --------------------------------------------------------------------------- scan depth / buffer


def test_scan_depth_global_and_per_entry_and_names():
    eng = LoreEngine([book(E(0, ["old"]), E(1, ["old"], scanDepth=3), E(2, ["Alice"]), E(3, ["old"], scanDepth=0))])
    msgs = [ChatMessage("old news", "Bob"), ChatMessage("hello", "Alice"), ChatMessage("bye", "Bob")]
    result = eng.activate(TurnInput(run_id="r", messages=msgs))
    assert sorted(a.entry_id for a in result.activated) == ["1", "2"]  # names are scanned too
    no_names = LoreEngine(eng.books, ScanSettings(include_names=False))
    assert sorted(a.entry_id for a in no_names.activate(TurnInput(run_id="r", messages=msgs)).activated) == ["1"]


def test_match_sources_and_injections_extend_the_scan_text():
    eng = LoreEngine([book(E(0, ["elves"], matchPersonaDescription=True), E(1, ["elves"]), E(2, ["note"]))])
    result = run(eng, "hi", global_scan_data=GlobalScanData(persona_description="I hate elves"), injections=["author note"])
    assert sorted(a.entry_id for a in result.activated) == ["0", "2"]


# --------------------------------------------------------------------------- recursion


def test_recursion_exclude_and_prevent():
    eng = LoreEngine(
        [
            book(
                E(0, ["king"], "The king has a sword."),
                E(1, ["sword"], "The sword is old."),
                E(2, ["sword"], "Excluded.", excludeRecursion=True),
                E(3, ["queen"], "The queen has a sword.", preventRecursion=True),
            )
        ]
    )
    result = run(eng, "the king")
    assert [(a.entry_id, a.sweep) for a in result.activated] == [("0", 1), ("1", 2)]
    assert result.explain("b", "2").reason == "exclude_recursion"
    assert fired(eng, "the queen") == ["3"]  # its content does not recurse
    flat = LoreEngine(eng.books, ScanSettings(recursive=False))
    assert fired(flat, "the king") == ["0"]


def test_delay_until_recursion_levels():
    eng = LoreEngine(
        [
            book(
                E(0, ["start"], "alpha"),
                E(1, ["alpha"], "beta", delayUntilRecursion=1),
                E(2, ["alpha"], "gamma", delayUntilRecursion=2),
                E(3, ["start"], "x", delayUntilRecursion=True),
            )
        ]
    )
    result = run(eng, "start")
    # Level 2 opens only once recursion at level 1 has nothing left to activate.
    assert [(a.entry_id, a.sweep) for a in result.activated] == [("0", 1), ("1", 2), ("3", 2), ("2", 4)]
    assert result.explain("b", "2").sweep == 4
    # ST opens the remaining delayed level even when recursion is off; the first level is
    # pre-selected at the start, so both levels become eligible together in sweep 2.
    flat = LoreEngine(eng.books, ScanSettings(recursive=False))
    assert [(a.entry_id, a.sweep) for a in run(flat, "start").activated] == [("0", 1), ("1", 2), ("2", 2), ("3", 2)]


def test_max_recursion_steps_caps_sweeps():
    entries = [E(i, [f"w{i}"], f"w{i + 1}") for i in range(6)]
    eng = LoreEngine([book(*entries)], ScanSettings(max_recursion_steps=2))
    result = run(eng, "w0")
    assert result.sweeps == 2 and [a.entry_id for a in result.activated] == ["0", "1"]
    assert len(fired(LoreEngine([book(*entries)]), "w0")) == 6


def test_min_activations_widens_scan_depth():
    eng = LoreEngine([book(E(0, ["ancient"]))], ScanSettings(scan_depth=1, min_activations=1))
    assert fired(eng, "ancient words", "a", "b") == ["0"]
    # ST compares the depth with the cap *before* widening, so the last sweep scans cap + 1.
    capped = LoreEngine(eng.books, ScanSettings(scan_depth=1, min_activations=1, min_activations_depth_max=1))
    result = run(capped, "ancient words", "a", "b")
    assert result.activated == () and result.sweeps == 2


# --------------------------------------------------------------------------- inclusion groups


def test_group_weighted_roll_is_seeded_and_weights_matter():
    entries = [E(i, ["tavern"], group="mood", groupWeight=w) for i, w in enumerate([1, 1, 1000])]
    eng = LoreEngine([book(*entries)], ScanSettings(recursive=False))
    winners = [fired(eng, "tavern", run_id=f"r{i}") for i in range(40)]
    assert all(len(w) == 1 for w in winners)
    assert sum(w == ["2"] for w in winners) >= 36
    assert fired(eng, "tavern", run_id="r7") == fired(eng, "tavern", run_id="r7")
    result = run(eng, "tavern", run_id="r1")
    losers = [d for d in result.report() if d.reason == "group_roll"]
    assert len(losers) == 2 and losers[0].details["group"] == "mood"
    expected_roll = unit_roll("group", "r1", "mood", 1) * 1002
    assert losers[0].details["roll"] == pytest.approx(expected_roll)


def test_group_override_picks_highest_order_and_multi_group_entries():
    eng = LoreEngine(
        [
            book(
                E(0, ["x"], group="g", groupOverride=True, order=10),
                E(1, ["x"], group="g", groupOverride=True, order=50),
                E(2, ["x"], group="g"),
                E(3, ["x"], group="h, g2"),
            )
        ],
        ScanSettings(recursive=False),
    )
    result = run(eng, "x")
    assert sorted(a.entry_id for a in result.activated) == ["1", "3"]
    assert result.explain("b", "0").reason == "group_priority"


def test_group_scoring_keeps_best_matches():
    eng = LoreEngine(
        [
            book(
                E(0, ["sword"], group="g"),
                E(1, ["sword", "shield"], group="g"),
                E(2, ["sword", "shield"], group="g", keysecondary=["helm"], selectiveLogic=0),
            )
        ],
        ScanSettings(use_group_scoring=True),
    )
    result = run(eng, "sword shield helm")
    assert [a.entry_id for a in result.activated] == ["2"]
    assert result.explain("b", "0").reason == "group_score"
    per_entry = LoreEngine(
        [book(E(0, ["sword"], group="g", useGroupScoring=True), E(1, ["sword", "shield"], group="g", useGroupScoring=True))]
    )
    assert fired(per_entry, "sword shield") == ["1"]


def test_group_already_activated_in_earlier_sweep_blocks_later_members():
    eng = LoreEngine([book(E(0, ["a"], "b", group="g"), E(1, ["b"], group="g"))])
    result = run(eng, "a")
    assert [a.entry_id for a in result.activated] == ["0"]
    assert result.explain("b", "1").reason == "group_already_active"


# --------------------------------------------------------------------------- probability


def test_probability_roll_is_seeded_by_run_book_and_entry():
    eng = LoreEngine([book(E(0, ["x"], probability=50))])
    outcomes = {f"r{i}": bool(fired(eng, "x", run_id=f"r{i}")) for i in range(60)}
    assert 15 < sum(outcomes.values()) < 45
    for run_id, hit in outcomes.items():
        roll = unit_roll("probability", run_id, "b", "0") * 100
        assert hit is (roll <= 50)
        assert bool(fired(eng, "x", run_id=run_id)) is hit
    miss = next(r for r, hit in outcomes.items() if not hit)
    decision = run(eng, "x", run_id=miss).explain("b", "0")
    assert decision.reason == "probability" and decision.details["probability"] == 50
    never = LoreEngine([book(E(0, ["x"], probability=0, useProbability=False))])
    assert fired(never, "x") == ["0"]  # useProbability off: no roll


# --------------------------------------------------------------------------- timed effects


def test_sticky_keeps_entry_active_then_cooldown_blocks_it():
    eng = LoreEngine([book(E(0, ["storm"], sticky=2, cooldown=2))])
    r1 = run(eng, "storm", chat_length=1)
    assert [a.entry_id for a in r1.activated] == ["0"]
    r2 = run(eng, "calm", chat_length=2, timed_state=r1.timed_state)
    assert [a.reason for a in r2.activated] == ["sticky"]
    r3 = run(eng, "storm", chat_length=3, timed_state=r2.timed_state)
    # Sticky ended at 3 -> a protected cooldown starts immediately.
    assert r3.activated == () and r3.explain("b", "0").reason == "cooldown"
    r5 = run(eng, "storm", chat_length=5, timed_state=r3.timed_state)
    assert [a.entry_id for a in r5.activated] == ["0"]


def test_swipe_without_chat_advance_drops_fresh_sticky():
    eng = LoreEngine([book(E(0, ["storm"], sticky=3))])
    r1 = run(eng, "storm", chat_length=4)
    regen = run(eng, "calm", chat_length=4, timed_state=r1.timed_state)
    assert regen.activated == ()


def test_delay_and_dry_run():
    eng = LoreEngine([book(E(0, ["x"], delay=3), E(1, ["x"], sticky=5))])
    assert fired(eng, "x", chat_length=2) == ["1"]
    result = run(eng, "x", chat_length=3)
    assert sorted(a.entry_id for a in result.activated) == ["0", "1"]
    dry = run(eng, "x", chat_length=3, dry_run=True)
    assert dry.timed_state == dry.timed_state.__class__()
    assert run(eng, "x", chat_length=1).explain("b", "0").reason == "delay"


# --------------------------------------------------------------------------- state gate


def test_state_condition_gate_fails_closed():
    eng = LoreEngine(
        [
            book(
                E(0, ["x"], stateCondition="state('story','/day') > 3"),
                E(1, ["x"]),
                E(2, constant=True, stateCondition="exists('story','/flag')"),
            )
        ]
    )
    seen: list[str] = []

    def gate(expr: str):
        seen.append(expr)
        return {"state('story','/day') > 3": True, "exists('story','/flag')": False}[expr]

    result = run(eng, "x", state_condition=gate)
    assert sorted(a.entry_id for a in result.activated) == ["0", "1"]
    assert result.explain("b", "2").reason == "state_condition"
    unavailable = run(eng, "x")
    assert [a.entry_id for a in unavailable.activated] == ["1"]
    assert unavailable.explain("b", "0").reason == "state_unavailable"
    none_result = run(eng, "x", state_condition=lambda expr: None)
    assert none_result.explain("b", "2").reason == "state_unavailable"


# --------------------------------------------------------------------------- misc gates


def test_disabled_decorators_triggers_character_filter_and_forced():
    eng = LoreEngine(
        [
            book(
                E(0, ["x"], disable=True),
                E(1, [], "@@activate\nalways"),
                E(2, ["x"], "@@dont_activate\nnever"),
                E(3, ["x"], triggers=["continue"]),
                E(4, ["x"], characterFilter={"names": ["Seraphina"], "tags": [], "isExclude": False}),
                E(5, ["zzz"]),
            )
        ]
    )
    result = run(eng, "x", character_name="Bob", forced=frozenset({("b", "5")}))
    assert sorted(a.entry_id for a in result.activated) == ["1", "5"]
    assert result.explain("b", "1").reason == "decorator"
    assert next(a for a in result.activated if a.entry_id == "1").content == "always"
    reasons = {k: result.explain("b", k).reason for k in "0234"}
    assert reasons == {"0": "disabled", "2": "dont_activate", "3": "trigger", "4": "character_filter"}
    assert "3" in fired(eng, "x", generation_type="continue")
    assert "4" in fired(eng, "x", character_name="Seraphina")


def test_parse_decorators_matches_st_rules():
    assert parse_decorators("@@activate\nbody") == (("@@activate",), "body")
    assert parse_decorators("@@unknown\n@@@activate\ntext") == (("@@activate",), "text")
    assert parse_decorators("@@@activate\ntext") == ((), "text")
    assert parse_decorators("plain @@activate") == ((), "plain @@activate")


# --------------------------------------------------------------------------- budget


def test_budget_off_by_default_and_ignore_budget_when_set():
    entries = [E(i, ["x"], "y" * 40, order=100 - i) for i in range(3)] + [E(9, ["x"], "z" * 40, order=1, ignoreBudget=True)]
    assert len(fired(LoreEngine([book(*entries)]), "x")) == 4
    eng = LoreEngine([book(*entries)], ScanSettings(budget=100, recursive=False))
    result = run(eng, "x")
    assert [a.entry_id for a in result.activated] == ["0", "1", "9"]
    assert result.budget_overflowed and result.explain("b", "2").reason == "budget"


# --------------------------------------------------------------------------- ordering & slots


def test_scan_order_ties_by_uid_and_slot_layout():
    b1 = book(
        E(5, ["x"], position=0, order=10),
        E(2, ["x"], position=0, order=10),
        E(7, ["x"], position=1),
        E(3, ["x"], position=4),
        E(8, ["x"], position=7, outletName="o"),
        book_id="b1",
    )
    b2 = book(E(1, ["x"], position=0, order=1), book_id="b2")
    result = LoreEngine([b1, b2]).activate(TurnInput(run_id="r", messages=["x"]))
    assert [a.entry_id for a in result.activated] == ["3", "7", "8", "2", "5", "1"]
    slots = result.slots()
    # binding order first, then ascending order; equal orders in reverse activation order (ST).
    assert [a.entry_id for a in slots[Slot.WORLD_DESCRIPTION]] == ["5", "2", "1"]
    assert [a.entry_id for a in slots[Slot.CHARACTER_DESCRIPTIONS]] == ["7"]
    assert [a.entry_id for a in slots[Slot.IMPORTANT_RULES]] == ["3"]
    assert [a.entry_id for a in result.outlets()["o"]] == ["8"]


def test_evenly_strategy_merges_books_by_order():
    b1 = book(E(0, ["x"], order=1), book_id="b1")
    b2 = book(E(0, ["x"], order=9), book_id="b2")
    result = LoreEngine([b1, b2], ScanSettings(strategy="evenly")).activate(TurnInput(run_id="r", messages=["x"]))
    assert [a.book_id for a in result.activated] == ["b2", "b1"]
    with pytest.raises(ValidationError) as err:
        ScanSettings(strategy="random")
    assert err.value.code == "lore.settings.invalid"
    with pytest.raises(ValidationError) as dup:
        LoreEngine([b1, b1])
    assert dup.value.code == "lore.books.duplicate"


def test_same_input_same_result_every_run():
    entries = [
        E(i, [f"k{i % 7}"], f"k{(i + 1) % 7} text", probability=60, group=f"g{i % 3}", sticky=i % 2, cooldown=i % 3) for i in range(40)
    ]
    eng = LoreEngine([book(*entries)])
    turn = TurnInput(run_id="fixed", messages=["k1 k2 k3", "k4"], chat_length=5)
    first = eng.activate(turn)
    for _ in range(5):
        again = LoreEngine([book(*entries)]).activate(turn)
        assert [(a.entry_id, a.reason, a.sweep) for a in again.activated] == [(a.entry_id, a.reason, a.sweep) for a in first.activated]
        assert again.report() == first.report()
        assert again.timed_state == first.timed_state


# --------------------------------------------------------------------------- regex guard


def test_catastrophic_regex_key_is_cut_off_with_a_diagnostic():
    eng = LoreEngine(
        [book(E(0, ["/(a+)+$/"]), E(1, ["aaa"], matchWholeWords=False))], ScanSettings(regex_timeout_seconds=0.05, regex_total_seconds=0.2)
    )
    text = "a" * 50_000 + "b"
    started = time.perf_counter()
    result = run(eng, text)
    assert time.perf_counter() - started < 2.0
    assert [a.entry_id for a in result.activated] == ["1"]
    assert [d.code for d in result.diagnostics] == ["lore.regex.timeout"]
    assert result.explain("b", "0").details["regexGuard"] == [{"key": "/(a+)+$/", "code": "lore.regex.timeout"}]


def test_regex_total_budget_bounds_many_slow_keys():
    slow = [E(i, [f"/(a+)+$|z{i}/"]) for i in range(20)]  # alternation: no prefilter literal
    eng = LoreEngine([book(*slow)], ScanSettings(regex_timeout_seconds=0.05, regex_total_seconds=0.15))
    started = time.perf_counter()
    result = run(eng, "a" * 50_000 + "b")
    assert time.perf_counter() - started < 2.0
    codes = {d.code for d in result.diagnostics}
    assert codes == {"lore.regex.timeout", "lore.regex.budget_exhausted"}
    assert result.activated == ()


# --------------------------------------------------------------------------- the scan buffer


def _reference_depth_buffer(messages, include_names: bool) -> list[str]:
    """The scan buffer as it was built whole at every activation (ST's ``depthBuffer``)."""
    from roleplay.assets.lorebook.activation import MAX_SCAN_DEPTH, _message_text
    from roleplay.assets.lorebook.matching import js_trim

    texts = [_message_text(m, include_names) for m in list(messages)[::-1][:MAX_SCAN_DEPTH]]
    while texts and texts[-1] == "":
        texts.pop()
    return [js_trim(t) for t in texts]


_TEXTS = st.sampled_from(["", " ", "\u3000", "\n", "old news", " padded\t", "你好", "a\nb"])
_MESSAGES = st.one_of(_TEXTS, st.builds(ChatMessage, _TEXTS, st.sampled_from([None, "", "Bob"])))


@settings(max_examples=300, deadline=None)
@given(
    messages=st.lists(_MESSAGES, max_size=12),
    depths=st.lists(st.integers(min_value=0, max_value=15), min_size=1, max_size=4),
    include_names=st.booleans(),
    padding=st.sampled_from([0, 995, 1_100]),
)
def test_the_scan_reads_only_the_messages_it_needs_and_as_the_whole_buffer_did(messages, depths, include_names, padding):
    """The newest messages, trimmed as a scan asks for them, are the whole buffer's first ones,
    in any order of depths, with empty messages at either end, and past MAX_SCAN_DEPTH."""
    from roleplay.assets.lorebook.activation import _Scan

    history = [*(["filler"] * padding), *messages]
    engine = LoreEngine([book(E(0, ["old"]))], ScanSettings(include_names=include_names))
    scan = _Scan(engine, TurnInput(run_id="r", messages=tuple(history)), True)
    reference = _reference_depth_buffer(history, include_names)
    for depth in depths:
        assert scan._depth_texts(depth) == reference[:depth]
    assert scan.message_count == len(history)


def test_a_long_chat_is_read_from_its_newest_end_only():
    """A chat given as a sequence is indexed from its end: older messages are never read."""
    from collections.abc import Sequence

    class Chat(Sequence):
        def __init__(self, n: int) -> None:
            self.n, self.read = n, set()

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i):
            if isinstance(i, slice):
                raise AssertionError("sliced whole")
            i = range(self.n)[i]
            self.read.add(i)
            return "an old dragon" if i == self.n - 2 else f"message {i}"

    chat = Chat(100_000)
    eng = LoreEngine([book(E(0, ["dragon"]))])
    assert [a.entry_id for a in eng.activate(TurnInput(run_id="r", messages=chat)).activated] == ["0"]
    assert min(chat.read) >= chat.n - 1_000
