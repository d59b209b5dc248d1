"""``rp db …`` and ``rp sessions …``: the event log from the command line."""

from __future__ import annotations

import json
from typing import Any

import click

from roleplay.cli_context import echo_json, home_option, json_option, run, state_of, terminal_safe
from roleplay.redact import redact_url
from roleplay.harness.names import (
    ASSISTANT_MESSAGE,
    COMMAND_DONE,
    COMMAND_RUN,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)


from .events import Event, message_text
from .projections import load
from .sessions import SessionService
from .store.base import SessionFilter, SessionRecord
from .surface import surface_projection


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command("migrate")
@home_option
@json_option
@click.pass_context
@run
async def db_migrate(ctx: click.Context, as_json: bool) -> None:
    """Apply pending schema migrations: the event log's, then those of the tables outside it
    (assets, settings and each enabled feature's own, numbered per owner)."""
    state = state_of(ctx)
    async with state.open_store(migrate=False) as store:
        applied = await store.migrate()
        version = await store.schema_version()
        owned = await state.owned_migrations(store) if state.owned_migrations is not None else []
    if as_json:
        echo_json(
            {
                "database": _safe_url(state.paths.database_url),
                "applied": applied,
                "schemaVersion": version,
                "owned": [{"owner": owner, "number": number} for owner, number in owned],
            }
        )
    else:
        what = ", ".join(map(str, applied)) if applied else "nothing (up to date)"
        also = "; " + ", ".join(f"{owner} {number}" for owner, number in owned) if owned else ""
        click.echo(f"{_safe_url(state.paths.database_url)}: applied {what}; schema version {version}{also}")


@click.group()
def sessions() -> None:
    """List, inspect, fork and archive sessions."""


@sessions.command("list")
@home_option
@click.option("--archived", "which", flag_value="archived", help="Only archived sessions.")
@click.option("--all", "which", flag_value="all", help="Every session: archived ones and Writer/sub-agent children too.")
@click.option("--parent", "parent_id", help="Only the child sessions of this session.")
# Top-level only is the default now; the flag stays so existing scripts keep working.
@click.option("--roots", is_flag=True, hidden=True)
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@json_option
@click.pass_context
@run
async def sessions_list(ctx: click.Context, which: str | None, parent_id: str | None, roots: bool, limit: int, as_json: bool) -> None:
    """List stories and chats, most recently updated first. Each turn's Writer runs in a child
    session; those are listed with --all or --parent ID."""
    archived = {None: False, "archived": True, "all": None}[which]
    # Children only when asked for: one story makes a Writer child per turn.
    roots_only = parent_id is None and (roots or which != "all")
    async with state_of(ctx).open_store() as store:
        if parent_id is not None:
            await store.get_session(parent_id)
        rows = await store.list_sessions(SessionFilter(archived=archived, parent_id=parent_id, roots_only=roots_only, limit=limit))
    if as_json:
        echo_json([r.to_dict() for r in rows])
        return
    if not rows:
        click.echo("no sessions")
        return
    for r in rows:
        flags = " [archived]" if r.archived else ""
        parent = f" child of {r.parent_id}" if r.parent_id else ""
        _echo(f"{r.id}  {r.preset:<10} seq {r.head_seq:<6} {r.updated_at}  {r.title or ''}{parent}{flags}")


@sessions.command("show")
@home_option
@click.argument("session_id")
@json_option
@click.pass_context
@run
async def sessions_show(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """A session's record, its children and its current surface."""
    async with state_of(ctx).open_store() as store:
        rec = await store.get_session(session_id)
        children = await store.list_sessions(SessionFilter(archived=None, parent_id=session_id, limit=10_000))
        surface = (await load(store, session_id, surface_projection)).state
    if as_json:
        echo_json({**rec.to_dict(), "children": [c.to_dict() for c in children], "surface": surface["nodes"]})
        return
    _print_record(rec)
    click.echo(f"children: {', '.join(c.id for c in children) if children else 'none'}")
    click.echo(f"surface: {len(surface['nodes'])} message(s)")
    for node in surface["nodes"]:
        content = node["content"]
        text = content if isinstance(content, str) else message_text({"content": content})
        _echo(f"  #{node['seq']:<5} {node['role']:<9} {_clip(text)}")


@sessions.command("events")
@home_option
@click.argument("session_id")
@click.option("--after", "after_seq", type=click.IntRange(0), default=0, help="Only events after this seq.")
@click.option("--until", "until_seq", type=click.IntRange(0), help="Only events up to this seq.")
@click.option("--limit", type=click.IntRange(1), help="At most this many events.")
@json_option
@click.pass_context
@run
async def sessions_events(
    ctx: click.Context, session_id: str, after_seq: int, until_seq: int | None, limit: int | None, as_json: bool
) -> None:
    """Print a session's events (a range with --after/--until)."""
    async with state_of(ctx).open_store() as store:
        events = await store.read(session_id, after_seq=after_seq, until_seq=until_seq, limit=limit)
    if as_json:
        echo_json([e.to_dict() for e in events])
        return
    for e in events:
        _echo(f"{e.seq:>6}  {e.created_at}  {e.type:<22} {_summary(e)}")


@sessions.command("fork")
@home_option
@click.argument("session_id")
@click.option("--at", "at_seq", type=int, required=True, help="Keep events 1..AT of the source.")
@click.option("--title", help="Title of the new session (default: the source's).")
@json_option
@click.pass_context
@run
async def sessions_fork(ctx: click.Context, session_id: str, at_seq: int, title: str | None, as_json: bool) -> None:
    """Fork a session at a seq; the source is left untouched.

    A seq inside a turn snaps back to the end of the last closed turn (and says so), so the
    branch never starts with an unanswered user message."""
    async with state_of(ctx).open_store() as store:
        rec, point = await SessionService(store).fork_between_turns(session_id, at_seq, title=title)
    if as_json:
        echo_json({**rec.to_dict(), "forkPoint": point.to_dict()})
    else:
        click.echo(f"forked {session_id} at {point.describe()} → {rec.id}")


@sessions.command("archive")
@home_option
@click.argument("session_id")
@click.option("--undo", is_flag=True, help="Unarchive instead.")
@json_option
@click.pass_context
@run
async def sessions_archive(ctx: click.Context, session_id: str, undo: bool, as_json: bool) -> None:
    """Archive a session (hidden from the default listing, never deleted)."""
    async with state_of(ctx).open_store() as store:
        rec = await store.set_archived(session_id, not undo)
    if as_json:
        echo_json(rec.to_dict())
    else:
        click.echo(f"{'unarchived' if undo else 'archived'} {rec.id}")


def _print_record(rec: SessionRecord) -> None:
    for key, value in rec.to_dict().items():
        if value is not None:
            _echo(f"{key}: {value}")


def _echo(line: str) -> None:
    # Titles and messages come from players, cards and models: one line each, printed inert.
    click.echo(terminal_safe(line, one_line=True))


def _summary(e: Event) -> str:
    p: dict[str, Any] = e.payload
    if e.type in (USER_MESSAGE, ASSISTANT_MESSAGE):
        extra = f" replace:{p['surfaceOp']['range']}→{p['surfaceOp']['targetMessageId']}" if p.get("surfaceOp") else ""
        calls = f" calls:{','.join(c['name'] for c in p.get('toolCalls', []))}" if p.get("toolCalls") else ""
        return f"{p['messageId']}{extra}{calls} {_clip(message_text(p))}"
    if e.type == COMMAND_RUN:
        return f"{p['commandId']} {p['name']} {_clip(json.dumps(p['args'], ensure_ascii=False))}"
    if e.type == COMMAND_DONE:
        return f"{p['commandId']} {p['kind']}" + (f" {p['error']['code']}" if p.get("error") else "")
    if e.type == TOOL_CALL:
        return f"{p['callId']} {p['name']} {_clip(p['arguments'])}"
    if e.type == TOOL_RESULT:
        status = "ok" if p["ok"] else f"error {p.get('error', {}).get('code', '')}"
        return f"{p['callId']} {p['name']} {status}"
    if e.type in (TURN_START, TURN_END, STEP_START, STEP_END):
        return " ".join(str(p[k]) for k in ("turnId", "stepId", "outcome") if k in p)
    return _clip(json.dumps(p, ensure_ascii=False))


def _clip(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _safe_url(url: str) -> str:
    """Never print credentials from a database URL (userinfo, or ``?password=`` in the query)."""
    return redact_url(url)
