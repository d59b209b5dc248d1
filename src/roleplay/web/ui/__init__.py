"""The web app's pages: server-rendered Jinja2 on the same FastAPI app as the HTTP API.

Pages render their first paint from the library directly (no round trip through the JSON API);
the small ES modules in ``web/static`` then call the JSON API under ``/api/v1`` for everything that
changes something, and follow a story live through its SSE tail. Every page carries a strict
Content-Security-Policy: scripts and styles only from this origin, never inline, so a card's
``<script>`` or ``onerror=`` could not run even if it slipped past the sanitiser.

``install(app)`` is the one hook the app factory calls: it mounts ``/static`` and the page routes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

WEB_DIR = Path(__file__).resolve().parent.parent
TEMPLATES = Jinja2Templates(directory=str(WEB_DIR / "templates"))

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def page(request: Request, template: str, context: dict[str, Any], *, status_code: int = 200) -> HTMLResponse:
    """A rendered page (or fragment) with the security headers every page carries."""
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status_code, headers=PAGE_HEADERS)


def install(app: FastAPI) -> None:
    from . import library, pages, settings, story

    app.mount("/static", StaticFiles(directory=str(WEB_DIR / "static")), name="static")
    app.include_router(pages.router)
    app.include_router(library.router)
    app.include_router(story.router)
    app.include_router(settings.router)


__all__ = ["CSP", "PAGE_HEADERS", "install", "page"]
