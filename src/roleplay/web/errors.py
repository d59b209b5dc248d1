"""One error envelope for every response that is not a success.

``{"code", "message", "pointer", "problems"}`` (plus ``details`` when the error has some), the same
fields the CLI prints with ``--json``. The status follows from the error's class and code, so the
engine never needs to know about HTTP: a missing thing is 404, a lost race (``run.busy``, a stale
revision) 409, an over-large body 413, input the engine refuses 422, a database fault or a server
that is stopping 503, and any other refusal 400. ``docs/api.md`` lists the codes.
FastAPI's own request validation and routing errors are put in the same envelope.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from roleplay.errors import ConflictError, NotFoundError, RpError, ValidationError, pointer_from_parts

log = logging.getLogger("roleplay.web")

# Codes whose class does not say it all.
_CONFLICT_CODES = frozenset({"run.busy", "asset.in_use"})
# The statuses Starlette and FastAPI raise here (401 and 403 come from the security middleware,
# with their own codes; a body of the wrong media type is a 422 ``request.invalid``).
_HTTP_CODES = {400: "http.bad_request", 404: "http.not_found", 405: "http.method_not_allowed", 413: "http.too_large"}


def status_for(exc: RpError) -> int:
    """The HTTP status of an engine error."""
    code = exc.code
    if isinstance(exc, NotFoundError) or code.endswith("not_found"):
        return 404
    if isinstance(exc, ConflictError) or code in _CONFLICT_CODES or code.endswith("conflict") or code.endswith(".busy"):
        return 409
    if "too_large" in code:
        return 413
    if code.startswith("http.auth"):
        return 401
    if code.startswith("http.forbidden") or code.startswith("http.cross_origin"):
        return 403
    if code.startswith(("store.", "server.")):
        return 503  # the database is unavailable, read-only or full, or the server is stopping: not the client's fault
    if isinstance(exc, ValidationError):
        return 422
    return 400


def envelope(code: str, message: str, pointer: str | None = None, problems: list[dict[str, Any]] | None = None,
             details: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = {"code": code, "message": message, "pointer": pointer, "problems": problems or []}
    if details:
        body["details"] = details
    return body


def error_response(exc: RpError, status: int | None = None) -> JSONResponse:
    body = envelope(exc.code, exc.message, exc.pointer, [p.to_dict() for p in exc.problems], exc.details)
    return JSONResponse(body, status_code=status or status_for(exc))


async def _rp_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RpError)
    return error_response(exc)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems: list[dict[str, Any]] = []
    for err in exc.errors():
        loc = list(err.get("loc", ()))
        where = loc[0] if loc else "body"
        # The body's pointer is relative to the JSON document; a query or path parameter is named.
        # Undecodable JSON is the whole document (its loc holds a character offset, not a key).
        if err.get("type") == "json_invalid":
            pointer = ""
        else:
            pointer = pointer_from_parts(loc[1:]) if where == "body" else pointer_from_parts(loc)
            pointer += (err.get("ctx") or {}).get("pointer", "")  # a whole-body check names its place
        problems.append({"code": f"request.{err.get('type', 'invalid')}", "message": str(err.get("msg", "invalid")), "pointer": pointer})
    first: dict[str, Any] = problems[0] if problems else {"message": "invalid request", "pointer": None}
    return JSONResponse(
        envelope("request.invalid", f"the request is not valid: {first['message']}", first["pointer"], problems), status_code=422
    )


async def _model_error(_: Request, exc: Exception) -> JSONResponse:
    # A library model refusing a value that came from the request (the routes convert the ones
    # they expect; this is the net for the rest): the client's input, not a server fault.
    assert isinstance(exc, PydanticValidationError)
    problems: list[dict[str, Any]] = [
        {
            "code": f"value.{e.get('type', 'invalid')}",
            "message": str(e.get("msg", "invalid")),
            "pointer": pointer_from_parts(list(e.get("loc", ()))),
        }
        for e in exc.errors()
    ]
    first = problems[0] if problems else {"message": "invalid value", "pointer": None}
    return JSONResponse(envelope("value.invalid", f"a value is not valid: {first['message']}", first["pointer"], problems), status_code=422)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http.{exc.status_code}")
    return JSONResponse(envelope(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return JSONResponse(envelope("server.internal", "an unexpected error; the server log has the details"), status_code=500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RpError, _rp_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(PydanticValidationError, _model_error)
    app.add_exception_handler(Exception, _unexpected)


__all__ = ["envelope", "error_response", "install", "status_for"]
