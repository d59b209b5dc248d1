"""The FastAPI application: one runtime shared by every request.

``create_app(runtime, config)`` serves an already opened runtime (tests); ``create_app(None,
config, opener=…)`` opens it in the lifespan, inside the server's event loop (``rp serve``), and
closes it after the last request. Nothing heavy is built per request: routes reach the runtime,
the asset service, the turn runner and the settings through ``web(request)``.

Feature changes (``rp features``, the settings page, another process) apply from the next new or
reopened conversation, as in the CLI: before a session is created or opened and before a run
starts, ``fresh_runtime()`` reads the ``features.enabled`` revision (one row) and, when it moved
and the set differs, builds a new runtime for what starts from then on. Runs keep the runtime they
started on (``runtime_in_use``); the replaced one's model clients are closed once none uses it.

Shutdown (``begin_shutdown``, called by ``rp serve`` on the first Ctrl-C, before uvicorn waits for
connections): open event streams end, running turns are aborted and awaited, so each ends
``aborted`` in the log.
"""

from __future__ import annotations

import asyncio
import gc
import html
import importlib
import re
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, AsyncIterator, Awaitable, Callable
from urllib.parse import quote

from fastapi import Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from roleplay import __version__
from roleplay.assets.service import AssetService
from roleplay.core.feature_set import KEY as FEATURES_KEY
from roleplay.core.feature_set import closure
from roleplay.core.runtime import RoleplayRuntime
from roleplay.core.settings import SettingsSnapshot, SettingsStore
from roleplay.harness.models.routes import Route

from . import errors
from .models import ErrorOut
from .runs import StartCall, TurnRunner
from .security import TOKEN_COOKIE, Guard, SecurityMiddleware, safe_next, token_matches
from .sse import ShutdownSignal, admit, stream_events

API = "/api/v1"
MiB = 1024 * 1024
# Every status an operation may answer with the error envelope (405 is the path's, not an operation's).
ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 422, 500, 503)


@dataclass
class WebConfig:
    default_route: Route  # the conversation route of stories that keep none (``rp serve --model``)
    token: str | None = None  # required from every client when set
    allowed_origins: tuple[str, ...] = ()  # origins besides the server's own that may POST
    max_upload_bytes: int = 64 * MiB  # an import or avatar upload; the importers cap what it unpacks to
    max_body_bytes: int = 4 * MiB  # any other request body
    ping_seconds: float = 15.0
    send_timeout: float = 10.0  # a stream client that takes no write for this long is dropped
    shutdown_timeout: float = 30.0


Rebuild = Callable[[RoleplayRuntime], Awaitable[RoleplayRuntime]]  # the old runtime → one with the saved features


async def rebuild_runtime(old: RoleplayRuntime) -> RoleplayRuntime:
    """The default: ``open_runtime`` on the same store, keeping the id source and Writer override."""
    from roleplay.features import open_runtime

    return await open_runtime(old.store, ids=old.ids, writer_default=old.writer_default)


@dataclass
class WebState:
    rt: RoleplayRuntime  # the runtime new work starts on; see fresh_runtime
    config: WebConfig
    runs: TurnRunner
    assets: AssetService
    shutdown: asyncio.Event = field(default_factory=ShutdownSignal)  # ends the open event streams when set
    loop: asyncio.AbstractEventLoop | None = None
    rebuild: Rebuild | None = rebuild_runtime
    features_revision: int | None = None  # of features.enabled when rt was last checked against it
    _users: dict[int, int] = field(default_factory=dict)  # id(runtime) → runs on it
    _retired: dict[int, RoleplayRuntime] = field(default_factory=dict)  # replaced, closed when unused
    _rebuilding: asyncio.Lock | None = None

    async def fresh_runtime(self) -> RoleplayRuntime:
        """The runtime for a new or reopened conversation: rebuilt first when the saved feature
        set changed since the last look (one settings read when it did not)."""
        settings = SettingsStore(self.rt.store)
        record = await settings.get(FEATURES_KEY)
        if record.revision == self.features_revision or self.rebuild is None:
            return self.rt
        if self._rebuilding is None:
            self._rebuilding = asyncio.Lock()
        async with self._rebuilding:
            record = await settings.get(FEATURES_KEY)  # another request may have rebuilt meanwhile
            if record.revision != self.features_revision:
                if frozenset(closure(record.value)) != self.rt.features:
                    fresh = await self.rebuild(self.rt)
                    old, self.rt = self.rt, fresh
                    self._retired[id(old)] = old
                    await self._close_unused(old)
                self.features_revision = record.revision
        return self.rt

    async def fresh_runtime_and_settings(self) -> tuple[RoleplayRuntime, SettingsSnapshot]:
        """``fresh_runtime``, with every global setting from the same read: a run freezes the
        settings at its prepare, and this spares it a second read of the table (a thread hop on
        SQLite, a round trip on PostgreSQL) on the way to its first token."""
        snapshot = await SettingsStore(self.rt.store).snapshot()
        if snapshot.record(FEATURES_KEY).revision == self.features_revision or self.rebuild is None:
            return self.rt, snapshot
        rt = await self.fresh_runtime()  # the features moved: rebuilt (or not) under its lock, then read again
        return rt, await SettingsStore(rt.store).snapshot()

    @asynccontextmanager
    async def runtime_in_use(self, rt: RoleplayRuntime) -> AsyncIterator[RoleplayRuntime]:
        """Hold ``rt`` for a run: a replaced runtime is closed only after its last run."""
        key = id(rt)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            yield rt
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
            await self._close_unused(rt)

    async def _close_unused(self, rt: RoleplayRuntime) -> None:
        if rt is not self.rt and id(rt) in self._retired and not self._users.get(id(rt)):
            del self._retired[id(rt)]
            await rt.aclose()

    async def close_rebuilt(self, opened: RoleplayRuntime | None) -> None:
        """At shutdown: close every runtime built here (``opened``'s owner closes that one)."""
        built = [*self._retired.values(), self.rt]
        self._retired.clear()
        for rt in built:
            if rt is not opened:
                await rt.aclose()

    def begin_shutdown(self) -> None:
        """Thread- and signal-safe: end the streams and abort the turns."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._shutdown_now)

    def _shutdown_now(self) -> None:
        self.shutdown.set()
        self.runs.closing = True
        for run in list(self.runs.active.values()):
            run.abort.set()


# Imported by the first turn on a real provider otherwise: the openai SDK alone holds the event
# loop for about a second (bench/serve.py saw every stream stall behind it). Done before serving.
# anyio's asyncio backend is imported by the first request that uses anyio; imported after the
# heap is frozen (settle_heap), its ~1,500 tracked objects would be walked by every full collection.
WARM_MODULES = ("roleplay.harness.models.openai_compat", "anyio._backends._asyncio")
# Likewise what the openai SDK's HTTP transport imports when its first client is built (~2,200
# tracked objects); another SDK version may use others, so these are imported when present.
OPTIONAL_WARM_MODULES = ("httpcore2", "truststore")


def warm_up() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


RunCall = Callable[[RoleplayRuntime, asyncio.Event], Awaitable[Any]]  # a run on a given runtime


def on_runtime(w: WebState, rt: RoleplayRuntime, call: RunCall) -> StartCall:
    """``call`` on ``rt``, which stays open until the call ends (a feature change meanwhile
    builds a new runtime for later runs; this one finishes on the set it started with)."""

    async def run(abort: asyncio.Event) -> Any:
        async with w.runtime_in_use(rt):
            return await call(rt, abort)

    return run


def settle_heap(app: FastAPI) -> None:
    """Leave what start-up built (modules, schemas, the runtime, the routes) out of every later
    collection.

    A full collection walks every tracked object, and with the imports and the runtime that is
    most of the heap: measured under bench/serve.py's load, one held the event loop for over 100 ms,
    twice the whole budget for a blocked loop. Frozen objects are never collected (they are
    alive for the server's life anyway); what serving allocates is collected as usual.

    FastAPI builds the included routers' routes (dependants, field infos, validators: some 21,000
    tracked objects here) when the first request reaches them, after the freeze, where every full
    collection would walk them for the server's life. Building the OpenAPI document builds them
    all, so it comes first (and the document, kept for ``/openapi.json``, is frozen with them)."""
    app.openapi()
    gc.collect()
    gc.freeze()


async def web(request: Request) -> WebState:
    # A coroutine, not a plain function: FastAPI runs a plain dependency on its thread pool, a
    # thread hop (and a wait for the loop to take the result back) on every request.
    state: WebState = request.app.state.web
    return state


Web = Annotated[WebState, Depends(web)]  # a route's handle on the shared server state

EVENTS_PATH = re.compile(rf"{API}/sessions/([^/]+)/events")


class App(FastAPI):
    """FastAPI, with the session event stream served before its middleware and router.

    An open stream lives as long as its client stays, and a full collection walks every object it
    keeps alive. Through the stack (nine middleware and routing layers, each a suspended coroutine
    with its closures, the route's request and dependency leftovers) an idle stream kept about 190
    GC-tracked objects; 200 streams added some 40 ms to each full collection, most of the budget for
    a blocked event loop (issue 16). Served here, a stream keeps only its own state: about 66 in all
    on uvicorn, some 40 of them uvicorn's own for the connection.

    Only a request the stack would serve as is goes this way: it passes the same ``Guard`` as the
    security middleware and has plain parameters, and the session exists. Anything else (refused,
    malformed, an unknown session, a cursor past the head, a store error) is handed, untouched, to
    the stack, where the declared route (``routes_turns.events``, which OpenAPI documents) answers
    it in the error envelope."""

    guard: Guard | None = None
    events_endpoint: Callable[..., Any] | None = None  # the declared route's, for scope["endpoint"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The stream runs in this frame: no further coroutine (one more object) held for its life.
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"].endswith("/events"):
            admitted = await self._admitted_stream(scope)
            if admitted is not None:
                w, session_id, cursor, follow = admitted
                del admitted
                await stream_events(
                    receive,
                    send,
                    w.rt.store,
                    session_id,
                    cursor,
                    follow=follow,
                    ping_seconds=w.config.ping_seconds,
                    send_timeout=w.config.send_timeout,
                    shutdown=w.shutdown,
                )
                return
        await super().__call__(scope, receive, send)

    async def _admitted_stream(self, scope: Scope) -> tuple[WebState, str, int | None, bool] | None:
        match = EVENTS_PATH.fullmatch(scope["path"])
        w: WebState | None = getattr(self.state, "web", None)
        telemetry = getattr(self, "_native_telemetry", None)  # FastAPI's own OpenTelemetry, when configured
        if match is None or w is None or self.guard is None or scope.get("root_path") or (telemetry is not None and telemetry.enabled()):
            return None  # (with telemetry on, the stack's spans cover every request)
        session_id = match[1]
        admitted = await admit(w.rt.store, self.guard, scope, session_id)
        if admitted is None:
            return None
        scope["endpoint"], scope["path_params"] = self.events_endpoint, {"session_id": session_id}  # as the router sets them
        return w, session_id, *admitted


Opener = Callable[[], AbstractAsyncContextManager[RoleplayRuntime]]


def create_app(
    runtime: RoleplayRuntime | None,
    config: WebConfig,
    *,
    opener: Opener | None = None,
    on_started: Callable[[WebState], None] | None = None,
    rebuild: Rebuild | None = rebuild_runtime,
) -> App:
    """``on_started(state)`` runs in the server's loop once the runtime is open, before serving.
    ``rebuild`` builds the runtime that replaces one whose features changed (None: never)."""

    def install(rt: RoleplayRuntime) -> WebState:
        state = WebState(rt, config, TurnRunner(rt.store), AssetService(rt.store), rebuild=rebuild)
        app.state.web = state
        return state

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(warm_up)
        if opener is not None:
            async with opener() as rt:
                state = install(rt)
                state.loop = asyncio.get_running_loop()
                if on_started is not None:
                    on_started(state)
                settle_heap(app)
                try:
                    yield
                finally:
                    state._shutdown_now()
                    await state.runs.shutdown(config.shutdown_timeout)
                    await state.close_rebuilt(rt)  # the opener closes its own
        else:
            app.state.web.loop = asyncio.get_running_loop()
            settle_heap(app)
            try:
                yield
            finally:
                app.state.web._shutdown_now()
                await app.state.web.runs.shutdown(config.shutdown_timeout)
                await app.state.web.close_rebuilt(runtime)

    app = App(
        title="roleplay",
        version=__version__,
        openapi_url=f"{API}/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan,
        responses={status: {"model": ErrorOut} for status in ERROR_STATUSES},
    )
    if runtime is not None:
        install(runtime)
        app.state.web.loop = None
    errors.install(app)
    app.guard = Guard(
        token=config.token, allowed_origins=config.allowed_origins, max_body=config.max_body_bytes, max_upload=config.max_upload_bytes
    )
    app.add_middleware(SecurityMiddleware, guard=app.guard)

    from . import routes_agents, routes_assets, routes_chats, routes_messages, routes_sessions, routes_settings, routes_tools, routes_turns

    routers = (routes_sessions, routes_turns, routes_messages, routes_chats, routes_agents, routes_assets, routes_settings, routes_tools)
    for module in routers:
        app.include_router(module.router, prefix=API)
    app.events_endpoint = routes_turns.events

    from .ui import install as install_ui  # the web app's pages and static files (roleplay.web.ui)

    install_ui(app)

    @app.get(f"{API}/health", tags=["server"])
    async def health() -> dict[str, Any]:
        return {"ok": True, "version": __version__}

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    async def login_page(error: bool = False, next: str = "/") -> HTMLResponse:
        note = "<p>That token is not right.</p>" if error else ""
        return HTMLResponse(_LOGIN.format(note=note, next=html.escape(safe_next(next), quote=True)))

    @app.post("/login", include_in_schema=False)
    async def login(token: Annotated[str, Form()], next: Annotated[str, Form()] = "/") -> Response:
        target = safe_next(next)  # only a page of this server: the login is no open redirect
        if config.token is None or not token_matches(config.token, token):
            again = "/login?error=true" + ("" if target == "/" else "&next=" + quote(target, safe=""))
            return RedirectResponse(again, status_code=303)
        resp = RedirectResponse(target, status_code=303)
        resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/")
        return resp

    @app.post("/logout", include_in_schema=False)
    async def logout() -> Response:
        resp = JSONResponse({"ok": True})
        resp.delete_cookie(TOKEN_COOKIE, path="/")
        return resp

    return app


_LOGIN = (
    "<!doctype html><html><head><meta charset=utf-8><title>roleplay: log in</title></head><body>"
    '<h1>roleplay</h1>{note}<form method=post action=/login><input type=hidden name=next value="{next}">'
    "<label>Token <input type=password name=token autocomplete=current-password autofocus></label> "
    "<button>Log in</button></form><p>The token was printed when the server started (or is $RP_TOKEN).</p></body></html>"
)


__all__ = ["API", "App", "WebConfig", "WebState", "create_app", "web"]
