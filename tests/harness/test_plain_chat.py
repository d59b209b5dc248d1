from roleplay.harness.prompts import PromptContext
from roleplay.harness.plain_chat import CHAT_PRESET, CHAT_STEP_LIMIT, IDENTITY, chat_spec


def test_a_plain_chat_has_its_identity_its_step_limit_and_the_given_window() -> None:
    spec = chat_spec(context_window=4096)
    assert (spec.mode, spec.step_limit, spec.context_window) == ("chat", CHAT_STEP_LIMIT, 4096)
    assert spec.prompt.ids() == ["harness:identity"]
    assert spec.prompt.assemble(PromptContext(None, frozenset())).text == IDENTITY
    assert CHAT_PRESET == "chat"


def test_without_a_window_the_history_is_not_bounded_by_the_spec() -> None:
    assert chat_spec().context_window is None
