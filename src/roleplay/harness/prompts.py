"""System prompt assembly from ordered, named sections contributed by features.

Sections carry an ``order`` (ties keep registration order) and either fixed text or a function
of the assembly context. A section with id ``tool:<name>`` is dropped while that tool is not
visible, so the prompt never explains a tool the model cannot call. Registering an id again
replaces the earlier section (how a feature overrides the harness identity, the spec's Roleplay
identity override) without moving it.

Each assembly yields the section ids actually used and a sha256 of the exact prompt text; the
agent loop logs both in ``model/request`` so a prompt inspector can tell what a model saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from roleplay.canonical import sha256_hex
from roleplay.errors import ValidationError

SectionText = str | Callable[["PromptContext"], str | None]

# Conventional orders; features pick a number between them.
ORDER_IDENTITY = 0
ORDER_RULES = 100
ORDER_WORKFLOW = 200
ORDER_TOOLS = 300
ORDER_CONTEXT = 400


@dataclass(frozen=True)
class PromptSection:
    id: str
    text: SectionText
    order: int = ORDER_RULES


@dataclass(frozen=True)
class PromptContext:
    session_id: str | None
    visible_tools: frozenset[str]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AssembledPrompt:
    text: str
    section_ids: list[str]
    hash: str


class PromptAssembly:
    def __init__(self, sections: Iterable[PromptSection] = ()) -> None:
        self._sections: dict[str, tuple[int, PromptSection]] = {}
        self._counter = 0
        for s in sections:
            self.add(s)

    def add(self, section: PromptSection) -> None:
        if not section.id or not isinstance(section.id, str):
            raise ValidationError("prompt.invalid_section", "a prompt section needs a non-empty id", pointer="/id")
        if section.id in self._sections:
            index = self._sections[section.id][0]
        else:
            index = self._counter
            self._counter += 1
        self._sections[section.id] = (index, section)

    def remove(self, section_id: str) -> None:
        self._sections.pop(section_id, None)

    def ids(self) -> list[str]:
        return [s.id for _, s in sorted(self._sections.values(), key=lambda p: (p[1].order, p[0]))]

    def copy(self) -> "PromptAssembly":
        clone = PromptAssembly()
        clone._sections = dict(self._sections)
        clone._counter = self._counter
        return clone

    def assemble(self, ctx: PromptContext) -> AssembledPrompt:
        parts: list[str] = []
        used: list[str] = []
        for _, section in sorted(self._sections.values(), key=lambda p: (p[1].order, p[0])):
            if section.id.startswith("tool:") and section.id[5:] not in ctx.visible_tools:
                continue
            text = section.text(ctx) if callable(section.text) else section.text
            if not text or not text.strip():
                continue
            parts.append(text.strip())
            used.append(section.id)
        prompt = "\n\n".join(parts)
        return AssembledPrompt(prompt, used, sha256_hex(prompt))


def tool_sections(tools: Iterable[Any]) -> list[PromptSection]:
    """``tool:<name>`` sections from the guidance of registered tools."""
    return [PromptSection(f"tool:{t.name}", t.guidance, ORDER_TOOLS) for t in tools if getattr(t, "guidance", None)]
