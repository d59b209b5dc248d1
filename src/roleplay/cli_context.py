"""What every ``rp`` command shares: where the data lives, how errors print, how async runs.

``--home`` is accepted both on ``rp`` itself and on each command (``rp sessions list --home X``);
``RP_HOME`` and ``RP_DATABASE_URL`` come from the environment. Errors print as
``error [code]: message`` on stderr (or as ``{"error": {...}}`` on stdout with ``--json``) and
exit with status 1, never with a traceback.

Text crosses the terminal boundary both ways. In: an argument with bytes that are not UTF-8
arrives as lone surrogates (Python's ``surrogateescape``) and is refused with
``cli.arg.invalid_utf8`` before any command runs (``guard_text_arguments`` gives every command in
the ``rp`` tree the check, ``run`` gives it to commands invoked on their own). A line typed on stdin
is decoded by ``read_text_line``; one that is not UTF-8 is refused with ``cli.input.invalid_utf8``
and the session reads on. Out: asset, story and model text come from strangers, so what a command
prints goes through ``terminal_safe`` (``TerminalSafeStream`` for replies streamed in pieces),
which shows ESC, other controls, bidi overrides and lone surrogates as visible escapes instead of
letting them drive the terminal, and ``echo_json`` escapes the same characters inside JSON strings.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, TypeVar

import click

from roleplay.config import Paths, resolve_paths
from roleplay.errors import RpError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    home: str | None = None
    _paths: Paths | None = field(default=None, repr=False)
    # Builds the roleplay runtime over a store; the top-level ``rp`` group injects the one with
    # every enabled feature, so feature packages never import the interface layer.
    runtime_factory: Any = None
    # ``async (event_store, asset_ids) -> [user]``: the stories that bind any of the assets (each
    # user has ``to_dict()``). Injected like ``runtime_factory``; None skips the in-use check.
    asset_users: Any = None
    # ``async (event_store) -> [(owner, number)]``: the migrations of the tables outside the event
    # log (assets, settings, features' own), for ``rp db migrate``. Injected like ``runtime_factory``.
    owned_migrations: Any = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve_paths(self.home)
            # The home's stored model keys (``secrets.json``) fill in what the environment lacks.
            from roleplay.harness.models.routes import use_key_file
            from roleplay.harness.models.secrets import KeyFile

            use_key_file(KeyFile(self._paths.home))
        return self._paths

    def open_store(self, *, migrate: bool = True):  # type: ignore[no-untyped-def]
        """An opened store; migrations are applied first unless ``migrate`` is False."""
        from roleplay.harness.store import open_store

        store = open_store(self.paths.database_url)
        if migrate:
            return _MigratingStore(store)
        return _MigratingStore(store, migrate=False)


class _MigratingStore:
    """``async with state.open_store() as store`` — migrate on enter, close on exit."""

    def __init__(self, store: Any, migrate: bool = True) -> None:
        self.store = store
        self.migrate = migrate

    async def __aenter__(self) -> Any:
        if self.migrate:
            await self.store.migrate()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()


def home_option(fn: F) -> F:
    """Add ``--home`` to a command; it overrides the one given to ``rp``."""

    def set_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
        if value is not None:
            state = ctx.ensure_object(CliState)
            state.home = value
            state._paths = None

    return click.option(
        "--home",
        type=click.Path(file_okay=False),
        expose_value=False,
        callback=set_home,
        is_eager=True,
        help="Data directory (default: $RP_HOME or the platform data dir).",
    )(fn)


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


# What a terminal must not receive raw: C0 controls but tab and newline (ESC starts CSI/OSC
# sequences, CR rewrites the line, BEL rings), DEL, C1 controls (0x9B is CSI on 8-bit terminals), the
# bidi embedding/override/isolate controls (they reorder the rest of the line) and lone surrogates
# (unprintable: encoding them to UTF-8 raises). Names also lose line breaks and tabs.
_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_ONE_LINE_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# Inside JSON strings ``json.dumps`` already escapes C0; these are the others it leaves raw.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` with every character that could drive or garble a terminal shown as an escape
    (``\\x1b``, ``\\u202e``…). Newlines and tabs stay unless ``one_line``; CRLF becomes a newline.
    Printable text, joiners and bidi marks are untouched."""
    if one_line:
        return _ONE_LINE_UNSAFE.sub(_visible, text)
    return _TERMINAL_UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def check_text_args(params: dict[str, Any]) -> None:
    """Refuse command arguments that are not valid UTF-8 text (they arrive as lone surrogates).

    ``Path`` arguments are not text and are left to the file system."""
    ctx = click.get_current_context(silent=True)
    paths = set() if ctx is None else {p.name for p in ctx.command.params if isinstance(p.type, (click.Path, click.File))}
    for name, value in params.items():
        if name in paths:
            continue
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if not isinstance(item, str):
                continue
            bad = next((i for i, ch in enumerate(item) if "\ud800" <= ch <= "\udfff"), None)
            if bad is None:
                continue
            code = ord(item[bad])
            byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
            raise RpError(
                "cli.arg.invalid_utf8",
                f"argument {name!r} is not valid UTF-8 text ({byte} at offset {bad}); check the terminal's encoding",
                pointer=f"/{name}",
                details={"argument": name, "offset": bad},
            )


def guard_text_arguments(command: click.Command) -> None:
    """Give ``command`` and every command under it the ``check_text_args`` check, so that commands
    that do not go through ``run`` (plain click bodies) refuse undecodable arguments too."""
    callback = command.callback
    if callback is not None and not getattr(callback, "_checks_text_args", False):

        @functools.wraps(callback)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                check_text_args(kwargs)
            except RpError as exc:
                fail(exc, bool(kwargs.get("as_json")))
            return callback(*args, **kwargs)

        checked._checks_text_args = True  # type: ignore[attr-defined]
        command.callback = checked
    for sub in getattr(command, "commands", {}).values():
        guard_text_arguments(sub)


def read_text_line(stream: Any = None, *, line: int | None = None) -> str | None:
    """The next line the user typed, without its line break, or None at the end of input.

    The bytes are decoded here, strictly: depending on the locale Python's own decoding would
    raise on a bad byte or hand it on as a lone surrogate that fails later. A line that is not
    UTF-8 raises ``cli.input.invalid_utf8`` after being consumed, so the caller can report it and
    read on. ``line`` (1-based) only goes into the message and details."""
    stream = sys.stdin if stream is None else stream
    where = f"input line {line}" if line is not None else "the input line"
    raw = getattr(stream, "buffer", None)
    if raw is not None:
        data = raw.readline()
        if not data:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _invalid_input(where, f"byte 0x{data[exc.start]:02x} at byte offset {exc.start}", exc.start, line) from None
    else:
        text = stream.readline()
        if not text:
            return None
        bad = next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)
        if bad is not None:
            raise _invalid_input(where, f"U+{ord(text[bad]):04X} at offset {bad}", bad, line)
    text = text[:-1] if text.endswith("\n") else text
    return text[:-1] if text.endswith("\r") else text


def _invalid_input(where: str, what: str, offset: int, line: int | None) -> RpError:
    details: dict[str, Any] = {"offset": offset} if line is None else {"line": line, "offset": offset}
    return RpError(
        "cli.input.invalid_utf8",
        f"{where} is not valid UTF-8 text ({what}) and was not sent; check the terminal's encoding",
        details=details,
    )


class TerminalSafeStream:
    """A text stream that writes ``terminal_safe`` text to ``out`` while the text arrives in pieces.

    Every unsafe character is escaped on its own, so a piece boundary cannot smuggle a sequence
    through; only a CR is held back until the next piece shows whether it starts a CRLF. The output
    equals ``terminal_safe`` of the whole text. ``close`` writes a held CR (it does not close ``out``)."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self._cr = False

    def write(self, text: str) -> None:
        if not text:
            return
        if self._cr:
            text, self._cr = "\r" + text, False
        if text.endswith("\r"):
            text, self._cr = text[:-1], True
        if text:
            self.out.write(terminal_safe(text))

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self._cr:
            self._cr = False
            self.out.write(terminal_safe("\r"))


def echo_error(exc: RpError) -> None:
    """Print ``error [code]: message`` (and any further problems) on stderr, inert."""
    # Messages quote user input (names, keys, file names): print them inert.
    where = f" (at {exc.pointer})" if exc.pointer is not None else ""
    click.echo(terminal_safe(f"error [{exc.code}]: {exc.message}{where}", one_line=True), err=True)
    for p in exc.problems[1:]:
        at = f" (at {p.pointer})" if p.pointer is not None else ""
        click.echo(terminal_safe(f"  also [{p.code}]: {p.message}{at}", one_line=True), err=True)


def run(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async command body, turning RpError into a clean message and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import asyncio  # ~0.1 s to import: only commands that run pay it, not ``--help``

        as_json = kwargs.get("as_json", False)
        try:
            check_text_args(kwargs)
            return asyncio.run(fn(*args, **kwargs))
        except RpError as exc:
            fail(exc, as_json)
        except Exception as exc:  # noqa: BLE001 - only disk and database faults are handled here
            fail_on_store_fault(exc, as_json)
            raise
        except KeyboardInterrupt:
            # Ctrl-C outside a running turn (inside one it aborts the turn): leave quietly.
            click.echo("", err=True)
            sys.exit(130)

    return wrapper


def fail(exc: RpError, as_json: bool = False) -> None:
    if as_json:
        echo_json({"error": exc.to_dict()})
    else:
        echo_error(exc)
    sys.exit(1)


def fail_on_store_fault(exc: BaseException, as_json: bool = False) -> None:
    """Exit with ``error [store.…]`` when ``exc`` is a disk or database fault that escaped as a
    raw OS or driver error (a lock file on a read-only filesystem, a lost connection); return
    otherwise, so that a real bug still shows its traceback."""
    from roleplay.harness.store.faults import store_fault

    fault = store_fault(exc)
    if fault is not None:
        fail(fault, as_json)


def json_text(value: Any) -> str:
    """Indented JSON with raw non-ASCII kept readable, but DEL, C1 controls, line separators, bidi
    controls and lone surrogates escaped as ``\\uXXXX`` (still the same JSON value)."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False, indent=2))


def echo_json(value: Any) -> None:
    click.echo(json_text(value))


def json_line(value: Any) -> str:
    """``value`` as one line of JSON (JSON Lines: ``rp play --json``), escaped as :func:`json_text`."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def state_of(ctx: click.Context) -> CliState:
    return ctx.ensure_object(CliState)
