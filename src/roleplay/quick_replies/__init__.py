"""Quick replies (spec ``rp-quick-replies``): global reusable snippets the player inserts into
their draft. Inserting never sends: the snippet only goes into the draft, at the cursor the
``quickReplies.cursor`` setting names, and the player sends the draft themselves.

The snippets are the ``quickReplies.items`` setting ([{label, text}], labels unique); every
change is a revision-checked write of that one key, so two editors never lose each other's
change: a caller that names ``expected_revision`` is refused when the list moved on, and a change
without one is still checked against the revision it read (``quick_replies.conflict``).

A self-contained feature above core, loaded as the ``rp-quick-replies`` plugin: its
``register_play_commands`` hook adds ``/qr`` to ``rp play``; ``rp quick-replies`` is its command.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

from roleplay.core.play_draft import Cursor, Draft
from roleplay.core.settings import MAX_QUICK_REPLIES, SettingsStore, validate_setting
from roleplay.errors import ConflictError, NotFoundError, Problem, RpError, ValidationError
from roleplay.harness.store.base import EventStore
from roleplay.hookspecs import hookimpl
from roleplay.names import QUICK_REPLIES_FEATURE

FEATURE = QUICK_REPLIES_FEATURE

ITEMS = "quickReplies.items"
CURSOR = "quickReplies.cursor"


@dataclass(frozen=True)
class QuickReplyList:
    items: list[dict[str, str]]
    revision: int  # the revision of quickReplies.items; pass it back as expected_revision
    cursor: Cursor

    def find(self, label: str) -> dict[str, str]:
        wanted = label.strip()
        for item in self.items:
            if item["label"] == wanted:
                return item
        raise NotFoundError(
            "quick_replies.not_found",
            f"no quick reply labelled {wanted!r}; `rp quick-replies list` shows them",
            pointer="/label",
            details={"label": wanted, "labels": [i["label"] for i in self.items]},
        )

    def to_dict(self) -> dict[str, Any]:
        return {"items": self.items, "revision": self.revision, "cursor": self.cursor}


def _checked(item: dict[str, Any]) -> dict[str, str]:
    """One item, validated by the setting's own type; problems point into the item."""
    try:
        return validate_setting(ITEMS, [item])[0]  # type: ignore[no-any-return]
    except ValidationError as exc:
        problems = [Problem(p.code, p.message, (p.pointer or "").removeprefix("/value/0") or None, p.details) for p in exc.problems]
        first = problems[0]
        raise ValidationError("quick_replies.invalid", first.message, pointer=first.pointer, problems=problems) from None


class QuickReplies:
    def __init__(self, events: EventStore) -> None:
        self._settings = SettingsStore(events)

    async def list(self) -> QuickReplyList:
        snapshot = await self._settings.snapshot()
        record = snapshot.record(ITEMS)
        return QuickReplyList([dict(i) for i in record.value], record.revision, snapshot.value(CURSOR))

    async def add(self, label: str, text: str, *, expected_revision: int | None = None) -> QuickReplyList:
        current = await self._current(expected_revision)
        item = _checked({"label": label, "text": text})
        self._unique(current, item["label"])
        if len(current.items) >= MAX_QUICK_REPLIES:
            raise RpError("quick_replies.full", f"there are already {MAX_QUICK_REPLIES} quick replies; delete one first")
        return await self._write(current, [*current.items, item])

    async def edit(
        self, label: str, *, new_label: str | None = None, text: str | None = None, expected_revision: int | None = None
    ) -> QuickReplyList:
        if new_label is None and text is None:
            raise RpError("quick_replies.nothing_to_change", "give a new label, a new text or both")
        current = await self._current(expected_revision)
        old = current.find(label)
        item = _checked({"label": old["label"] if new_label is None else new_label, "text": old["text"] if text is None else text})
        if item["label"] != old["label"]:
            self._unique(current, item["label"])
        return await self._write(current, [item if i is old else i for i in current.items])

    async def delete(self, label: str, *, expected_revision: int | None = None) -> QuickReplyList:
        current = await self._current(expected_revision)
        gone = current.find(label)
        return await self._write(current, [i for i in current.items if i is not gone])

    async def _current(self, expected: int | None) -> QuickReplyList:
        current = await self.list()
        if expected is not None and expected != current.revision:
            raise _conflict(expected, current.revision)
        return current

    @staticmethod
    def _unique(current: QuickReplyList, label: str) -> None:
        if any(i["label"] == label for i in current.items):
            raise ConflictError(
                "quick_replies.duplicate_label",
                f"a quick reply labelled {label!r} already exists; edit it or pick another label",
                pointer="/label",
                details={"label": label},
            )

    async def _write(self, current: QuickReplyList, items: builtins.list[dict[str, str]]) -> QuickReplyList:  # `list` is a method
        try:
            record = await self._settings.set(ITEMS, items, expected_revision=current.revision)
        except ConflictError as exc:  # another writer got in between the read and this write
            raise _conflict(current.revision, exc.details.get("currentRevision", -1)) from None
        return QuickReplyList(record.value, record.revision, current.cursor)


def _conflict(expected: int, actual: int) -> ConflictError:
    return ConflictError(
        "quick_replies.conflict",
        f"the quick replies are at revision {actual}, not at the expected revision {expected}; list them again and retry",
        details={"expectedRevision": expected, "currentRevision": actual},
    )


async def insert_quick_reply(rt: Any, argument: str, draft: Draft) -> None:
    """``/qr NAME``: put the snippet into the draft at the cursor setting. Never plays a turn."""
    if not argument.strip():
        raise RpError("quick_replies.label_required", "name a quick reply: /qr LABEL (`rp quick-replies list` shows them)")
    listed = await QuickReplies(rt.store).list()
    draft.insert(listed.find(argument)["text"], listed.cursor)


@hookimpl
def register_play_commands(register: Any) -> None:
    register("/qr", insert_quick_reply, "put a quick reply into your draft (/qr LABEL); /send sends it")


__all__ = ["CURSOR", "ITEMS", "QuickReplies", "QuickReplyList", "insert_quick_reply", "register_play_commands"]
