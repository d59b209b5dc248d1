"""Malformed YAML / JSON / commands / templates never crash and never half-initialise state.

Two layers: hypothesis properties on short token soup (derandomized, so a CI run is repeatable),
and the seeded structured fuzz of :mod:`roleplay.testing.fuzz_mvu` — nested and unbalanced tags,
unclosed fences and commands, huge repeats — through ``extract_commands``, InitVar parsing,
``parse_data``, ``clean_card_text``, templates and ``inspect_card``. It runs small here;
``RP_FUZZ_CASES``, ``RP_FUZZ_SEED`` and ``RP_FUZZ_MVU_SIZE`` (largest case, in characters) scale
it, and the bench runs it large with the speed target (the bound here only catches hangs).
"""

import os

import pytest
from compat.mvu_support import entry, make_card
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roleplay.compat.mvu import (
    extract_commands,
    inspect_card,
    parse_data,
    render_template,
)
from roleplay.compat.mvu.diagnostics import Loc
from roleplay.compat.mvu.openings import apply_commands
from roleplay.compat.mvu.schema import derive_from_data
from roleplay.state import validate_value
from roleplay.testing import fuzz_mvu
from roleplay.testing.fuzz_assets import Case

ALPHABET = st.sampled_from(
    list("{}[]():;,'\"`\n\t -_.$<>%=!&|#*/\\~“”：，好感度ab01")
    + [
        "_.set(",
        "<%",
        "%>",
        "<initvar>",
        "</initvar>",
        "```",
        "<JSONPatch>",
        "</JSONPatch>",
        "$meta",
        "$__META_EXTENSIBLE__$",
        "<<: *a",
        "&a",
    ]
)
TEXT = st.lists(ALPHABET, max_size=60).map("".join)
FAST = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
CASES = int(os.environ.get("RP_FUZZ_CASES", "60"))
SEED = int(os.environ.get("RP_FUZZ_SEED", "20261202"))
SIZE = int(os.environ.get("RP_FUZZ_MVU_SIZE", "4000"))
HANG_SECONDS = 20.0  # per case: a hang guard on a shared machine, not a speed target


@FAST
@given(TEXT)
def test_parse_chain_is_total(text):
    parsed = parse_data(text, Loc("fuzz"))
    if parsed.ok:
        assert isinstance(parsed.value, dict)
    else:
        assert parsed.value is None and parsed.diagnostics


@FAST
@given(TEXT)
def test_commands_apply_all_or_nothing(text):
    derived = derive_from_data({"好感度": [1, "d"], "a": {"$meta": {"extensible": True}, "b": 1}, "l": ["x", "$__META_EXTENSIBLE__$"]})
    commands, _problems = extract_commands(text, Loc("fuzz"))
    outcome = apply_commands(derived.value, derived.schema, derived.vwd, commands, Loc("fuzz"))
    if outcome.ok:
        assert validate_value(derived.schema, outcome.value) == []
    else:
        assert outcome.value == derived.value and outcome.records == []


@FAST
@given(TEXT)
def test_templates_render_or_refuse(text):
    result = render_template(text, {"a": 1})
    assert (result.text is not None) == result.ok
    if not result.ok:
        assert result.diagnostics


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT, TEXT)
def test_whole_cards_always_give_a_valid_bootstrap(initvar, rules, greeting):
    card = make_card(greeting, entries=[entry("[initvar]", initvar), entry("[mvu_update]", "变量更新规则:\n" + rules)])
    report = inspect_card(card)
    for namespace in [report.namespace, *(o.namespace for o in report.openings)]:
        namespace.bootstrap()
        if namespace.status == "disabled":
            assert namespace.definition["updateMode"] == "disabled"


@pytest.mark.parametrize("target", fuzz_mvu.TARGETS)
def test_structured_hostile_text_never_escapes_and_never_hangs(target):
    count = max(CASES // 3, 10)
    report = fuzz_mvu.run(
        fuzz_mvu.generate(SEED, count, (target,), max_size=SIZE), slow_seconds=HANG_SECONDS, timeout_seconds=3 * HANG_SECONDS
    )
    assert report.cases == count
    assert not report.failures, "\n".join(f.describe() for f in report.failures[:20])


def test_the_mvu_generator_is_seeded_sized_and_hostile():
    first = [(c.target, c.mutation, c.data) for c in fuzz_mvu.generate(7, 24, max_size=2000)]
    assert first == [(c.target, c.mutation, c.data) for c in fuzz_mvu.generate(7, 24, max_size=2000)]
    assert first != [(c.target, c.mutation, c.data) for c in fuzz_mvu.generate(8, 24, max_size=2000)]
    assert {t for t, _m, _d in first} == set(fuzz_mvu.TARGETS)
    assert all(len(d.decode("utf-8", "surrogatepass")) <= 2000 + 64 for _t, _m, d in first)
    big = [c.data for c in fuzz_mvu.generate(7, 60, max_size=50_000)]
    assert max(len(d) for d in big) > 20_000  # the size knob really grows the cases
    joined = b"".join(big).decode("utf-8", "surrogatepass")
    assert "<jsonpatch>```" in joined or "<JSONPatch>```" in joined or "<initvar>```" in joined


def test_the_runner_reports_escaping_errors_and_broken_invariants(monkeypatch):
    from roleplay.errors import RpError

    outcomes = iter([KeyError("boom"), RpError("mvu.x", "coded but escaping"), AssertionError("invariant"), None])

    def target(case):
        exc = next(outcomes)
        if exc is not None:
            raise exc

    monkeypatch.setattr(fuzz_mvu, "run_target", target)
    cases = [Case(i, "parse_data", "soup", b"x") for i in range(4)]
    report = fuzz_mvu.run(cases, slow_seconds=60, timeout_seconds=60)
    assert [f.kind for f in report.failures] == ["crash", "crash", "crash"]
    assert report.outcomes["ok"] == 1
