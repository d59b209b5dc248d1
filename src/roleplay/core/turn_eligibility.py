"""Which sessions may take a roleplay turn.

A roleplay turn reads the ``rp/session`` profile and appends a Chat-mode run to the session's log.
Only a top-level ``roleplay`` story may do that:

- a Writer or sub-agent *child* session is a one-shot log of one run (spec: "one-shot Writer 子
  Session"); another turn there would append a second run to a closed, audited record;
- a plain ``chat`` session (``rp chat``) or any other preset has no profile, so a turn would run
  with the default profile and silently turn the chat into something it is not;
- an *archived* story is hidden and kept as it is (spec: 归档 Session 保留分支及日志). It has
  to be unarchived before it is played again; reading it (``rp prompt``) stays allowed.
"""

from __future__ import annotations

from roleplay.errors import ConflictError, ValidationError
from roleplay.harness.plain_chat import CHAT_PRESET
from roleplay.harness.store.base import SessionRecord

from .runtime import ROLEPLAY_PRESET, RoleplayRuntime
from .writer import WRITER_PRESET


async def require_playable(
    rt: RoleplayRuntime, session_id: str, *, allow_archived: bool = False, record: SessionRecord | None = None
) -> SessionRecord:
    """The session's record if it may take a roleplay turn; otherwise a clear refusal:
    ``run.child_session``, ``run.not_roleplay`` or ``run.session_archived`` (``session.not_found``
    when there is no such session). ``record``: the one the caller's run lease read with its lock
    (a read saved)."""
    record = record if record is not None and record.id == session_id else await rt.service.get(session_id)
    details = {"sessionId": session_id, "preset": record.preset}
    if record.parent_id is not None or record.preset == WRITER_PRESET:
        what = "a Writer" if record.preset == WRITER_PRESET else f"a {record.preset!r} sub-agent"
        parent = f" of {record.parent_id}" if record.parent_id else ""
        raise ValidationError(
            "run.child_session",
            f"session {session_id} is {what} child session{parent}: it records one run and cannot take a turn; play its parent story instead",
            details={**details, "parentId": record.parent_id},
        )
    if record.preset != ROLEPLAY_PRESET:
        hint = f" (continue it with `rp chat --session {session_id}`)" if record.preset == CHAT_PRESET else ""
        raise ValidationError(
            "run.not_roleplay",
            f"session {session_id} is a {record.preset!r} session, not a roleplay story{hint}; start a story with `rp new`",
            details=details,
        )
    if record.archived and not allow_archived:
        raise ConflictError(
            "run.session_archived",
            f"session {session_id} is archived; unarchive it first with `rp sessions archive {session_id} --undo`",
            details=details,
        )
    return record
