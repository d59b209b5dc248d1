"""Quick replies (``roleplay.quick_replies``) on both backends: the revision-checked list in the
``quickReplies.items`` setting, its stable errors, and ``/qr`` inserting into a draft."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from roleplay.core.play_draft import Draft
from roleplay.core.settings import SettingsStore
from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError
from roleplay.harness.store import EventStore
from roleplay.quick_replies import QuickReplies, insert_quick_reply

pytestmark = pytest.mark.anyio


async def test_add_edit_delete_keep_one_revision_checked_list(store: EventStore) -> None:
    qr = QuickReplies(store)
    assert (await qr.list()).to_dict() == {"items": [], "revision": 0, "cursor": "end"}
    await qr.add(" 问好 ", "你好。")
    listed = await qr.add("告别", "再见。", expected_revision=1)
    assert listed.items == [{"label": "问好", "text": "你好。"}, {"label": "告别", "text": "再见。"}] and listed.revision == 2
    edited = await qr.edit("问好", new_label="招呼", text="你好呀。", expected_revision=2)
    assert edited.items[0] == {"label": "招呼", "text": "你好呀。"} and edited.revision == 3
    left = await qr.delete("告别")
    assert left.items == [{"label": "招呼", "text": "你好呀。"}]
    assert (await SettingsStore(store).get("quickReplies.items")).value == left.items


async def test_errors_have_stable_codes_and_write_nothing(store: EventStore) -> None:
    qr = QuickReplies(store)
    await qr.add("问好", "你好。")
    with pytest.raises(ConflictError) as dup:
        await qr.add("问好", "又一个")
    assert dup.value.code == "quick_replies.duplicate_label" and dup.value.pointer == "/label"
    await qr.add("告别", "再见。")
    with pytest.raises(ConflictError) as renamed:
        await qr.edit("告别", new_label="问好")
    assert renamed.value.code == "quick_replies.duplicate_label"
    with pytest.raises(NotFoundError) as missing:
        await qr.delete("没有")
    assert missing.value.code == "quick_replies.not_found" and missing.value.details["labels"] == ["问好", "告别"]
    with pytest.raises(ConflictError) as stale:
        await qr.edit("问好", text="改", expected_revision=1)
    assert stale.value.code == "quick_replies.conflict" and stale.value.details == {"expectedRevision": 1, "currentRevision": 2}
    with pytest.raises(ValidationError) as blank:
        await qr.add("空", "   ")
    assert blank.value.code == "quick_replies.invalid" and blank.value.pointer == "/text"
    with pytest.raises(RpError) as nothing:
        await qr.edit("问好")
    assert nothing.value.code == "quick_replies.nothing_to_change"
    after = await qr.list()
    assert after.revision == 2 and [i["label"] for i in after.items] == ["问好", "告别"]


async def test_a_writer_that_read_an_older_list_is_refused(store: EventStore) -> None:
    qr = QuickReplies(store)
    await qr.add("问好", "你好。")
    read = await qr.list()
    await SettingsStore(store).set("quickReplies.items", [], expected_revision=1)  # another editor
    with pytest.raises(ConflictError) as lost:
        await qr._write(read, [*read.items, {"label": "告别", "text": "再见。"}])
    assert lost.value.code == "quick_replies.conflict"
    assert (await qr.list()).items == []


async def test_qr_inserts_at_the_cursor_setting_and_never_plays(store: EventStore) -> None:
    await QuickReplies(store).add("问好", "你好。")
    rt = SimpleNamespace(store=store)
    draft = Draft()
    await insert_quick_reply(rt, "问好", draft)
    assert draft.shown() == "你好。|"
    await SettingsStore(store).set("quickReplies.cursor", "select")
    await insert_quick_reply(rt, "问好", draft)
    assert draft.shown() == "你好。[你好。]"
    with pytest.raises(NotFoundError):
        await insert_quick_reply(rt, "没有", draft)
    with pytest.raises(RpError) as bare:
        await insert_quick_reply(rt, " ", draft)
    assert bare.value.code == "quick_replies.label_required"
