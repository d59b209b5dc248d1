"""How the offline ``demo`` model (and the fake OpenAI server) answer a reply-options call.

They read the request as a real model would: the guidance block gives the count, the character
limit and the direction keywords; the character context gives the character's name; the story's
language is the script most of the context and reply are written in (Han → Chinese, kana →
Japanese, Hangul → Korean, else English). The answer is the fixed ``{"options": [...]}`` JSON.
The same request gives the same answer: the starting template comes from a hash of the prompt.

The options are the player's own words, ready to send, so unlike the demo's narration they carry
no demo label (choosing one would otherwise put the label into the player's message).
"""

from __future__ import annotations

import json
import re
from typing import Any

from roleplay.canonical import sha256_hex
from roleplay.harness.models.types import ModelRequest

from .generator import SYSTEM_MARKER
from .normalize import cut

POLICY_NAME = "reply-options"
_GUIDANCE = re.compile(r'<guidance count="(\d+)" max_characters="(\d+)">\s*directions: (.*?)\s*</guidance>', re.S)
_PLAYER = re.compile(r"<player_input>\n(.*?)\n</player_input>", re.S)
_NAME = re.compile(r'<section name="Character">.*?^Name: *(.+?) *$', re.S | re.M)

TEMPLATES: dict[str, tuple[str, ...]] = {
    "zh": (
        "“我不是来找麻烦的。”我放低声音，向{c}走近一步。",
        "我环顾四周，想弄清刚才那阵动静是从哪里来的。",
        "“我们能坐下来慢慢谈吗？”我看着{c}问道。",
        "我沉默片刻，决定先把自己的来意说清楚。",
        "我向{c}点头致意，转身离开，打算明天再来。",
    ),
    "ja": (
        "「迷惑をかけるつもりはありません」と静かに言い、{c}に一歩近づく。",
        "辺りを見回し、さっきの物音がどこから来たのか確かめる。",
        "「少し座って話せませんか？」と{c}に尋ねる。",
        "少し黙ってから、ここへ来た理由を話すことにする。",
        "{c}に会釈して背を向け、明日また来ることにする。",
    ),
    "ko": (
        '"문제를 일으키러 온 게 아니에요." 나는 목소리를 낮추고 {c}에게 한 걸음 다가간다.',
        "나는 주위를 둘러보며 방금 그 소리가 어디서 났는지 살핀다.",
        '"앉아서 천천히 이야기할 수 있을까요?" 나는 {c}에게 묻는다.',
        "잠시 말없이 있다가 여기 온 이유를 먼저 설명하기로 한다.",
        "나는 {c}에게 고개를 숙여 인사하고, 내일 다시 오기로 한다.",
    ),
    "en": (
        '"I\'m not here to cause trouble," I say quietly, stepping closer to {c}.',
        "I look around, trying to work out where that sound came from.",
        '"Can we sit down and talk this through?" I ask {c}.',
        "I stay quiet for a moment, then explain why I came.",
        "I nod to {c} and turn to leave, meaning to come back tomorrow.",
    ),
}
KEYWORD_TEMPLATES = {
    "zh": "（{k}）我朝这个方向行动，看{c}怎么回应。",
    "ja": "（{k}）その方向に動いて、{c}の反応を見る。",
    "ko": "({k}) 나는 그 방향으로 움직이며 {c}의 반응을 살핀다.",
    "en": "({k}) I take things that way and watch how {c} responds.",
}
CJK_MARK = 40
SOMEONE = {"zh": "对方", "ja": "相手", "ko": "상대", "en": "them"}


def language_of(text: str, mark: int = CJK_MARK) -> str:
    """The language of ``text`` from its scripts: ``mark`` characters of a CJK script decide."""
    han = sum("\u4e00" <= ch <= "\u9fff" for ch in text)
    kana = sum("\u3040" <= ch <= "\u30ff" for ch in text)
    hangul = sum("\uac00" <= ch <= "\ud7a3" for ch in text)
    if hangul >= mark and hangul >= kana:
        return "ko"
    if kana >= mark or (han >= mark and kana > han // 10):
        return "ja"  # Japanese text mixes Han and kana
    return "zh" if han >= mark else "en"


def story_language(prompt: str) -> str:
    """The prompt's framing is English whatever the story, so a few dozen CJK characters in the
    context and reply mark a CJK story; a short story so far is read by the player's own input."""
    lang = language_of(prompt)
    said = _PLAYER.search(prompt)
    if lang == "en" and said:
        text = said.group(1)
        cjk = sum(not ch.isascii() and ch.isalpha() for ch in text)
        latin = sum(ch.isascii() and ch.isalpha() for ch in text)
        if cjk and cjk * 3 >= latin:
            return language_of(text, mark=1)
    return lang


def answer(user_text: str) -> str:
    """The JSON answer to one reply-options prompt."""
    found = _GUIDANCE.search(user_text)
    count, limit, keywords = 3, 80, []
    if found:
        count, limit = int(found.group(1)), int(found.group(2))
        directions = found.group(3).strip()
        keywords = [] if directions == "(none)" else [k.strip() for k in directions.split(",") if k.strip()]
    lang = story_language(user_text)
    name = _NAME.search(user_text)
    who = name.group(1) if name else SOMEONE[lang]
    picked = [KEYWORD_TEMPLATES[lang].format(k=k, c=who) for k in keywords]
    templates = TEMPLATES[lang]
    start = int(sha256_hex(user_text)[:8], 16) % len(templates)
    picked += [templates[(start + i) % len(templates)].format(c=who) for i in range(len(templates))]
    return json.dumps({"options": [cut(o, limit) for o in picked[:count]]}, ensure_ascii=False)


def reply_options_demo_policy(request: ModelRequest) -> dict[str, Any] | None:
    system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
    if SYSTEM_MARKER not in system or request.tools:
        return None
    return {"text": answer(request.messages[-1].text())}


__all__ = ["POLICY_NAME", "answer", "language_of", "reply_options_demo_policy", "story_language"]
