"""Turning provider failures into stable ``RpError`` codes, and deciding which ones to retry.

Codes (the public contract):

- ``model.auth``: 401/403, the key is missing, wrong or not allowed.
- ``model.unknown_model``: 404, or a 400 whose message says the model does not exist.
- ``model.context_overflow``: the prompt plus ``max_tokens`` exceeds the context window
  (``details.limit`` holds the window when the message states it).
- ``model.insufficient_balance``: 402 (DeepSeek's "Insufficient Balance").
- ``model.rate_limited``: 429 after every retry was used.
- ``model.server_error``: 5xx after every retry, or an error event inside a stream.
- ``model.timeout`` / ``model.connection``: the request could not complete, after retries.
- ``model.tools_unsupported``: the endpoint refused a request because it offered tools the model
  or server cannot use (Ollama "… does not support tools", llama.cpp "tools param requires
  --jinja flag", vLLM "auto tool choice requires --enable-auto-tool-choice", OpenRouter "No
  endpoints found that support tool use"). Never retried: the same request fails the same way.
- ``model.bad_request``: any other 4xx; the provider's message is kept (redacted).

Messages never contain the API key: provider messages are passed through ``redact`` because some
of them echo part of the key back. Nor do they contain credentials of the base URL
(``http://user:pass@host/v1?token=…``): URLs are shown through ``redact_url``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roleplay.errors import RpError
from roleplay.redact import redact_url, redact_urls

from .types import Capabilities

if TYPE_CHECKING:
    import openai

_KEYLIKE = re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-*]{4,}")
_UNKNOWN_MODEL = re.compile(
    r"model[^.]{0,80}?(not exist|does not exist|not found)|unknown model|no such model|invalid model",
    re.IGNORECASE,
)

# The words of the known tool refusals (see the module docstring); each names tools explicitly,
# so an unrelated 400 is never mistaken for one.
_TOOLS_UNSUPPORTED = re.compile(
    r"does not support tools|tools param requires --jinja|unsupported param: tools|tool choice requires --enable-auto-tool-choice"
    r"|no endpoints found that support tool use|(tools|tool calls|function calling) (are|is) not supported",
    re.IGNORECASE,
)


def refuses_tools(exc: BaseException) -> bool:
    import openai  # only a real provider's failures reach here; the SDK is loaded by then

    return (
        isinstance(exc, openai.APIStatusError) and 400 <= exc.status_code < 600 and bool(_TOOLS_UNSUPPORTED.search(provider_message(exc)))
    )


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for the failures worth a second try.

    No jitter: a self-hosted app has few concurrent clients, and a fixed schedule keeps the retry
    log (and tests) reproducible. A ``Retry-After`` header wins when it is shorter than the cap.
    """

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        if retry_after is not None and 0 <= retry_after <= self.max_delay:
            return retry_after
        return min(self.max_delay, self.base_delay * (2 ** (retry_number - 1)))


def redact(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub(lambda m: f"{m.group(1)}-***", redact_urls(text))


def is_retryable(exc: BaseException) -> bool:
    import openai  # only a real provider's failures reach here; the SDK is loaded by then

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return (exc.status_code == 429 or exc.status_code >= 500) and not refuses_tools(exc)
    return False


def is_timeout(exc: BaseException) -> bool:
    """Whether a failure is a timeout rather than an unreachable or vanished server.

    The SDK's aiohttp transport reports every aiohttp connection error (refused, reset, a server
    that hung up) as a connect *timeout*; the aiohttp error it wraps says which it really was, and
    aiohttp's own timeouts are ``TimeoutError`` subclasses."""
    import openai  # only a real provider's failures reach here; the SDK is loaded by then

    if not isinstance(exc, openai.APITimeoutError):
        return False
    cause: BaseException | None = exc.__cause__
    while cause is not None:
        if type(cause).__module__.split(".")[0] == "aiohttp":
            return isinstance(cause, TimeoutError)
        cause = cause.__cause__ or cause.__context__
    return True


def retry_after_seconds(exc: BaseException) -> float | None:
    import openai  # only a real provider's failures reach here; the SDK is loaded by then

    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if headers.get("retry-after-ms") is not None:
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after") is not None:
            return float(headers["retry-after"])
    except ValueError:
        # HTTP-date form: rare for LLM APIs; fall back to our own schedule.
        return None
    return None


def provider_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) else str(exc)


def map_error(
    exc: BaseException,
    *,
    provider: str,
    model: str,
    base_url: str,
    caps: Capabilities,
    api_key: str | None,
    attempts: int,
) -> RpError:
    """The ``RpError`` for a failed request; ``attempts`` counts the tries already made."""
    import openai

    where = f"{provider} model {model!r} at {redact_url(base_url)}"
    details: dict[str, Any] = {"provider": provider, "model": model, "attempts": attempts}
    raw = redact(provider_message(exc), api_key)
    if is_timeout(exc):
        return RpError("model.timeout", f"{where} timed out after {attempts} attempt(s)", details=details)
    if isinstance(exc, openai.APIConnectionError):
        return RpError(
            "model.connection",
            f"could not reach {where} after {attempts} attempt(s); check the base URL and network",
            details=details,
        )
    if not isinstance(exc, openai.APIStatusError):
        # An error event inside an SSE stream: the server accepted the request, then failed.
        return RpError("model.server_error", f"{where} failed while streaming: {raw}", details=details)
    status = exc.status_code
    details["status"] = status
    if exc.code:
        details["provider_code"] = exc.code
    if refuses_tools(exc):
        return RpError(
            "model.tools_unsupported",
            f"{where} cannot call tools (HTTP {status}: {raw}); mark the route with ?tools=off, e.g. {provider}/{model}?tools=off",
            details=details,
        )
    if status in (401, 403):
        return RpError(
            "model.auth",
            f"{where} rejected the API key (HTTP {status}); check the key for this provider",
            details=details,
        )
    if status == 402:
        return RpError("model.insufficient_balance", f"{where}: {raw}", details=details)
    if status == 429:
        return RpError(
            "model.rate_limited",
            f"{where} is rate limiting requests (HTTP 429, {attempts} attempt(s)); wait and try again",
            details=details,
        )
    if status >= 500:
        return RpError("model.server_error", f"{where} failed with HTTP {status} after {attempts} attempt(s): {raw}", details=details)
    overflow = _context_overflow(exc, raw, caps)
    if overflow is not None:
        if overflow:
            details["limit"] = overflow
        window = f" of {overflow} tokens" if overflow else ""
        return RpError(
            "model.context_overflow",
            f"the conversation is longer than the context window{window} of {where}; compact or shorten it",
            details=details,
        )
    if status == 404 or exc.code == "model_not_found" or _UNKNOWN_MODEL.search(raw):
        return RpError(
            "model.unknown_model",
            f"{where}: the model is unknown to this endpoint ({raw}); run `rp models list`",
            details=details,
        )
    return RpError("model.bad_request", f"{where} rejected the request (HTTP {status}): {raw}", details=details)


def _context_overflow(exc: openai.APIStatusError, message: str, caps: Capabilities) -> int | None:
    """The window size (0 when unknown) if this is a context overflow, else None."""
    pattern = caps.context_overflow_pattern
    match = re.search(pattern, message) if pattern else None
    if match:
        return int(match.group(1)) if match.groups() and match.group(1) else 0
    if exc.code == "context_length_exceeded":
        found = re.search(r"maximum context length is (\d+) tokens", message)
        return int(found.group(1)) if found else 0
    return None
