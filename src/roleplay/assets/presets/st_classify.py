"""Deterministic heuristics for the SillyTavern preset migration.

Two questions, answered from the prompt alone (no model call, no randomness, no locale):

1. **Narrative or expressive?** A *narrative* prompt tells the model what to do: framing, task,
   rules, plot handling, reasoning steps, output format. It becomes a preset field. An *expressive*
   prompt tells the model how the prose should read: style, tone, voice, rhythm, diction. It becomes
   a writing style. The rules, first match wins:

   a. SillyTavern's built-in non-marker prompts (``main``, ``nsfw``, ``jailbreak``,
      ``enhanceDefinitions``, and the legacy ``nsfwAvoidance``) are narrative: they are the task
      and framing slots.
   b. The prompt *name* is the author's own label, so it is trusted next. A name containing a
      narrative term (格式, 规则, 任务, format, rules…) is narrative; otherwise a name containing an
      expressive term (文风, 文笔, 风格, style, tone, prose…) is expressive. Narrative terms are
      checked first so a mixed name such as "文风与格式" stays in the preset: a preset field is always
      sent with the preset, while a style the user forgets to bind would silently drop the rule.
   c. Otherwise the *content* decides by counting term occurrences: expressive only when expressive
      hits are at least ``EXPRESSIVE_MIN_HITS`` and at least twice the narrative hits.
   d. Anything else is narrative (the safe default for the same reason as in b).

   Matching is on ``str.casefold()`` text; ASCII terms match on word boundaries (so "cot" does not
   match "cottage"), CJK terms as substrings.

2. **Which macros does the text use?** Every ``{{…}}`` occurrence and SillyTavern's legacy angle
   tags (``<USER>``, ``<BOT>``, ``<CHAR>``, ``<CHARIFNOTGROUP>``, ``<GROUP>``) are reported. Only the
   identity macros ``{{char}}`` and ``{{user}}`` keep working here (the macro plugin expands them
   per run from the bound card and persona); every other macro reaches the model as literal text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Responsibility = Literal["narrative", "expressive"]

BUILTIN_NARRATIVE_IDS = frozenset({"main", "nsfw", "jailbreak", "enhanceDefinitions", "nsfwAvoidance"})

NARRATIVE_NAME_TERMS = (
    "格式",
    "规则",
    "任务",
    "声明",
    "破限",
    "剧情",
    "情节",
    "思维链",
    "思考",
    "变量",
    "状态",
    "输出",
    "字数",
    "禁止",
    "防",
    "format",
    "rule",
    "rules",
    "task",
    "jailbreak",
    "plot",
    "cot",
    "chain of thought",
    "thinking",
    "reasoning",
    "output",
    "length",
    "status",
    "main",
    "system",
    "instruction",
    "instructions",
)
EXPRESSIVE_NAME_TERMS = (
    "文风",
    "文笔",
    "笔触",
    "笔法",
    "风格",
    "语气",
    "基调",
    "修辞",
    "描写",
    "style",
    "tone",
    "prose",
    "voice",
    "diction",
)
NARRATIVE_CONTENT_TERMS = (
    "剧情",
    "情节",
    "推进",
    "扮演",
    "用户",
    "{{user}}",
    "{{char}}",
    "回复",
    "输出",
    "格式",
    "字数",
    "规则",
    "禁止",
    "必须",
    "任务",
    "设定",
    "连续",
    "story",
    "plot",
    "roleplay",
    "role-play",
    "reply",
    "respond",
    "response",
    "output",
    "format",
    "rule",
    "rules",
    "must",
    "never",
    "character",
    "user",
    "task",
    "continue",
)
EXPRESSIVE_CONTENT_TERMS = (
    "文风",
    "文笔",
    "笔触",
    "句式",
    "句子",
    "修辞",
    "比喻",
    "辞藻",
    "语气",
    "基调",
    "白描",
    "描写",
    "感官",
    "节奏",
    "用词",
    "措辞",
    "视角",
    "人称",
    "prose",
    "tone",
    "style",
    "voice",
    "diction",
    "sentence",
    "sentences",
    "metaphor",
    "metaphors",
    "imagery",
    "adjective",
    "adjectives",
    "sensory",
    "rhythm",
    "pov",
    "point of view",
    "third person",
    "first person",
)
EXPRESSIVE_MIN_HITS = 3


def _pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    parts = []
    for term in sorted(terms, key=len, reverse=True):  # longest first: "rules" before "rule"
        escaped = re.escape(term)
        parts.append(rf"\b{escaped}\b" if term.isascii() and term[0].isalnum() else escaped)
    return re.compile("|".join(parts))


_NARRATIVE_NAME = _pattern(NARRATIVE_NAME_TERMS)
_EXPRESSIVE_NAME = _pattern(EXPRESSIVE_NAME_TERMS)
_NARRATIVE_CONTENT = _pattern(NARRATIVE_CONTENT_TERMS)
_EXPRESSIVE_CONTENT = _pattern(EXPRESSIVE_CONTENT_TERMS)


@dataclass(frozen=True)
class Classification:
    responsibility: Responsibility
    rule: Literal["builtin", "name", "content", "default"]
    narrative_hits: int = 0
    expressive_hits: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "responsibility": self.responsibility,
            "rule": self.rule,
            "narrativeHits": self.narrative_hits,
            "expressiveHits": self.expressive_hits,
        }


def classify_prompt(identifier: str, name: str, content: str) -> Classification:
    if identifier in BUILTIN_NARRATIVE_IDS:
        return Classification("narrative", "builtin")
    folded_name = name.casefold()
    if _NARRATIVE_NAME.search(folded_name):
        return Classification("narrative", "name")
    if _EXPRESSIVE_NAME.search(folded_name):
        return Classification("expressive", "name")
    folded = content.casefold()
    n_hits = len(_NARRATIVE_CONTENT.findall(folded))
    e_hits = len(_EXPRESSIVE_CONTENT.findall(folded))
    if e_hits >= EXPRESSIVE_MIN_HITS and e_hits >= 2 * n_hits:
        return Classification("expressive", "content", n_hits, e_hits)
    return Classification("narrative", "content" if n_hits or e_hits else "default", n_hits, e_hits)


# --- macros ------------------------------------------------------------------------------------

KEPT_MACROS = frozenset({"char", "user"})
_CURLY = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_ANGLE = re.compile(r"<(USER|BOT|CHAR|CHARIFNOTGROUP|GROUP)>", re.IGNORECASE)
_NAME_END = re.compile(r"::|:|\s")


def macro_name(inner: str) -> str:
    """``{{random::a::b}}`` -> ``random``; ``{{// note}}`` -> ``//``; ``{{ User }}`` -> ``user``."""
    body = inner.strip()
    if body.startswith("//"):
        return "//"
    return _NAME_END.split(body, maxsplit=1)[0].casefold()


def find_macros(text: str) -> dict[str, int]:
    """Macro name -> occurrences, in first-seen order. Angle tags are reported as ``<user>`` etc."""
    found: dict[str, int] = {}
    events: list[tuple[int, str]] = [(m.start(), macro_name(m.group(1))) for m in _CURLY.finditer(text)]
    events += [(m.start(), f"<{m.group(1).casefold()}>") for m in _ANGLE.finditer(text)]
    for _, name in sorted(events):
        found[name] = found.get(name, 0) + 1
    return found


def macro_handling(name: str) -> Literal["kept", "unsupported"]:
    return "kept" if name in KEPT_MACROS else "unsupported"


__all__ = [
    "BUILTIN_NARRATIVE_IDS",
    "Classification",
    "EXPRESSIVE_MIN_HITS",
    "KEPT_MACROS",
    "classify_prompt",
    "find_macros",
    "macro_handling",
    "macro_name",
]
