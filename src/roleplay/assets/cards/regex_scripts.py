"""Card regex scripts: SillyTavern's ``extensions.regex_scripts``, applied to what the chat
*shows* and to the conversation the Writer prompt is built from; the log is never changed.

Which scripts apply where, as SillyTavern's regex engine decides (``markdownOnly``: display only;
``promptOnly``: prompt only; neither flag: ST rewrites the stored message once, which here -- the
log staying verbatim -- means both views): not disabled, placed on the message's side
(``placement`` 1 is the user's input, 2 the AI's output; the opening counts as output), and
within ``minDepth``/``maxDepth`` (depth 0 is the newest message: on the page the last one shown,
in the prompt the current input).

MVU cards use them to turn status blocks into panels on the page and to strip them from older
messages in the prompt. Each ``findRegex`` is a JavaScript ``/pattern/flags`` compiled by the
lorebook's own translation (:mod:`roleplay.assets.lorebook.jsregex`) and run under the same guard
as lorebook keys: a per-search timeout, a text-size cap and a budget for the whole page or prompt;
a script that trips it is skipped and said so, never half-applied. ``replaceString`` follows
``String.prototype.replace`` (``$&``, ``$1``…, ``$<name>``, ``$$``) plus ST's ``{{match}}``, with
``trimStrings`` cut from the match first. On the page the result is rendered like any message:
markdown, then the sanitiser, so a script's HTML keeps only the allow-listed tags and no
attribute that could run anything.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import regex

from roleplay.assets.lorebook.jsregex import JsRegex, JsRegexError, compile_js_regex, split_regex_key

USER_INPUT, AI_OUTPUT = 1, 2
Target = Literal["display", "prompt"]
PER_SEARCH_SECONDS = 0.05
PAGE_BUDGET_SECONDS = 0.5
MAX_TEXT_CHARS = 200_000
_REPLACEMENT = re.compile(r"\$(\$|&|`|'|<[^>]*>|[0-9]{1,2})|\{\{match\}\}")


@dataclass(frozen=True)
class RegexScript:
    name: str
    regex: JsRegex
    replace: str
    trim: tuple[str, ...]
    placement: frozenset[int]
    min_depth: int | None
    max_depth: int | None

    def applies(self, role: str, depth: int) -> bool:
        side = USER_INPUT if role == "user" else AI_OUTPUT
        if side not in self.placement:
            return False
        if self.min_depth is not None and self.min_depth >= 0 and depth < self.min_depth:
            return False
        return not (self.max_depth is not None and self.max_depth >= 0 and depth > self.max_depth)


@dataclass
class RegexScripts:
    scripts: list[RegexScript]
    skipped: list[str] = field(default_factory=list)  # why a script did not run (shown to the user)
    spent: float = 0.0

    def apply(self, text: str, role: str, depth: int) -> str:
        for script in self.scripts:
            if not script.applies(role, depth):
                continue
            if len(text) > MAX_TEXT_CHARS:
                self._skip(f"{script.name}: the message is too long for regex scripts")
                continue
            remaining = PAGE_BUDGET_SECONDS - self.spent
            if remaining <= 0:
                self._skip("regex scripts stopped: the time budget is spent")
                return text
            started = time.perf_counter()
            try:
                text = _substitute(script, text, min(PER_SEARCH_SECONDS, remaining))
            except TimeoutError:
                self._skip(f"{script.name}: stopped after {PER_SEARCH_SECONDS}s (catastrophic backtracking?); not applied")
            finally:
                self.spent += time.perf_counter() - started
        return text

    def _skip(self, why: str) -> None:
        if why not in self.skipped:
            self.skipped.append(why)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _targets(item: dict[str, Any], target: Target) -> bool:
    if target == "display":
        return not item.get("promptOnly")
    return not item.get("markdownOnly")


def has_regex_scripts(card_data: Any) -> bool:
    raw = (card_data.get("extensions") or {}).get("regex_scripts") if isinstance(card_data, dict) else None
    return isinstance(raw, list) and bool(raw)


def regex_scripts(card_data: Any, target: Target) -> RegexScripts:
    """The card's scripts that change ``target`` (compiled once per page or prompt build)."""
    raw = (card_data.get("extensions") or {}).get("regex_scripts") if isinstance(card_data, dict) else None
    out = RegexScripts([])
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict) or item.get("disabled") or not _targets(item, target):
            continue
        name = str(item.get("scriptName") or f"script {index + 1}")
        form = split_regex_key(str(item.get("findRegex") or ""))
        if form is None:
            out._skip(f"{name}: findRegex is not a /pattern/flags regex")
            continue
        try:
            compiled = compile_js_regex(*form)
        except JsRegexError as exc:
            out._skip(f"{name}: {exc.message}")
            continue
        placement = frozenset(p for p in item.get("placement") or [] if isinstance(p, int))
        trim = tuple(str(t) for t in item.get("trimStrings") or [] if isinstance(t, str) and t)
        out.scripts.append(
            RegexScript(
                name,
                compiled,
                str(item.get("replaceString") or ""),
                trim,
                placement,
                _int(item.get("minDepth")),
                _int(item.get("maxDepth")),
            )
        )
    return out


def display_scripts(card_data: Any) -> RegexScripts:
    """The scripts that change what the chat shows."""
    return regex_scripts(card_data, "display")


def prompt_scripts(card_data: Any) -> RegexScripts:
    """The scripts that change the conversation in the Writer prompt."""
    return regex_scripts(card_data, "prompt")


def _substitute(script: RegexScript, text: str, timeout: float) -> str:
    pattern: regex.Pattern[str] = script.regex.compiled

    def replace(m: regex.Match[str]) -> str:
        matched = m.group(0)
        for t in script.trim:
            matched = matched.replace(t, "")

        def one(token: re.Match[str]) -> str:
            if token.group(0) == "{{match}}":
                return matched
            ref = token.group(1)
            if ref == "$":
                return "$"
            if ref == "&":
                return m.group(0)
            if ref == "`":
                return text[: m.start()]
            if ref == "'":
                return text[m.end() :]
            if ref.startswith("<"):
                try:
                    return m.group(ref[1:-1]) or ""
                except (IndexError, regex.error):
                    return token.group(0)
            number = int(ref)
            if 0 < number <= len(m.groups()):
                return m.group(number) or ""
            if len(ref) == 2 and 0 < int(ref[0]) <= len(m.groups()):  # "$12" with one group is "$1" then "2"
                return (m.group(int(ref[0])) or "") + ref[1]
            return token.group(0)

        return _REPLACEMENT.sub(one, script.replace)

    count = 0 if "g" in script.regex.flags else 1
    return str(pattern.sub(replace, text, count=count, timeout=timeout))


__all__ = ["RegexScript", "RegexScripts", "display_scripts", "has_regex_scripts", "prompt_scripts", "regex_scripts"]
