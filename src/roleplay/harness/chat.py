"""``rp chat``: a plain (non-roleplay) agent chat REPL on the harness loop.

It exists to prove the loop end to end against a real route: every line is a turn, persisted as
a ``chat`` session, with the reply streamed from live ``assistant/chunk`` notifications exactly as
the web UI will receive them. Ctrl-C during a reply aborts that turn (``turn/end aborted``);
``/exit`` or end of input leaves.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from typing import Any, Awaitable, Callable, TypeVar

import click

from roleplay.cli_context import TerminalSafeStream, echo_error, echo_json, home_option, json_option, read_text_line, run, state_of
from roleplay.errors import RpError

from .loop import AgentLoop, TurnResult
from .models.routes import build_model, deprecation_note, resolve_route, route_context_window
from .models.types import ChatModel
from .plain_chat import CHAT_PRESET, chat_spec
from .sessions import SessionService
from .store.base import EventStore

T = TypeVar("T")


async def chat_turn(store: EventStore, loop: AgentLoop, session_id: str, text: str, out: Any, status: Any = None) -> TurnResult:
    """Run one turn, echoing streamed text to ``out`` as it arrives."""
    return await stream_turn(
        store, session_id, lambda abort: loop.run_turn(session_id, text, abort=abort), out, lambda r: r.text, status=status
    )


async def stream_turn(
    store: EventStore,
    session_id: str,
    start: Callable[[asyncio.Event], Awaitable[T]],
    out: Any,
    final_text: Callable[[T], str],
    *,
    status: Any = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Run ``start(abort)`` while echoing the session's ``assistant/chunk`` text to ``out``.

    Ctrl-C sets ``abort`` (the turn ends ``aborted``). When nothing streamed, the final text is
    printed at the end, so a runtime that does not stream still shows its reply. Model text is
    printed inert (``TerminalSafeStream``): a reply cannot drive the terminal. A chunk with
    ``reset`` discards the text so far (a retried Writer): it cannot be unprinted, so the CLI ends
    the line and says so on ``status``.

    ``status`` (stderr; None for none) gets a "writing…" line before the first text and the
    elapsed time after the reply, so ``out`` holds only the reply. On a terminal the indicator is
    erased when the text starts."""
    out = TerminalSafeStream(out)
    abort = asyncio.Event()
    previous = _install_sigint(abort)
    progress = _Progress(status, clock)
    printed = False
    try:
        async with store.subscribe(session_id) as sub:
            task = asyncio.ensure_future(start(abort))
            while True:
                getter = asyncio.ensure_future(sub.next())
                done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    break
                printed = _echo(getter.result(), out, progress) or printed
            result = await task
            # Notifications published before the task finished may still sit in the queue.
            while True:
                try:
                    printed = _echo(await sub.next(timeout=0.05), out, progress) or printed
                except asyncio.TimeoutError:
                    break
    finally:
        _restore_sigint(previous)
        progress.clear()
    text = final_text(result)
    if printed or text:
        out.write("\n" if printed else text + "\n")
    out.close()
    out.flush()
    progress.done()
    return result


def _echo(note: Any, out: Any, progress: _Progress) -> bool:
    if note.kind != "chunk" or not note.data:
        return False
    if note.data.get("reset") and progress.first is not None:
        out.write("\n")
        out.flush()
        progress.note("(the Writer was retried: the text above is discarded)")
    if note.data.get("text"):
        progress.first_text()
        out.write(note.data["text"])
        out.flush()
        return True
    return False


class _Progress:
    """The "writing…" indicator and the elapsed time, on the status stream."""

    def __init__(self, status: Any, clock: Callable[[], float]) -> None:
        self.status = status
        self.clock = clock
        self.start = clock()
        self.first: float | None = None
        self.tty = bool(status is not None and getattr(status, "isatty", lambda: False)())
        self._shown = False
        if status is not None:
            # A terminal line is erased when the text starts; a pipe or file keeps a whole line.
            status.write("writing…" if self.tty else "writing…\n")
            status.flush()
            self._shown = self.tty

    def first_text(self) -> None:
        if self.first is None:
            self.first = self.clock() - self.start
            self.clear()

    def clear(self) -> None:
        if self._shown:
            self.status.write("\r\x1b[K")
            self.status.flush()
            self._shown = False

    def note(self, text: str) -> None:
        if self.status is not None:
            self.clear()
            self.status.write(text + "\n")
            self.status.flush()

    def done(self) -> None:
        total = self.clock() - self.start
        first = "" if self.first is None else f"first text after {self.first:.1f} s, "
        self.note(f"({first}{total:.1f} s)")


def _install_sigint(abort: asyncio.Event) -> Any:
    try:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, abort.set)
        return True
    except (NotImplementedError, RuntimeError, ValueError):
        return None  # not the main thread (tests) or no signal support


def _restore_sigint(installed: Any) -> None:
    if installed:
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


@click.command("chat")
@home_option
@click.option("--model", "model_spec", help="Route, e.g. deepseek/deepseek-flash, openai/gpt-4o-mini, or demo (offline).")
@click.option("--session", "session_id", help="Continue an existing chat session.")
@click.option("-m", "--message", "messages", multiple=True, help="Send this message instead of reading stdin (repeatable).")
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    help="The model's context window in tokens (default: the model's listed one); older exchanges give way to it.",
)
@json_option
@click.pass_context
@run
async def chat(
    ctx: click.Context, model_spec: str | None, session_id: str | None, messages: tuple[str, ...], context_window: int | None, as_json: bool
) -> None:
    """Chat with the configured model; every exchange is saved as a session."""
    route = resolve_route(model_spec, {"context_window": context_window} if context_window else None)
    model: ChatModel = build_model(route)
    note = deprecation_note(route)
    async with state_of(ctx).open_store() as store:
        service = SessionService(store)
        if session_id is None:
            session_id = (await service.create(CHAT_PRESET, title=f"chat with {route.spec}")).id
        else:
            await service.get(session_id)
        loop = AgentLoop(service, model, chat_spec(route_context_window(route)))
        out = _Sink() if as_json else sys.stdout
        if not as_json:
            click.echo(f"session {session_id} · model {model.label}" + (f" · {note}" if note else ""), err=True)
            click.echo("type /exit to leave; Ctrl-C stops a reply", err=True)
        results: list[TurnResult] = []
        input_errors: list[RpError] = []
        try:
            for text in _lines(messages, input_errors):
                if text.strip() in ("/exit", "/quit"):
                    break
                if not text.strip():
                    continue
                result = await chat_turn(store, loop, session_id, text, out, None if as_json else sys.stderr)
                results.append(result)
                if result.outcome != "completed" and not as_json:
                    err = f" [{result.error['code']}] {result.error['message']}" if result.error else ""
                    click.echo(f"(turn ended: {result.outcome}{err})", err=True)
        finally:
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()
    if as_json:
        echo_json(
            {
                "sessionId": session_id,
                "model": {"route": route.spec, "label": model.label},
                "turns": [{"turnId": r.turn_id, "outcome": r.outcome, "text": r.text, "error": r.error, "usage": r.usage} for r in results],
                "inputErrors": [e.to_dict() for e in input_errors],
            }
        )
    elif any(r.outcome == "error" for r in results):
        raise RpError("chat.turn_failed", "a turn ended with an error (see above)")


def _lines(messages: tuple[str, ...], errors: list[RpError]) -> Any:
    """The messages, else stdin's lines. A line that is not UTF-8 is reported, kept in ``errors``
    and skipped: the chat goes on with the next one."""
    if messages:
        yield from messages
        return
    interactive = sys.stdin.isatty()
    number = 0
    while True:
        if interactive:
            click.echo("you> ", nl=False, err=True)
        number += 1
        try:
            line = read_text_line(sys.stdin, line=number)
        except RpError as exc:
            echo_error(exc)
            errors.append(exc)
            continue
        if line is None:
            return
        yield line


class _Sink:
    """Swallows streamed text when the caller wants only the JSON summary."""

    def write(self, _: str) -> None:
        return None

    def flush(self) -> None:
        return None
