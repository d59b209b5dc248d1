"""``rp serve``: the HTTP API on uvicorn, one process, async end to end.

It binds to loopback unless told otherwise. Anywhere else it needs a token: ``RP_TOKEN``, or one it
generates and prints once (stderr); clients send it as a bearer token, browsers log in at /login.
The store and runtime are opened once, inside the server's event loop, and shared by every request.

The first Ctrl-C (or SIGTERM) ends the event streams and aborts running turns before uvicorn waits
for connections, so each such turn ends ``aborted`` in the log and the process exits promptly; a
second Ctrl-C forces the exit.
"""

from __future__ import annotations

import inspect
import ipaddress
import json
import os
import secrets
import signal
import socket
import sys
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any, AsyncIterator

import click
import uvicorn

from roleplay.cli_context import CliState, fail, home_option, json_option, state_of
from roleplay.errors import RpError

MiB = 1024 * 1024
# Seconds an idle keep-alive connection stays open. uvicorn's 5 s made a client that reused one just
# as the server closed it see "server disconnected" (bench/serve.py, 200 sessions); proxies keep 60+.
KEEP_ALIVE = 75


def server_options() -> dict[str, Any]:
    """uvicorn's options for every ``rp serve`` process (and bench/serve.py's server): the C event
    loop and HTTP parser, named rather than left to uvicorn's "auto" so a missing dependency is an
    error, not a silently slower server. Every session's streaming shares one loop, so its CPU per
    request and per frame is latency for all of them (issue 16). uvloop has no Windows build; there
    the standard loop serves."""
    loop = "asyncio" if sys.platform == "win32" else "uvloop"
    return {"loop": loop, "http": "httptools", "timeout_keep_alive": KEEP_ALIVE}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_default_route(spec: str | None) -> Any:
    """``--model``, else the environment's route (``RP_MODEL``, then a key), else the offline demo."""
    from roleplay.harness.models.routes import resolve_route

    if spec:
        return resolve_route(spec)
    try:
        return resolve_route(None)
    except RpError:
        return resolve_route("demo")


@click.command("serve")
@home_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind; anything but loopback needs a token.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free port).")
@click.option("--model", "model_spec", help="Default route for stories that keep none (default: $RP_MODEL, a configured key, else demo).")
@click.option("--allow-origin", "allow_origins", multiple=True, help="Another origin whose pages may POST here (repeat).")
@click.option("--max-upload-mb", default=64, show_default=True, type=click.IntRange(1, 256), help="Largest upload accepted.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Server processes on the port (PostgreSQL only).")
@json_option
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str,
    port: int,
    model_spec: str | None,
    allow_origins: tuple[str, ...],
    max_upload_mb: int,
    workers: int,
    as_json: bool,
) -> None:
    """Serve the HTTP API (and its docs at /api/docs) until Ctrl-C.

    With --json, one line of JSON on stdout once it listens: {"url", "docs", "defaultRoute"}."""
    from .app import WebConfig, create_app

    state = state_of(ctx)
    try:
        state.paths  # the home's stored model keys count for the default route too
        route = server_default_route(model_spec)
        if workers > 1:
            _check_workers(state, port)
    except RpError as exc:
        fail(exc, as_json)
        return
    token = os.environ.get("RP_TOKEN") or None
    if not is_loopback(host) and token is None:
        token = secrets.token_urlsafe(24)
        click.echo(f"rp serve: {host} is not loopback, so clients need this token (shown once; set RP_TOKEN to choose one):", err=True)
        click.echo(f"  {token}", err=True)
    if workers > 1:
        _serve_workers(state, host, port, route.spec, allow_origins, max_upload_mb, token, workers, as_json)
        return
    config = WebConfig(default_route=route, token=token, allowed_origins=allow_origins, max_upload_bytes=max_upload_mb * MiB)
    app = create_app(None, config, opener=runtime_opener(state), rebuild=runtime_rebuilder(state))
    server = _Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=10, **server_options()),
        app,
        as_json=as_json,
    )
    # uvicorn re-raises the signal it stopped on once it has shut down cleanly; SIGTERM (systemd,
    # docker stop) is then a clean stop like Ctrl-C, not a kill with status 143.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(1)
    click.echo("rp serve: stopped", err=True)


def runtime_opener(state: CliState) -> Any:
    """Opens the store and the runtime with the saved features, inside the server's event loop."""

    @asynccontextmanager
    async def opener() -> AsyncIterator[Any]:
        from roleplay.assets.seeds import ensure_seeds, language_notice
        from roleplay.features import open_runtime
        from roleplay.harness.models.routes import resolve_route

        writer = os.environ.get("RP_WRITER_MODEL")
        async with state.open_store() as store:
            factory = state.runtime_factory or open_runtime
            rt = factory(store, writer_default=resolve_route(writer) if writer else None)
            if inspect.isawaitable(rt):
                rt = await rt
            notice = language_notice(await ensure_seeds(rt.assets))
            if notice:  # the first seeding stored the user's language: say so, once
                click.echo(f"rp serve: {notice}", err=True)
            try:
                yield rt
            finally:
                await rt.aclose()

    return opener


def runtime_rebuilder(state: CliState) -> Any:
    """Builds the runtime that replaces one whose saved features changed, the opener's way."""

    async def rebuild(old: Any) -> Any:
        from roleplay.features import open_runtime

        factory = state.runtime_factory or open_runtime
        rt = factory(old.store, writer_default=old.writer_default)
        return await rt if inspect.isawaitable(rt) else rt

    return rebuild


# -- several worker processes on one port ----------------------------------------------------------

WORKER_SETTINGS = "RP_SERVE_WORKER_SETTINGS"  # what each worker process builds its app from


def _check_workers(state: CliState, port: int) -> None:
    # Workers see each other's events only through PostgreSQL's LISTEN/NOTIFY; on SQLite a stream
    # attached to one worker would miss the turns another plays.
    if state.paths.is_sqlite:
        raise RpError(
            "serve.workers_need_postgres",
            "--workers needs RP_DATABASE_URL=postgresql://… (SQLite has no notifications between processes); run one process on SQLite",
            pointer="/workers",
        )
    if port == 0:
        raise RpError("serve.workers_need_port", "--workers needs a fixed --port", pointer="/port")


def _serve_workers(
    state: CliState,
    host: str,
    port: int,
    route: str,
    origins: tuple[str, ...],
    max_upload_mb: int,
    token: str | None,
    workers: int,
    as_json: bool,
) -> None:
    os.environ[WORKER_SETTINGS] = json.dumps({"home": state.home, "model": route, "origins": list(origins), "maxUploadMb": max_upload_mb})
    if token is not None:
        os.environ["RP_TOKEN"] = token  # the workers inherit it; it is never printed again
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/"
    if as_json:
        click.echo(json.dumps({"url": url, "docs": f"{url}api/docs", "defaultRoute": route, "workers": workers}))
        sys.stdout.flush()
    click.echo(f"rp serve: {url}  ({workers} workers · API docs: /api/docs · Ctrl-C stops)", err=True)
    uvicorn.run(
        "roleplay.web.serve:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        timeout_graceful_shutdown=10,
        **server_options(),
    )
    click.echo("rp serve: stopped", err=True)


def worker_app() -> Any:
    """The app of one worker process (``uvicorn --factory``), from the settings ``rp serve`` left in
    the environment. A worker has no ``_Server`` of its own, so its first SIGTERM or SIGINT reaches
    the app through the handlers uvicorn installed (wrapped at startup): streams end, turns abort."""
    from roleplay.harness.models.routes import resolve_route

    from .app import WebConfig, create_app

    settings = json.loads(os.environ[WORKER_SETTINGS])
    state = CliState(home=settings["home"])
    state.paths  # the home's stored model keys, as in the parent
    config = WebConfig(
        default_route=resolve_route(settings["model"]),
        token=os.environ.get("RP_TOKEN") or None,
        allowed_origins=tuple(settings["origins"]),
        max_upload_bytes=settings["maxUploadMb"] * MiB,
    )
    return create_app(None, config, opener=runtime_opener(state), on_started=_wind_down_on_signals, rebuild=runtime_rebuilder(state))


def _wind_down_on_signals(web_state: Any) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)

        def handler(number: int, frame: FrameType | None, previous: Any = previous) -> None:
            web_state.begin_shutdown()
            if callable(previous):
                previous(number, frame)

        signal.signal(sig, handler)


def _interrupt(sig: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class _Server(uvicorn.Server):
    """uvicorn's server, telling the app to wind down on the first signal and printing the URL."""

    def __init__(self, config: uvicorn.Config, app: Any, *, as_json: bool = False) -> None:
        super().__init__(config)
        self.app = app
        self.as_json = as_json

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            host, port = self.servers[0].sockets[0].getsockname()[:2] if self.servers else (self.config.host, self.config.port)
            shown = f"[{host}]" if ":" in str(host) else host
            url = f"http://{shown}:{port}/"
            if self.as_json:
                # One line, so a script can read it with readline().
                click.echo(json.dumps({"url": url, "docs": f"{url}api/docs", "defaultRoute": self.app.state.web.config.default_route.spec}))
                sys.stdout.flush()
            click.echo(f"rp serve: {url}  (API docs: /api/docs · Ctrl-C stops)", err=True)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        state = getattr(self.app.state, "web", None)
        if state is not None and not self.should_exit:
            click.echo("rp serve: stopping (running turns are aborted)…", err=True)
            state.begin_shutdown()
        super().handle_exit(sig, frame)


__all__ = ["serve_command", "is_loopback", "server_default_route"]
