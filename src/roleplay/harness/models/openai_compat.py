"""A ``ChatModel`` for any OpenAI-compatible Chat Completions endpoint, on ``openai.AsyncOpenAI``.

Always streams: the loop shows deltas live, and ``complete()`` drains the same path, so there is one
response-assembly code path to get right. The SDK's own retries are off (``max_retries=0``) so
that every retry is ours: counted, logged as a warning, and slept through an injectable ``sleep``.
Retries only happen before the first byte of a stream; once deltas reached the caller a retry
would duplicate them, so a mid-stream failure is raised as is.

The request goes through the SDK's documented low-level ``client.post`` (its transport, timeouts,
status-error mapping, SSE decoding and in-stream ``error`` handling) with the frames read as plain
JSON dicts. ``chat.completions.create`` would rebuild the body through its TypedDict transform and
every frame into pydantic models first: about a quarter of a loaded server's CPU (issue 16's
benchmark) went there, for objects this module only reads a few keys of. The body is read as a
batch of frames per read from the socket (``sse_frames.FrameBatches``), and ``stream_batches``
hands each batch on whole, so the layers above take one step per read, not one per frame.

The parts of a request that are the same every time (the URL of ``/chat/completions``, the SDK's
default headers, the transport client's merge of them) are what the SDK and httpx2 compute anew
per request; ``AsyncOpenAI`` (a subclass of the SDK's) and ``_HttpClient`` remember them per client (see there).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, cast
from urllib.parse import urlsplit

import httpx2
import openai
from openai._models import FinalRequestOptions

from roleplay.errors import RpError
from roleplay.redact import redact_url

from .failures import RetryPolicy, is_retryable, is_timeout, map_error, retry_after_seconds
from .sse_frames import AIOHTTP_READ, FrameBatches
from .types import (
    Capabilities,
    Completed,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    request_logged,
)
from .wire import messages_to_wire, tool_choice_to_wire, tools_to_wire, usage_from_wire

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class PreparedRequest:
    """What will be sent: the base URL chosen for this request and the SDK keyword arguments."""

    base_url: str
    kwargs: dict[str, Any]
    thinking: bool
    warnings: list[str] = field(default_factory=list)


def beta_url_for(base_url: str) -> str:
    """DeepSeek's beta lives beside ``/v1``, not under it: ``https://api.deepseek.com/beta``."""
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/beta"


class OpenAICompatModel:
    # The provider answers over the network: the loop sends a step's request while it logs the
    # step, and this waits on ``types.REQUEST_LOGGED`` before its answer goes up (types.py).
    sends_before_logged = True

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None,
        provider: str = "openai",
        label: str | None = None,
        capabilities: Capabilities | None = None,
        thinking_default: bool = False,
        beta_base_url: str | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep | None = None,
        timeout: float = 300.0,
        connect_timeout: float = 10.0,
        default_max_tokens: int | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.label = label or f"{provider}/{model}"
        self.capabilities = capabilities or Capabilities()
        self.base_url = base_url.rstrip("/")
        self.beta_base_url = (beta_base_url or beta_url_for(self.base_url)).rstrip("/")
        # Whether thinking is on when a request names no effort: a property of the model (DeepSeek
        # V4 defaults to thinking; the legacy ``deepseek-chat`` alias does not).
        self.thinking_default = thinking_default
        self.retry = retry or RetryPolicy()
        self._sleep: Sleep = sleep or asyncio.sleep
        self._timeout = openai.Timeout(timeout, connect=connect_timeout)
        self.default_max_tokens = default_max_tokens
        # Local servers (Ollama, llama.cpp) take no key, but the SDK insists on a non-empty one.
        self._api_key = api_key or "no-key"
        self._clients: dict[str, openai.AsyncOpenAI] = {}
        self._aiohttp: dict[str, bool] = {}  # by base URL: its client reads through aiohttp

    def __repr__(self) -> str:
        # Never show the key or URL credentials, even in debug output.
        return f"OpenAICompatModel(provider={self.provider!r}, model={self.model!r}, base_url={redact_url(self.base_url)!r})"

    def prepare(self, request: ModelRequest) -> PreparedRequest:
        caps = self.capabilities
        warnings: list[str] = []
        effort = request.reasoning_effort
        thinking = self.thinking_default if effort is None else effort != "none"
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages_to_wire(request.messages, caps),
            "stream": True,
        }
        if caps.supports_stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        extra_body: dict[str, Any] = {}
        base_url = self.base_url
        if request.tools:
            kwargs["tools"] = tools_to_wire(request.tools, caps)
            choice = request.tool_choice
            forced = choice == "required" or isinstance(choice, dict)
            if forced and thinking and not caps.supports_tool_choice_in_thinking:
                warnings.append(f"tool_choice {choice!r} is not supported in thinking mode; sent 'auto' instead")
                choice = "auto"
            kwargs["tool_choice"] = tool_choice_to_wire(choice)
            if caps.strict_tools_need_beta_base_url and caps.supports_strict_tools and any(t.strict for t in request.tools):
                base_url = self.beta_base_url
        max_tokens = request.max_tokens or self.default_max_tokens
        if max_tokens is not None:
            kwargs[caps.max_tokens_param] = max_tokens
        sampling = request.sampling()
        if sampling and thinking and not caps.supports_sampling_in_thinking:
            warnings.append(f"{', '.join(sampling)} not sent: this model ignores or refuses them while it thinks")
        else:
            kwargs.update(sampling)
        if effort is not None:
            if caps.thinking_via_extra_body:
                extra_body["thinking"] = {"type": "enabled" if thinking else "disabled"}
            # With a thinking switch, "none" is said by the switch and no effort is sent.
            mapped = _map_effort(effort, caps) if thinking or not caps.thinking_via_extra_body else None
            if mapped is not None:
                kwargs["reasoning_effort"] = mapped
        extra_body.update(request.extra)
        if extra_body:
            kwargs["extra_body"] = extra_body
        return PreparedRequest(base_url=base_url, kwargs=kwargs, thinking=thinking, warnings=warnings)

    async def _client(self, base_url: str) -> openai.AsyncOpenAI:
        client = self._clients.get(base_url)
        if client is None:
            ssl_context = await shared_ssl_context()
            # Sessions' first requests wait here together: the first back makes the client the
            # others use (one made and dropped would leave its connections open).
            client = self._clients.get(base_url)
            if client is not None:
                return client
            http_client = _http_client(base_url, self._timeout, ssl_context)
            client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=base_url,
                max_retries=0,
                timeout=self._timeout,
                http_client=http_client,
            )
            self._clients[base_url] = client
            self._aiohttp[base_url] = http_client is not None
        return client

    async def aclose(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await client.close()

    def _error(self, exc: BaseException, base_url: str, attempts: int) -> RpError:
        return map_error(
            exc,
            provider=self.provider,
            model=self.model,
            base_url=base_url,
            caps=self.capabilities,
            api_key=self._api_key,
            attempts=attempts,
        )

    async def _send(self, prepared: Any) -> tuple[FrameBatches, int, list[str]]:
        """Post the request (retrying what may be retried): the open stream, the attempts made
        and the failures retried."""
        client = await self._client(prepared.base_url)
        attempts = 0
        retried: list[str] = []
        while True:
            attempts += 1
            try:
                sdk_stream = await client.post(
                    "/chat/completions",
                    body=wire_body(prepared.kwargs),
                    cast_to=object,
                    stream=True,
                    stream_cls=FrameBatches,
                )
                return sdk_stream, attempts, retried
            except openai.OpenAIError as exc:
                if is_retryable(exc) and attempts <= self.retry.max_retries:
                    retried.append(_failure_name(exc))
                    await self._sleep(self.retry.delay(attempts, retry_after_seconds(exc)))
                    continue
                raise self._error(exc, prepared.base_url, attempts) from None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for batch in self.stream_batches(request):
            for event in batch:
                yield event

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[StreamEvent]]:
        """``stream``'s events, a list per read from the provider's socket (``types.stream_batches``)."""
        try:
            prepared = self.prepare(request)
            sdk_stream, attempts, retried = await self._send(prepared)
        except RpError:
            await request_logged()  # an error is an answer too: heard once the request is logged
            raise
        try:
            await request_logged()
        except BaseException:
            await sdk_stream.close()
            raise
        warnings = list(prepared.warnings)
        if retried:
            warnings.append(f"retried {len(retried)} time(s) after: {', '.join(retried)}")
        assembler = _Assembler(self.capabilities.reasoning_field)
        feed = assembler.feed
        try:
            async for frames in sdk_stream.batches():
                events: list[StreamEvent] = []
                for frame in frames:
                    feed(frame, events)
                if events:
                    yield events
                # A read that took all that was buffered is followed by one that waits on the
                # socket, which lets every other session's step run. After a full read more may be
                # buffered, and the next would not wait: then this step yields to them itself, so
                # a late reader's burst cannot hold the loop (nor the server's accept).
                if sdk_stream.last_read >= AIOHTTP_READ or not self._aiohttp.get(prepared.base_url, False):
                    await asyncio.sleep(0)
        except openai.OpenAIError as exc:
            raise self._error(exc, prepared.base_url, attempts) from None
        finally:
            await sdk_stream.close()
        yield [Completed(assembler.response(self.provider, self.model, tuple(warnings)))]


def _http_client(base_url: str, timeout: openai.Timeout, ssl_context: ssl.SSLContext) -> openai.DefaultAsyncHttpxClient | None:
    """The SDK's aiohttp transport (its ``aiohttp`` extra), which its documentation recommends for
    concurrency: with hundreds of live streams the pure-Python HTTP stack spent more CPU per
    streamed frame than the engine did. aiohttp refuses a URL carrying ``user:password@`` next to
    the bearer header, so such a base URL keeps the SDK's default client (None)."""
    if urlsplit(base_url).username is not None:
        return None
    return _HttpClient(timeout=timeout, verify=ssl_context)


_SSL_CONTEXT: list[ssl.SSLContext] = []  # the process's one, once made (``shared_ssl_context``)


async def shared_ssl_context() -> ssl.SSLContext:
    """The TLS settings every client of this process verifies providers with: the SDK's (the
    system's CA bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once, on a worker thread.
    Made per client, they held a server's event loop for 10–15 ms at each new route's first
    request (loading the CA bundle), every session on it waiting (bench/serve.py, issue 16)."""
    if not _SSL_CONTEXT:
        made = await asyncio.to_thread(httpx2.create_ssl_context)
        if not _SSL_CONTEXT:  # another first request may have made one meanwhile
            _SSL_CONTEXT.append(made)
    return _SSL_CONTEXT[0]


# How many distinct URLs or header sets a client remembers: a client sends to one or two paths
# with one header set, so this only bounds a caller that varies them per request.
_MEMO_SIZE = 8


def _kept(memo: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """``memo[key]``, made and kept when missing (all forgotten once ``_MEMO_SIZE`` are kept)."""
    value = memo.get(key)
    if value is None:
        value = make()
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[key] = value
    return value


def _url_for(memo: dict[Any, Any], url: str, base: httpx2.URL, make: Callable[[str], httpx2.URL]) -> httpx2.URL:
    """The URL ``make`` gives for ``url`` against this ``base`` (a client's base URL may be
    replaced: it is part of the key, and kept with the value so its id cannot be reused)."""
    kept_base, prepared = _kept(memo, (url, id(base)), lambda: (base, make(url)))
    return prepared if kept_base is base else make(url)


class _Memos:
    """A client's kept URLs and headers (see ``_kept``)."""

    _url_memo: dict[tuple[str, int], tuple[httpx2.URL, httpx2.URL]]
    _header_memo: dict[tuple[Any, ...], httpx2.Headers]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._url_memo = {}
        self._header_memo = {}


class AsyncOpenAI(_Memos, openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` that prepares the URL of a path and the default headers once, not per
    request: the SDK parses the base URL and the path into a new ``URL`` and normalises the same
    seventeen headers into a new ``Headers`` every time, about a third of what building a request
    cost (issue 16). Both are pure functions of what the key holds; a request the key cannot
    describe (its own headers, timeout or idempotency header, a provider runtime's auth) goes the
    SDK's way. The headers are handed out as a copy, since the SDK may edit them. (The class keeps
    the SDK's name: the SDK puts it in the User-Agent header.)"""

    def _prepare_url(self, url: str) -> httpx2.URL:
        return _url_for(self._url_memo, url, self.base_url, super()._prepare_url)

    def _build_headers(self, options: FinalRequestOptions, *, retries_taken: int = 0) -> httpx2.Headers:
        if (
            options.headers
            or not isinstance(options.timeout, openai.NotGiven)
            or self._idempotency_header is not None
            or getattr(self, "_provider_runtime", None) is not None
        ):
            return super()._build_headers(options, retries_taken=retries_taken)
        key = (
            retries_taken,
            self.api_key,
            getattr(self, "admin_api_key", None),
            self.organization,
            self.project,
            repr(self.timeout),  # the read-timeout header
            tuple(sorted(options.security.items())),
        )
        build = super()._build_headers
        return httpx2.Headers(_kept(self._header_memo, key, lambda: build(options, retries_taken=retries_taken)))


class _HttpClient(_Memos, openai.DefaultAioHttpClient):  # type: ignore[misc, valid-type]
    """The SDK's aiohttp client, keeping the ``URL`` parsed from a URL string and the merge of its
    own headers with a request's: the SDK passes both anew, and equal, on every request. The merged
    ``Headers`` may be handed out again, as a ``Request`` copies the headers it is given."""

    def _merge_url(self, url: httpx2.URL | str) -> httpx2.URL:
        if not isinstance(url, str):
            return super()._merge_url(url)  # type: ignore[no-any-return]
        return _url_for(self._url_memo, url, self.base_url, super()._merge_url)

    def _merge_headers(self, headers: Any = None) -> Any:
        if not isinstance(headers, list):
            return super()._merge_headers(headers)
        # The client's own headers are part of the key: they may be replaced or edited in place.
        key = (tuple(self.headers.raw), tuple(headers))
        merge = super()._merge_headers
        return _kept(self._header_memo, key, lambda: cast(httpx2.Headers, merge(headers)))


def _map_effort(effort: str, caps: Capabilities) -> str | None:
    if caps.reasoning_effort_map is None:
        return effort
    return caps.reasoning_effort_map.get(effort)


def _failure_name(exc: BaseException) -> str:
    if is_timeout(exc):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return "connection error"


class _Assembler:
    """Builds one response from stream frames (decoded JSON); tool calls are keyed by ``index``
    because parallel calls arrive as interleavable fragments and only the first fragment carries
    id and name."""

    def __init__(self, reasoning_field: str) -> None:
        self._reasoning_field = reasoning_field
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: dict[str, Any] | None = None
        self._served_model: str | None = None

    def feed(self, chunk: object, events: list[StreamEvent]) -> None:
        """Take one frame; its deltas are appended to ``events``."""
        if not isinstance(chunk, dict):
            return  # a frame that is not an object carries nothing this reads
        model = chunk.get("model")
        if model and isinstance(model, str):
            self._served_model = model
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            # The whole object, so the provider's extra fields (DeepSeek's cache counters) stay.
            self._usage = usage
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                reasoning = _str(delta.get(self._reasoning_field)) or _str(delta.get("reasoning"))
                if reasoning:
                    self._reasoning.append(reasoning)
                    events.append(ReasoningDelta(reasoning))
                content = _str(delta.get("content"))
                if content:
                    self._text.append(content)
                    events.append(TextDelta(content))
                for fragment in delta.get("tool_calls") or ():
                    if isinstance(fragment, dict):
                        events.append(self._feed_call(fragment))
            finish = choice.get("finish_reason")
            if finish and isinstance(finish, str):
                self._finish = finish

    def _feed_call(self, fragment: dict[str, Any]) -> ToolCallDelta:
        index = fragment.get("index")
        index = index if isinstance(index, int) else 0
        slot = self._calls.setdefault(index, {"id": None, "name": None, "arguments": []})
        function = fragment.get("function")
        function = function if isinstance(function, dict) else {}
        name = _str(function.get("name"))
        arguments = _str(function.get("arguments")) or ""
        call_id = _str(fragment.get("id"))
        if call_id and not slot["id"]:
            slot["id"] = call_id
        if name and not slot["name"]:
            slot["name"] = name
        slot["arguments"].append(arguments)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments_fragment=arguments)

    def response(self, provider: str, model: str, warnings: tuple[str, ...]) -> ModelResponse:
        if self._finish is None:
            # A cut connection can end the SSE body cleanly; a reply without a finish reason must
            # not be committed as if it were whole.
            raise RpError(
                "model.incomplete_stream",
                f"{provider} model {model!r} stopped streaming before it finished the reply",
                details={"provider": provider, "model": model},
            )
        calls = [
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"] or "",
                arguments="".join(slot["arguments"]),
            )
            for index, slot in sorted(self._calls.items())
        ]
        return ModelResponse(
            text="".join(self._text),
            reasoning="".join(self._reasoning) if self._reasoning else None,
            tool_calls=calls,
            usage=usage_from_wire(self._usage),
            finish_reason=self._finish,
            model=self._served_model or model,
            provider=provider,
            warnings=warnings,
        )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def wire_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body for prepared SDK keyword arguments: ``extra_body`` merged at the top level,
    as the SDK itself merges it."""
    body = {key: value for key, value in kwargs.items() if key != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return body
