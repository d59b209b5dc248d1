"""The demo model's (and the fake server's) answer to a reply-options call: the fixed JSON shape,
the guidance followed, the character named, and the story's language."""

from __future__ import annotations

import json

from roleplay.harness.models.types import ChatMessage, ModelRequest, ToolSpec
from roleplay.reply_options.demo import answer, language_of, reply_options_demo_policy, story_language
from roleplay.reply_options.generator import SYSTEM_PROMPT, Guidance, user_prompt
from roleplay.testing.fake_roleplay import roleplay_reply

CARD = (
    '<section name="Character">\nContext note: framing in English.\n\nName: 林汐\n\nDescription: '
    + "守灯人，独自守着灯塔。" * 5
    + "\n</section>"
)


def options(text: str) -> list[str]:
    value = json.loads(text)
    assert list(value) == ["options"]
    return value["options"]  # type: ignore[no-any-return]


def test_the_answer_follows_the_guidance_and_names_the_character() -> None:
    prompt = user_prompt("她没有关门。", Guidance(4, 20, ("温柔", "冲突")), context=CARD, player_input="我敲门。")
    got = options(answer(prompt))
    assert len(got) == 4 and all(len(o) <= 20 for o in got)
    assert got[0].startswith("（温柔）") and got[1].startswith("（冲突）")
    assert any("林汐" in o for o in got) and len(set(got)) == 4
    assert answer(prompt) == answer(prompt)  # the same request, the same answer


def test_the_story_language_comes_from_its_scripts() -> None:
    assert language_of("守灯人" * 20) == "zh"
    assert language_of("灯台守は一人で灯台を守っている。" * 5) == "ja"
    assert language_of("등대지기는 혼자 등대를 지킨다." * 5) == "ko"
    assert language_of("The keeper walks the stairs." * 5) == "en"
    # English framing around a short Chinese story: the player's own words decide.
    english_frame = "A long English framing text around the story. " * 20
    assert story_language(english_frame + "<player_input>\n我走进灯塔。\n</player_input>") == "zh"
    assert story_language(english_frame + "<player_input>\nI walk in.\n</player_input>") == "en"
    en = options(answer(user_prompt("The door opens.", Guidance(), player_input="I knock.")))
    assert all(o.isascii() for o in en)


def test_the_demo_policy_answers_only_reply_options_calls() -> None:
    prompt = user_prompt("她没有关门。", Guidance(), context=CARD)
    call = ModelRequest([ChatMessage("system", SYSTEM_PROMPT), ChatMessage("user", prompt)])
    assert options(reply_options_demo_policy(call)["text"])  # type: ignore[index]
    other = ModelRequest([ChatMessage("system", "You are a helpful assistant."), ChatMessage("user", prompt)])
    assert reply_options_demo_policy(other) is None
    with_tools = ModelRequest(call.messages, tools=[ToolSpec("t", "a tool", {"type": "object"})])
    assert reply_options_demo_policy(with_tools) is None


def test_the_fake_server_answers_the_call_in_json_mode() -> None:
    prompt = user_prompt("她没有关门。", Guidance(2, 80), context=CARD)
    body = {
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
        "response_format": {"type": "json_object"},
    }
    reply = roleplay_reply(body)
    assert reply is not None and options(reply["text"]) == options(answer(prompt))
