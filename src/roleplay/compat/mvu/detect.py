"""Find the MVU constructs in a card and its lorebooks, and say where each one is.

Detection follows MVU's own matching (mvu.md §2.2, §2.11, §2.12, §2.14): ``[initvar]`` anywhere in
an entry title, case-insensitively, *disabled entries included* (the convention is a disabled
entry, so skipping them would miss almost every card); ``[mvu_update]``/``[mvu_plot]`` likewise;
greeting ``<initvar>`` blocks; TavernHelper's ``{{get_message_variable::…}}`` and
``{{format_message_variable::…}}`` macros; EJS tags that call ``getvar``. Nothing is parsed or run
here; the other modules decide what each finding means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .diagnostics import line_of
from .scan import LineIndex, ejs_tags, find_blocks
from .sources import Book, BookEntry, CardSource

INITVAR_TAG = re.compile(r"\[initvar\]", re.IGNORECASE)
UPDATE_TAG = re.compile(r"\[mvu_update\]", re.IGNORECASE)
PLOT_TAG = re.compile(r"\[mvu_plot\]", re.IGNORECASE)
# MVU's greeting block regex; :func:`.scan.find_blocks` returns the same blocks in linear time.
INITVAR_BLOCK = re.compile(r"<(initvar)>(?:\s*```.*)?([\s\S]*?)(?:```\s*)?</\1>", re.IGNORECASE)
INITVAR_TAG_NAME = "initvar"
VARIABLE_MACRO = re.compile(r"\{\{(get|format)_message_variable::([^{}]*)\}\}")
# The EJS tag grammar; :func:`.scan.ejs_tags` is its linear form.
EJS_TAG = re.compile(r"<%[_=\-#]?([\s\S]*?)[_\-]?%>")
GETVAR = re.compile(r"\bgetvar\s*\(")
COMMAND = re.compile(r"_\.(set|insert|assign|remove|unset|delete|add)\(")
JSON_PATCH = re.compile(r"<(json_?patch)>", re.IGNORECASE)
RULES_HEADING = re.compile(r"^\s*变量更新规则\s*[:：]", re.MULTILINE)


@dataclass(frozen=True)
class Finding:
    kind: str
    source: str
    pointer: str | None
    entry: str | None
    line: int | None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "source": self.source}
        for key in ("pointer", "entry", "line"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.detail:
            out["detail"] = self.detail
        return out


def is_initvar_entry(entry: BookEntry) -> bool:
    return bool(INITVAR_TAG.search(entry.title))


def is_update_rules_entry(entry: BookEntry) -> bool:
    """Semantic rules live in ``[mvu_update]`` entries or under a ``变量更新规则:`` heading."""
    return bool(UPDATE_TAG.search(entry.title) or RULES_HEADING.search(entry.content))


def _text_findings(text: str, source: str, pointer: str | None, entry: str | None) -> list[Finding]:
    found: list[Finding] = []
    lines = LineIndex(text)

    def add(kind: str, offset: int, detail: str) -> None:
        found.append(Finding(kind, source, pointer, entry, lines.line(offset), detail))

    for block in find_blocks(text, INITVAR_TAG_NAME, tempered=False):
        add("initvar_block", block.start, "")
    for m in VARIABLE_MACRO.finditer(text):
        add(f"{m.group(1)}_message_variable", m.start(), m.group(2).strip())
    for start, end, body_start, body_end in ejs_tags(text):
        whole = text[start:end]
        if GETVAR.search(text, body_start, body_end):
            add("ejs_getvar", start, whole[:120])
        else:
            add("ejs", start, whole[:120])
    for m in COMMAND.finditer(text):
        add("command", m.start(), m.group(1))
    for m in JSON_PATCH.finditer(text):
        add("json_patch", m.start(), m.group(1))
    return found


def _entry_findings(book: Book, entry: BookEntry) -> list[Finding]:
    found: list[Finding] = []
    state = "enabled" if entry.enabled else "disabled"
    pointer = entry.loc.pointer
    if INITVAR_TAG.search(entry.title):
        found.append(Finding("initvar_entry", entry.loc.source, pointer, entry.title, None, f"{book.name}; {state}"))
    if UPDATE_TAG.search(entry.title):
        found.append(Finding("mvu_update_tag", entry.loc.source, pointer, entry.title, None, state))
    if PLOT_TAG.search(entry.title):
        found.append(Finding("mvu_plot_tag", entry.loc.source, pointer, entry.title, None, state))
    m = RULES_HEADING.search(entry.content)
    if m:
        found.append(Finding("update_rules_heading", entry.loc.source, pointer, entry.title, line_of(entry.content, m.start())))
    found += _text_findings(entry.content, entry.loc.source, pointer, entry.title)
    return found


def detect(card: CardSource, books: list[Book] | None = None) -> list[Finding]:
    """Every MVU construct in the card's greetings, its books and ``books``, in reading order."""
    found: list[Finding] = []
    for greeting in card.greetings:
        found += _text_findings(greeting.text, greeting.loc.source, greeting.loc.pointer, None)
    for book in [*card.books, *(books or [])]:
        for entry in book.entries:
            found += _entry_findings(book, entry)
    helper = card.extensions.get("tavern_helper")
    scripts = helper.get("scripts") if isinstance(helper, dict) else None
    if isinstance(scripts, list):
        for i, script in enumerate(scripts):
            name = script.get("name") if isinstance(script, dict) else None
            found.append(Finding("script", card.source, f"/data/extensions/tavern_helper/scripts/{i}", None, None, str(name or "")))
    regexes = card.extensions.get("regex_scripts")
    if isinstance(regexes, list):
        for i, regex in enumerate(regexes):
            if not isinstance(regex, dict):
                continue
            replace = regex.get("replaceString")
            base = f"/data/extensions/regex_scripts/{i}/replaceString"
            if isinstance(replace, str):
                found += _text_findings(replace, card.source, base, str(regex.get("scriptName") or ""))
    return found


def is_mvu(findings: list[Finding]) -> bool:
    return any(
        f.kind in ("initvar_entry", "initvar_block", "mvu_update_tag", "mvu_plot_tag", "get_message_variable", "format_message_variable")
        for f in findings
    )
