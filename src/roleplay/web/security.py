"""Who may call the API: the token, and the browser's cross-origin guard.

- **Token.** When the server has one (it must, bound anywhere but loopback: ``rp serve`` takes
  ``RP_TOKEN`` or generates one and prints it once), every request but the login page carries it,
  as ``Authorization: Bearer …`` (API clients) or the ``rp_token`` cookie the login page sets
  (HttpOnly, SameSite=Strict, so page scripts can neither read it nor have another site send it).
  Without it: 401 in the one error envelope, except a browser asking for a page (``GET``/``HEAD``
  of a non-``/api`` path, ``Accept: text/html``): that is sent to ``/login?next=<the page>`` (303),
  and the login returns to ``next`` only when it is a path on this server (``safe_next``).
- **CSRF.** An unsafe method (POST, PUT, PATCH, DELETE) from a browser page of another origin is
  refused with 403: the ``Origin`` header must be the server's own origin or one allowed with
  ``--allow-origin``; without ``Origin``, ``Sec-Fetch-Site: cross-site`` is refused too. Clients
  that send neither (curl, scripts) are not browsers and pass.

Tokens are compared in constant time and never logged or echoed.
"""

from __future__ import annotations

import hmac
import json
import re
from http.cookies import SimpleCookie
from functools import partial
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import quote, urlsplit

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import envelope

TOKEN_COOKIE = "rp_token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = frozenset({"/login", "/api/v1/health"})
# Multipart uploads get the upload limit (plus framing); every other body the small one.
UPLOAD_PATHS = re.compile(r"^/api/v1/(assets/import|assets/[^/]+/avatar|mvu/inspect)$")
UPLOAD_FRAMING = 1024 * 1024


def token_matches(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


def safe_next(value: str | None) -> str:
    """``value`` when it is a local path (``/s/abc?x=1``), else ``/``: never another host
    (``//evil``, ``/\\evil``, ``https://…``), so the login cannot be used as an open redirect."""
    if not value or not value.startswith("/") or value[1:2] in ("/", "\\"):
        return "/"
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in value):  # browsers read a backslash as a slash
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or parts.path.startswith("/login"):
        return "/"
    return value


def wants_page(scope: Scope, headers: dict[str, str]) -> bool:
    """A browser navigating to a page (not an API call, a script's fetch or a static file)."""
    path: str = scope["path"]
    if scope["method"] not in ("GET", "HEAD") or path.startswith(("/api/", "/static/")) or path == "/api":
        return False
    return "text/html" in headers.get("accept", "")


def login_location(scope: Scope) -> str:
    target = scope["path"]
    query = scope.get("query_string", b"")
    if query:
        target += "?" + query.decode("latin-1")
    return "/login?next=" + quote(safe_next(target), safe="")


def request_headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def request_token(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    cookie = headers.get("cookie")
    if cookie:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie)
        except Exception:  # noqa: BLE001 - a malformed cookie header is just no token
            return None
        if TOKEN_COOKIE in jar:
            return jar[TOKEN_COOKIE].value
    return None


def own_origin(scope: Scope, headers: dict[str, str]) -> str | None:
    host = headers.get("host")
    if not host:
        return None
    return f"{scope.get('scheme', 'http')}://{host}"


class Guard:
    """The checks, apart from the middleware that applies them: a path served before the middleware
    stack (the event stream, ``app.py``) asks ``refusal`` and leaves every refusal to the stack."""

    def __init__(
        self,
        *,
        token: str | None,
        allowed_origins: Iterable[str] = (),
        max_body: int = 4 * 1024 * 1024,
        max_upload: int = 64 * 1024 * 1024,
    ) -> None:
        self.token = token
        self.allowed = frozenset(o.rstrip("/") for o in allowed_origins)
        self.max_body = max_body
        self.max_upload = max_upload

    def refusal(self, scope: Scope, headers: dict[str, str]) -> Callable[[Send], Awaitable[None]] | None:
        """What answers an HTTP request refused here (403, 401, the login redirect, 413); None when it passes."""
        if scope["method"] in UNSAFE_METHODS:
            refused = self._cross_origin(scope, headers)
            if refused is not None:
                return partial(_reply, status=403, body=envelope("http.cross_origin", refused))
        if self.token is not None and scope["path"] not in OPEN_PATHS and not token_matches(self.token, request_token(headers)):
            if wants_page(scope, headers):
                return partial(_redirect, location=login_location(scope))
            return partial(
                _reply,
                status=401,
                body=envelope("http.auth_required", "this server needs its token: Authorization: Bearer TOKEN, or log in at /login"),
                extra=[(b"www-authenticate", b"Bearer")],
            )
        limit = self.limit(scope)
        declared = headers.get("content-length", "")
        if declared.isdecimal() and int(declared) > limit:
            return partial(
                _reply, status=413, body=envelope("http.too_large", f"the request body is over the server's limit of {limit} bytes")
            )
        return None

    def limit(self, scope: Scope) -> int:
        return self.max_upload + UPLOAD_FRAMING if UPLOAD_PATHS.search(scope["path"]) else self.max_body

    def _cross_origin(self, scope: Scope, headers: dict[str, str]) -> str | None:
        origin = headers.get("origin")
        if origin is not None:
            origin = origin.rstrip("/")
            if origin == own_origin(scope, headers) or origin in self.allowed:
                return None
            return f"cross-origin {scope['method']} from {origin!r} refused (allow it with rp serve --allow-origin)"
        if headers.get("sec-fetch-site") == "cross-site":
            return f"cross-site {scope['method']} refused"
        return None


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, *, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.guard.refusal(scope, request_headers(scope))
        if refusal is not None:
            await refusal(send)
            return
        await self.app(scope, _capped(receive, self.guard.limit(scope)), send)


def _capped(receive: Receive, limit: int) -> Receive:
    """``receive`` that refuses a body (sent without a length, or longer than it said) past ``limit``."""
    seen = 0

    async def wrapped() -> Any:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"the request body is over the server's limit of {limit} bytes")
        return message

    return wrapped


async def _reply(send: Send, *, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


async def _redirect(send: Send, *, location: str) -> None:
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


__all__ = ["Guard", "SecurityMiddleware", "TOKEN_COOKIE", "request_headers", "request_token", "safe_next", "token_matches"]
