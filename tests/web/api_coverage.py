"""What the API coverage tests share: the documented error codes, the app's routes, and a client
that records which route each request reached and which error code it got.

The documented codes are read from the table in ``docs/api.md`` (the one place they are listed),
so a code added there without a request that produces it, or produced without being added there,
fails ``test_api_error_codes.py``.
"""

from __future__ import annotations

import ast
import re
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import httpx
from starlette.routing import Mount

from roleplay.web.app import create_app
from web.web_support import config, opened_runtime

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "api.md"
WEB_SRC = ROOT / "src" / "roleplay" / "web"
_ROW = re.compile(r"^\|\s*`(?P<code>[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+)`\s*\|\s*(?P<status>\d{3})\s*\|")


def documented_codes(doc: Path = API_DOC) -> dict[str, int]:
    """``code → status`` from the error-code table of the API's docs (rows ``| `code` | 409 | … |``)."""
    text = doc.read_text(encoding="utf-8")
    _, found, table = text.partition("\n## Error codes\n")
    assert found, f"{doc} has no '## Error codes' section"
    table = table.split("\n## ", 1)[0]
    codes: dict[str, int] = {}
    for line in table.splitlines():
        m = _ROW.match(line)
        if m:
            assert m["code"] not in codes, f"{m['code']} is listed twice in {doc}"
            codes[m["code"]] = int(m["status"])
    return codes


# -- routes -------------------------------------------------------------------------------------------

RouteKey = tuple[str, str]  # (METHOD, full path template)


def app_routes(app: Any) -> dict[RouteKey, Callable[..., Any]]:
    """Every (method, path template) the app serves, with its endpoint; ``/static`` (files) aside.
    Included routers are walked with their prefix (FastAPI keeps the original route objects)."""
    out: dict[RouteKey, Callable[..., Any]] = {}

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if hasattr(route, "original_router"):
                walk(route.original_router.routes, prefix + route.include_context.prefix)
            elif isinstance(route, Mount):
                continue
            else:
                for method in sorted(route.methods - {"HEAD"}):
                    out[(method, prefix + route.path)] = route.endpoint

    walk(app.routes, "")
    return out


# -- a recording client -------------------------------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    endpoint: Callable[..., Any] | None
    status: int
    code: str | None


@dataclass
class Recorder:
    """Wraps the ASGI app: each request's endpoint (the route it reached) and its error code."""

    app: Any
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []
        body: list[bytes] = []

        async def tap(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and status and status[0] >= 400:
                body.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, tap)
        finally:
            code = None
            if status and status[0] >= 400 and body:
                try:
                    code = httpx.Response(status[0], content=b"".join(body)).json().get("code")
                except ValueError:
                    code = None
            self.seen.append(Seen(scope["method"], scope["path"], scope.get("endpoint"), status[0] if status else 0, code))

    def reached(self) -> set[tuple[str, Callable[..., Any]]]:
        return {(s.method, s.endpoint) for s in self.seen if s.endpoint is not None}

    def errors(self) -> list[Seen]:
        return [s for s in self.seen if s.status >= 400]


@dataclass
class Api:
    client: httpx.AsyncClient
    rt: Any
    app: Any
    recorder: Recorder
    url: str


@asynccontextmanager
async def recorded_api(url: str, *, raise_app_exceptions: bool = True, **kw: Any) -> AsyncIterator[Api]:
    """The app on an opened runtime (as ``api_client``), behind a ``Recorder``."""
    async with opened_runtime(url) as rt:
        app = create_app(rt, config(**kw))
        recorder = Recorder(app)
        transport = httpx.ASGITransport(app=recorder, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield Api(client, rt, app, recorder, url)
        await app.state.web.runs.shutdown(5)


# -- the codes the web package raises -----------------------------------------------------------------

_RAISERS = {"RpError", "NotFoundError", "ConflictError", "ValidationError", "Problem", "envelope"}
_CODE = re.compile(r"^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$")


def raised_codes(root: Path = WEB_SRC) -> tuple[dict[str, str], dict[str, str]]:
    """The error codes written in the web package's source: ``(codes, suffixes)``, each mapped to
    the file that has it. A code built as ``f"{prefix}.revision_required"`` gives its suffix.
    ``serve.py`` is the ``rp serve`` command (its errors are the CLI's, not responses)."""
    codes: dict[str, str] = {}
    suffixes: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name == "serve.py":
            continue
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            args: list[ast.expr] = []
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in _RAISERS and node.args:
                args = [node.args[0]]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and len(node.args) == 2:
                key = node.args[0]
                if isinstance(key, ast.Constant) and key.value == "code":  # error.get("code", "default.code")
                    args = [node.args[1]]
            elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_HTTP_CODES" for t in node.targets):
                assert isinstance(node.value, ast.Dict)
                args = [v for v in node.value.values if v is not None]
            elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_HTTP_CODES" and isinstance(node.value, ast.Dict):
                args = [v for v in node.value.values if v is not None]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _CODE.match(arg.value):
                    codes[arg.value] = where
                elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[-1], ast.Constant):
                    tail = str(arg.values[-1].value)
                    if tail.startswith("."):
                        suffixes[tail] = where
    return codes, suffixes


__all__ = ["API_DOC", "Api", "Recorder", "app_routes", "documented_codes", "raised_codes", "recorded_api"]
