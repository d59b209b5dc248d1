"""The context epoch of a frozen build (``context_build.freeze``): sha256 over its layout, every
source field, its outputs, bindings, diagnostics and window. Any change to any input gives a new
epoch, which retry tokens are bound to and which events store: its value for given inputs never
changes. Texts enter it as the sha256 of their UTF-8 bytes, each computed as cheaply as it can be
(issue 12): the whole conversation's as it grows, the Writer prompt's once for here and for its
storage, and a trimmed conversation's with its section's and the prompt's from one encoding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roleplay.canonical import sha256_hex
from roleplay.harness.store.texts import remember_digest, sha256_text

from .conversation_window import known_digest
from .types import CONVERSATION, BuiltSection, ContextSource, Diagnostic, Slot, WindowFit


def build_epoch(
    slots: Sequence[Slot],
    sources: Mapping[str, ContextSource],
    sections: Sequence[BuiltSection],
    writer_prompt: str,
    parent_context: str,
    commit_context: str,
    bindings: Mapping[str, Any],
    diagnostics: Sequence[Diagnostic],
    window: WindowFit | None,
) -> str:
    digest = _conversation_digests(sources, sections, writer_prompt)
    return sha256_hex(
        {
            "slots": [_slot_record(s) for s in slots],
            "sources": [_source_record(s, digest) for s in sources.values()],
            "sections": [{"slotId": s.slot_id, "name": s.name, "sourceIds": list(s.source_ids), "text": digest(s.text)} for s in sections],
            "writerPrompt": digest(writer_prompt),
            "parentContext": _digest(parent_context),
            "commitContext": _digest(commit_context),
            "bindings": bindings,
            "diagnostics": [d.to_dict() for d in diagnostics],
            "window": None if window is None else window.to_dict(),
        }
    )


def _source_record(source: ContextSource, digest: Callable[[str], str]) -> dict[str, Any]:
    # Texts enter the epoch as digests: a long conversation is hashed once instead of being
    # JSON-encoded into one large document (same sensitivity to any change, far less work).
    return {
        "id": source.id,
        "title": source.title,
        "text": digest(source.text),
        "sourceClass": source.source_class,
        "parentDelivery": source.parent_delivery,
        "parentText": None if source.parent_text is None else digest(source.parent_text),
        "idleAllowed": source.idle_allowed,
        "sharedReference": source.shared_reference,
        "defaultSectionTag": source.default_section_tag,
        "revision": source.revision,
        **({} if source.depth is None else {"depth": source.depth, "role": source.role}),
    }


def _digest(text: str) -> str:
    # The whole conversation's text is hashed as it grows (``conversation_window``); the Writer
    # prompt is hashed once for here and for where its message is stored (``sha256_text``).
    return known_digest(text) or sha256_text(text)


def _conversation_digests(
    sources: Mapping[str, ContextSource], sections: Sequence[BuiltSection], writer_prompt: str
) -> Callable[[str], str]:
    """``_digest``, with the conversation's text and its section's digested from one UTF-8
    encoding when the section holds the text as it is (a trimmed window's text, which is no whole
    history's and so not hashed as it grows): a long story's two largest texts after the prompt
    itself. That encoding is the Writer prompt's when the prompt holds the section where the
    sections' join puts it (its digest then recorded for the prompt's storage, ``sha256_text``),
    else the section's: the prompt, the section and the text, encoded once instead of two or three
    times. UTF-8 encodes a string piece by piece, so a piece's bytes are the whole's between the
    encoded lengths of what is around it."""
    conversation = sources.get(CONVERSATION)
    index = next((i for i, s in enumerate(sections) if s.source_ids == (CONVERSATION,)), None)
    if conversation is None or index is None or len(conversation.text) < _SHARED_DIGEST_FROM or known_digest(conversation.text):
        return _digest
    section, text = sections[index].text, conversation.text
    at = len(section) - len(_SECTION_END) - len(text) if section.endswith(_SECTION_END) else 0
    if at < 0 or not section.startswith(text, at):
        return _digest
    known: dict[int, tuple[str, str]] = {}
    where = sum(len(s.text) for s in sections[:index]) + 2 * index  # ``join_sections``: "\n\n" between sections
    if writer_prompt.startswith(section, where):
        whole = writer_prompt.encode("utf-8")
        prompt_digest = hashlib.sha256(whole).hexdigest()
        remember_digest(writer_prompt, prompt_digest)
        known[id(writer_prompt)] = (writer_prompt, prompt_digest)
        begin = len(writer_prompt[:where].encode("utf-8"))
        encoded = memoryview(whole)[begin : len(whole) - len(writer_prompt[where + len(section) :].encode("utf-8"))]
    else:
        encoded = memoryview(section.encode("utf-8"))
    start = len(section[:at].encode("utf-8"))
    stop = len(encoded) - len(section[at + len(text) :].encode("utf-8"))
    known[id(section)] = (section, hashlib.sha256(encoded).hexdigest())
    known[id(text)] = (text, hashlib.sha256(encoded[start:stop]).hexdigest())

    def digest(value: str) -> str:
        found = known.get(id(value))
        return found[1] if found is not None and found[0] is value else _digest(value)

    return digest


_SECTION_END = "\n</section>"
_SHARED_DIGEST_FROM = 64 * 1024  # shorter texts are hashed as they are


def _slot_record(slot: Slot) -> dict[str, Any]:
    return {"id": slot.id, "name": slot.name, "sources": list(slot.sources), "sectionTag": slot.section_tag, "idle": slot.idle}
