"""Timed effects: ST's sticky/cooldown/delay bookkeeping as pure state transitions."""

from __future__ import annotations

import pytest

from roleplay.assets.lorebook import TimedEffect, TimedState, import_lorebook
from roleplay.assets.lorebook.timed import check_timed_effects, record_activations
from roleplay.errors import ValidationError


def entries(**fields):
    book = import_lorebook({"entries": {"0": {"uid": 0, "key": ["x"], **fields}}}, book_id="b")
    return {("b", "0"): book.entries[0]}


def test_activation_records_sticky_and_cooldown_from_chat_length():
    es = entries(sticky=2, cooldown=3)
    view = check_timed_effects(TimedState(), es, 5)
    state = record_activations(view, list(es.items()), 5)
    fp = es[("b", "0")].fingerprint
    assert state == TimedState.of([TimedEffect("sticky", "b", "0", 5, 7, fp), TimedEffect("cooldown", "b", "0", 5, 8, fp)])
    active = check_timed_effects(state, es, 6)
    assert active.sticky == {("b", "0")} and active.cooldown == {("b", "0")}


def test_sticky_end_starts_protected_cooldown():
    es = entries(sticky=2, cooldown=3)
    fp = es[("b", "0")].fingerprint
    state = TimedState.of([TimedEffect("sticky", "b", "0", 5, 7, fp)])
    view = check_timed_effects(state, es, 7)
    assert view.sticky == frozenset() and view.cooldown == {("b", "0")}
    assert view.state.get("cooldown", ("b", "0")) == TimedEffect("cooldown", "b", "0", 7, 10, fp, True)
    # Protected: survives a regenerate at the same chat length.
    assert check_timed_effects(view.state, es, 7).cooldown == {("b", "0")}


def test_no_advance_edited_missing_and_unconfigured_effects():
    es = entries(sticky=4)
    fp = es[("b", "0")].fingerprint
    fresh = TimedState.of([TimedEffect("sticky", "b", "0", 5, 9, fp)])
    assert check_timed_effects(fresh, es, 5).state == TimedState()  # swipe: dropped
    edited = TimedState.of([TimedEffect("sticky", "b", "0", 5, 9, "other")])
    view = check_timed_effects(edited, es, 6)
    assert view.sticky == frozenset() and view.state == edited  # kept, not applied
    assert check_timed_effects(edited, es, 9).state == TimedState()  # expired: deleted
    gone = TimedState.of([TimedEffect("sticky", "x", "1", 5, 9, fp)])
    assert check_timed_effects(gone, es, 6).state == gone
    unconfigured = entries(sticky=0)
    fp0 = unconfigured[("b", "0")].fingerprint
    state = TimedState.of([TimedEffect("sticky", "b", "0", 5, 9, fp0)])
    assert check_timed_effects(state, unconfigured, 6).state == TimedState()


def test_delay_and_dry_run():
    es = entries(delay=3, sticky=2)
    assert check_timed_effects(TimedState(), es, 2).delay == {("b", "0")}
    assert check_timed_effects(TimedState(), es, 3).delay == frozenset()
    fp = es[("b", "0")].fingerprint
    state = TimedState.of([TimedEffect("sticky", "b", "0", 1, 5, fp)])
    dry = check_timed_effects(state, es, 2, dry_run=True)
    assert dry.sticky == frozenset() and dry.delay == {("b", "0")}
    assert record_activations(dry, list(es.items()), 2, dry_run=True) == state


def test_round_trip_and_strict_parsing():
    state = TimedState.of([TimedEffect("cooldown", "b", "1", 1, 4, "f", True), TimedEffect("sticky", "a", "0", 2, 3, "g")])
    assert TimedState.from_dict(state.to_dict()) == state
    assert [e.kind for e in state.effects] == ["cooldown", "sticky"]
    for bad in (
        {},
        {"effects": [1]},
        {"effects": [{"kind": "delay"}]},
        {"effects": [state.effects[0].to_dict(), state.effects[0].to_dict()]},
    ):
        with pytest.raises(ValidationError) as err:
            TimedState.from_dict(bad)
        assert err.value.code == "lore.timed.invalid"
