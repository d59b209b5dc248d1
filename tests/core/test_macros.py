"""Identity macros: SillyTavern spellings and case-insensitivity, one pass without rescanning,
unbound identities left as written, and streamed expansion equal to whole-text expansion."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roleplay.core.macros import MacroContext, MacroStream, expand, macro_context_from

CTX = MacroContext(char_name="艾琳", user_name="旅人")


def test_all_spellings_case_insensitive() -> None:
    text = "{{char}} {{CHAR}} {{Char}} <BOT> <bot> <Char> | {{user}} {{USER}} <USER> <user>"
    assert expand(text, CTX) == "艾琳 艾琳 艾琳 艾琳 艾琳 艾琳 | 旅人 旅人 旅人 旅人"


def test_near_misses_are_left_alone() -> None:
    text = "{{ char }} {char} {{chars}} <bots> <user > {{persona}} {{random::a::b}}"
    assert expand(text, CTX) == text


def test_names_are_inserted_literally_and_never_rescanned() -> None:
    tricky = MacroContext(char_name="{{user}}", user_name="<BOT>")
    assert expand("{{char}} meets {{user}}", tricky) == "{{user}} meets <BOT>"


def test_unbound_identity_keeps_its_macros() -> None:
    only_user = MacroContext(char_name=None, user_name="旅人")
    assert expand("{{char}} greets {{user}} <BOT>", only_user) == "{{char}} greets 旅人 <BOT>"
    assert expand("", CTX) == ""


def test_stream_holds_back_only_possible_macro_prefixes() -> None:
    stream = MacroStream(CTX)
    assert stream.feed("Hello {") == "Hello "
    assert stream.feed("{ch") == ""
    assert stream.feed("ar}} waves at <US") == "艾琳 waves at "
    assert stream.feed("ER>.") == "旅人."
    assert stream.feed(" a < b {") == " a < b "
    assert stream.flush() == "{"
    assert stream.flush() == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="{}<>cChaArRuUsSeEbBoOtT x", max_size=12), max_size=12))
def test_stream_equals_whole_text_expansion(chunks: list[str]) -> None:
    stream = MacroStream(CTX)
    out = "".join(stream.feed(c) for c in chunks) + stream.flush()
    assert out == expand("".join(chunks), CTX)


def test_context_from_card_and_persona_data() -> None:
    assert macro_context_from({"name": "Irene", "nickname": "艾琳"}, {"name": "旅人"}) == CTX
    assert macro_context_from({"name": "Irene", "nickname": None}, None) == MacroContext("Irene", None)
    assert macro_context_from(None, {"name": ""}) == MacroContext(None, None)


def _reference_partial_suffix(text: str) -> int:
    # The scan over the macros that the prefix set replaced (per streamed chunk).
    from roleplay.core.macros import _MACROS, _MAX_LEN

    lowered = text[-(_MAX_LEN - 1) :].lower()
    for n in range(len(lowered), 0, -1):
        tail = lowered[-n:]
        if any(len(tail) < len(m) and m.startswith(tail) for m in _MACROS):
            return n
    return 0


@given(st.text(alphabet=st.sampled_from(list("{}<>/charbotuseCHARBOTUSEİı x")), max_size=12) | st.text(max_size=12))
@settings(max_examples=500)
def test_the_held_back_tail_is_the_reference_scans(text: str) -> None:
    from roleplay.core.macros import _partial_suffix

    assert _partial_suffix(text) == _reference_partial_suffix(text)
