"""The FastAPI application: one runtime shared by every request.

``create_app(runtime, config)`` serves an already opened runtime (tests); ``create_app(None,
config, opener=…)`` opens it in the lifespan, inside the server's event loop (``rp serve``), and
closes it after the last request. Nothing heavy is built per request: routes reach the runtime,
the asset service, the turn runner and the settings through ``web(request)``.

Shutdown (``begin_shutdown``, called by ``rp serve`` on the first Ctrl-C, before uvicorn waits for
connections): open event streams end, running turns are aborted and awaited, so each ends
``aborted`` in the log.
"""

from __future__ import annotations

import asyncio
import html
import importlib
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, AsyncIterator, Callable
from urllib.parse import quote

from fastapi import Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from roleplay import __version__
from roleplay.assets.service import AssetService
from roleplay.core.runtime import RoleplayRuntime
from roleplay.harness.models.routes import Route

from . import errors
from .models import ErrorOut
from .runs import TurnRunner
from .security import TOKEN_COOKIE, SecurityMiddleware, safe_next, token_matches

API = "/api/v1"
MiB = 1024 * 1024


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


@dataclass
class WebState:
    rt: RoleplayRuntime
    config: WebConfig
    runs: TurnRunner
    assets: AssetService
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    loop: asyncio.AbstractEventLoop | None = None

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
WARM_MODULES = ("roleplay.harness.models.openai_compat",)


def warm_up() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)


def web(request: Request) -> WebState:
    state: WebState = request.app.state.web
    return state


Web = Annotated[WebState, Depends(web)]  # a route's handle on the shared server state
Opener = Callable[[], AbstractAsyncContextManager[RoleplayRuntime]]


def create_app(
    runtime: RoleplayRuntime | None,
    config: WebConfig,
    *,
    opener: Opener | None = None,
    on_started: Callable[[WebState], None] | None = None,
) -> FastAPI:
    """``on_started(state)`` runs in the server's loop once the runtime is open, before serving."""

    def install(rt: RoleplayRuntime) -> WebState:
        state = WebState(rt, config, TurnRunner(rt.store), AssetService(rt.store))
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
                try:
                    yield
                finally:
                    state._shutdown_now()
                    await state.runs.shutdown(config.shutdown_timeout)
        else:
            app.state.web.loop = asyncio.get_running_loop()
            try:
                yield
            finally:
                app.state.web._shutdown_now()
                await app.state.web.runs.shutdown(config.shutdown_timeout)

    app = FastAPI(
        title="roleplay",
        version=__version__,
        openapi_url=f"{API}/openapi.json",
        docs_url="/api/docs",
        redoc_url=None,
        lifespan=lifespan,
        responses={status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 413, 422)},
    )
    if runtime is not None:
        install(runtime)
        app.state.web.loop = None
    errors.install(app)
    app.add_middleware(
        SecurityMiddleware,
        token=config.token,
        allowed_origins=config.allowed_origins,
        max_body=config.max_body_bytes,
        max_upload=config.max_upload_bytes,
    )

    from . import routes_agents, routes_assets, routes_chats, routes_messages, routes_sessions, routes_settings, routes_tools, routes_turns

    routers = (routes_sessions, routes_turns, routes_messages, routes_chats, routes_agents, routes_assets, routes_settings, routes_tools)
    for module in routers:
        app.include_router(module.router, prefix=API)

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


__all__ = ["API", "WebConfig", "WebState", "create_app", "web"]
