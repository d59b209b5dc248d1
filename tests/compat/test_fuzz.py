"""Malformed YAML / JSON / commands / templates never crash and never half-initialise state."""

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

ALPHABET = st.sampled_from(list("{}[]():;,'\"`\n\t -_.$<>%=!&|#*/\\~“”：，好感度ab01") + ["_.set(", "<%", "%>", "<initvar>", "</initvar>", "```", "<JSONPatch>", "</JSONPatch>", "$meta", "$__META_EXTENSIBLE__$", "<<: *a", "&a"])
TEXT = st.lists(ALPHABET, max_size=60).map("".join)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, TEXT, TEXT)
def test_whole_cards_always_give_a_valid_bootstrap(initvar, rules, greeting):
    card = make_card(greeting, entries=[entry("[initvar]", initvar), entry("[mvu_update]", "变量更新规则:\n" + rules)])
    report = inspect_card(card)
    for namespace in [report.namespace, *(o.namespace for o in report.openings)]:
        namespace.bootstrap()
        if namespace.status == "disabled":
            assert namespace.definition["updateMode"] == "disabled"
