"""A fake OpenAI-compatible (and DeepSeek-flavoured) HTTP server on loopback.

No LLM is reachable from our machines, so the real ``openai`` SDK is tested against this server
speaking the real wire format: ``POST /v1/chat/completions`` (also without ``/v1`` and under
``/beta``, like DeepSeek) and ``GET /v1/models``; JSON and SSE responses with ``: keep-alive``
comments, ``reasoning_content`` deltas, parallel tool calls whose arguments arrive in fragments,
a usage chunk when ``stream_options.include_usage`` is set (with DeepSeek's cache counters), and
the error bodies providers really send.

Behaviour is scripted per test: a queue of items (``FakeReply``, ``FakeError``, ``FakeDrop``, a
string or a dict of ``FakeReply`` fields), then an optional responder function, then (unless
``strict``) the roleplay protocol of ``fake_roleplay`` for a roleplay parent, Writer or JSON-mode
request, and a deterministic demo-style reply for anything else. Built-in checks run before the
script, as the real API would: API key, known models, DeepSeek's "reasoning_content must be
passed back" rule, forced tool_choice in thinking mode, the function-declaration rules (see
``declaration_error``), and a context limit. Every request is recorded.

Every request is also timed on the server's side (``RecordedRequest.received``/``first_output``/
``done``; ``GET /_fake/timings?key=REGEX`` over HTTP), so a benchmark can subtract what the
provider itself spent from what its client saw.

Standalone, for demos: ``python -m roleplay.testing.fake_openai --port 8765``.
Stdlib only (``http.server`` in a background thread) so it needs no extra dependency.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Literal
from urllib.parse import parse_qs, urlsplit

from roleplay.testing.fake_roleplay import roleplay_reply

Flavor = Literal["openai", "deepseek"]
# Not an OpenAI route: the fake's own timeline of its answers (``FakeOpenAI.timings``), for the
# benchmarks, which must tell the provider's time from the engine's.
TIMINGS_PATH = "/_fake/timings"


@dataclass
class FakeReply:
    text: str = ""
    reasoning: str | None = None
    # Each call: {"name": ..., "arguments": str or JSON-able value, "id": optional}.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    # Fields merged over the computed usage (e.g. {"prompt_cache_hit_tokens": 64}).
    usage: dict[str, Any] | None = None
    # Characters per streamed text/reasoning/argument fragment.
    chunk_size: int = 6
    keepalive: bool = True
    # Round-robin the argument fragments of parallel calls, to prove assembly is by index.
    interleave_tool_calls: bool = False
    # Seconds to wait before answering (client timeout tests).
    delay: float = 0.0
    # Seconds to wait after each streamed frame (live-streaming tests); None: the server's default.
    chunk_delay: float | None = None
    # After the content, send an SSE error event and end without [DONE].
    fail_midstream: str | None = None
    model: str | None = None


@dataclass
class FakeError:
    status: int
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    param: str | None = None

    @classmethod
    def context_overflow(cls, limit: int = 131072, requested: int = 131134, flavor: Flavor = "deepseek") -> FakeError:
        if flavor == "deepseek":
            # DeepSeek: a plain invalid_request_error; only the message tells (fast-agent#621).
            completion = min(8192, requested)
            return cls(
                400,
                f"This model's maximum context length is {limit} tokens. However, you requested "
                f"{requested} tokens ({requested - completion} in the messages, {completion} in the "
                "completion). Please reduce the length of the messages or completion.",
                code="invalid_request_error",
            )
        return cls(
            400,
            f"This model's maximum context length is {limit} tokens. However, your messages resulted "
            f"in {requested} tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> FakeError:
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        return cls(429, "Rate limit reached. Please slow down.", type="rate_limit_error", code="rate_limit_exceeded", headers=headers)

    @classmethod
    def server_error(cls, status: int = 500) -> FakeError:
        return cls(status, "The server had an error while processing your request.", type="server_error")

    @classmethod
    def tools_unsupported(cls, model: str = "fake") -> FakeError:
        # Ollama's words for a model whose template declares no tool support (ollama#5793).
        return cls(400, f"registry.ollama.ai/library/{model}:latest does not support tools", type="api_error")

    @classmethod
    def reasoning_not_passed_back(cls) -> FakeError:
        # Verbatim from DeepSeek (opencode#24083).
        return cls(
            400,
            "The reasoning_content in the thinking mode must be passed back to the API.",
            code="invalid_request_error",
        )


@dataclass
class FakeDrop:
    """Close the connection without any response (a connection error for the client)."""


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # The server's own timeline of its answer (wall clock, ``time.time()``): when the handler took
    # the request up, when it wrote the first frame with output in it (text, reasoning or a tool
    # call; not the role frame or a keep-alive), and when the response was complete. What the
    # provider itself spent, as opposed to its client: bench/serve.py subtracts it per turn.
    received: float = 0.0
    first_output: float | None = None
    done: float | None = None

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []


Responder = Callable[[RecordedRequest], Any]


class FakeOpenAI:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        flavor: Flavor = "openai",
        api_keys: list[str] | None = None,
        models: list[str] | None = None,
        require_reasoning_content: bool | None = None,
        context_limit: int | None = None,
        responder: Responder | None = None,
        strict: bool = False,
        check_declarations: bool = True,
        chunk_delay: float = 0.0,
    ) -> None:
        self.flavor = flavor
        self.api_keys = set(api_keys) if api_keys else None
        self.models = list(models) if models else None
        self.require_reasoning_content = flavor == "deepseek" if require_reasoning_content is None else require_reasoning_content
        self.context_limit = context_limit
        self.responder = responder
        # Strict scripts answer an unexpected extra request with an error instead of a default.
        self.strict = strict
        # Refuse tool declarations the real APIs refuse; off only to imitate a lenient local server.
        self.check_declarations = check_declarations
        # Seconds between streamed frames for every reply that does not set its own: a reply that
        # takes visible time to arrive, as a real model's does.
        self.chunk_delay = chunk_delay
        self._queue: list[Any] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def enqueue(self, *items: Any) -> None:
        with self._lock:
            self._queue.extend(items)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def start(self) -> FakeOpenAI:
        # A short poll interval keeps shutdown (one per test) fast.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def timings(self, key: str | None = None) -> list[dict[str, Any]]:
        """Each chat request's timeline (``RecordedRequest.received`` and the rest), in arrival
        order. ``key``: a regular expression; each entry gets its last match in the request's
        message texts (the turn a benchmark's request belongs to, say), or None."""
        pattern = re.compile(key) if key else None
        out = []
        for number, record in enumerate(self.requests, 1):
            if record.method != "POST" or not isinstance(record.body, dict):
                continue
            found = None
            if pattern is not None:
                for message in reversed(record.messages):
                    matches = pattern.findall(_text_of(message))
                    if matches:
                        last = matches[-1]
                        found = ",".join(last) if isinstance(last, tuple) else last
                        break
            out.append(
                {"number": number, "key": found, "received": record.received, "firstOutput": record.first_output, "done": record.done}
            )
        return out

    def _record(self, record: RecordedRequest) -> int:
        with self._lock:
            self._requests.append(record)
            return len(self._requests)

    def _auth_error(self, record: RecordedRequest) -> FakeError | None:
        if self.api_keys is None or record.api_key in self.api_keys:
            return None
        key = record.api_key or ""
        if self.flavor == "deepseek":
            return FakeError(
                401,
                f"Authentication Fails, Your api key: ****{key[-4:]} is invalid",
                type="authentication_error",
                code="invalid_request_error",
            )
        masked = key[:3] + "*" * max(0, len(key) - 7) + key[-4:] if len(key) > 7 else "***"
        return FakeError(401, f"Incorrect API key provided: {masked}.", code="invalid_api_key")

    def _decide(self, record: RecordedRequest) -> Any:
        body = record.body
        model = body.get("model")
        if self.models is not None and model not in self.models:
            if self.flavor == "deepseek":
                return FakeError(400, "Model Not Exist", code="invalid_request_error")
            return FakeError(404, f"The model `{model}` does not exist or you do not have access to it.", code="model_not_found")
        if self.check_declarations:
            refused = declaration_error(body.get("tools"), self.flavor, beta=record.path.startswith("/beta"))
            if refused is not None:
                return refused
        if self.require_reasoning_content:
            for m in body.get("messages", []):
                if m.get("role") == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
                    return FakeError.reasoning_not_passed_back()
        if self.flavor == "deepseek" and _thinking_on(body) and body.get("tools"):
            choice = body.get("tool_choice")
            if choice == "required" or isinstance(choice, dict):
                return FakeError(400, "Thinking mode does not support this tool_choice", code="invalid_request_error")
        if self.context_limit is not None:
            requested = _estimate(json.dumps(body.get("messages", []))) + int(body.get("max_tokens") or 0)
            if requested > self.context_limit:
                return FakeError.context_overflow(self.context_limit, requested, self.flavor)
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        if self.responder is not None:
            item = self.responder(record)
            if item is not None:
                return item
        if self.strict:
            return FakeError(400, "fake server: the script has no reply left for this request", code="fake_script_exhausted")
        played = roleplay_reply(body)
        if played is not None:
            return FakeReply(**played)
        return FakeReply(text=_default_text(body))


# -- function declarations ------------------------------------------------------------------------
#
# What the real APIs refuse in ``tools[].function``, with their words. Sources: OpenAI 400 bodies
# quoted in public issue threads (langchainjs#9804, google-calendar-mcp#39, notion-mcp-server#102,
# openai-agents-mcp#2, Effect-TS#6009) and OpenAI's Structured Outputs "supported schemas" page;
# DeepSeek's Tool Calls guide (strict mode, beta only) as summarised in the stack research §2.
# DeepSeek's own wording for these refusals is not public: its flavour uses OpenAI's messages in
# DeepSeek's error envelope. That DeepSeek enforces the root rules at all is an assumption (its API
# copies OpenAI's contract); a fake stricter than the real server costs nothing.

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Any function: ``parameters`` is an object schema with none of these at its root.
_ROOT_FORBIDDEN = ("oneOf", "anyOf", "allOf", "enum", "not")
# Strict functions (``"strict": true``): not permitted anywhere in the schema.
_STRICT_FORBIDDEN = ("oneOf", "allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties")
# DeepSeek strict mode lists these as unsupported as well (OpenAI has since accepted them).
_DEEPSEEK_STRICT_FORBIDDEN = ("minLength", "maxLength", "pattern", "format", "minimum", "maximum", "multipleOf", "minItems", "maxItems")
# Keywords whose value is one subschema / a list of subschemas / a map of subschemas.
_SUB_ONE = ("items", "not", "if", "then", "else", "additionalProperties", "contains", "propertyNames")
_SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_MAP = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


def declaration_error(tools: Any, flavor: Flavor, *, beta: bool = False) -> FakeError | None:
    """The 400 the real API answers for the first refused function declaration, or None."""
    if not isinstance(tools, list):
        return None
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            return _refusal(
                flavor,
                f"Invalid 'tools[{index}].function.name': string does not match pattern. Expected a string that "
                "matches the pattern '^[a-zA-Z0-9_-]+$'.",
                f"tools[{index}].function.name",
                code="invalid_value",
            )
        parameters = function.get("parameters")
        # Omitted (or empty) parameters declare a function without arguments.
        if parameters is None or parameters == {}:
            continue
        problem = _root_problem(parameters)
        if problem is None and function.get("strict") is True and (flavor == "openai" or beta):
            forbidden = _STRICT_FORBIDDEN + (_DEEPSEEK_STRICT_FORBIDDEN if flavor == "deepseek" else ())
            problem = _strict_problem(parameters, (), forbidden)
        if problem is not None:
            return _refusal(flavor, f"Invalid schema for function '{name}': {problem}", f"tools[{index}].function.parameters")
    return None


def _refusal(flavor: Flavor, message: str, param: str, code: str = "invalid_function_parameters") -> FakeError:
    if flavor == "deepseek":
        return FakeError(400, message, code="invalid_request_error")
    return FakeError(400, message, code=code, param=param)


def _root_problem(schema: Any) -> str | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind != "object":
        shown = "None" if kind is None else kind
        return f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{shown}\"'."
    if any(k in schema for k in _ROOT_FORBIDDEN):
        return "schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level."
    return None


def _strict_problem(schema: Any, context: tuple[str, ...], forbidden: tuple[str, ...]) -> str | None:
    if not isinstance(schema, dict):
        return None
    where = f"In context={context!r}"
    for keyword in forbidden:
        if keyword in schema:
            return f"{where}, '{keyword}' is not permitted."
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return f"{where}, 'additionalProperties' is required to be supplied and to be false."
        properties = schema.get("properties") or {}
        required = schema.get("required")
        missing = [k for k in properties if not isinstance(required, list) or k not in required]
        if missing:
            return (
                f"{where}, 'required' is required to be supplied and to be an array including every key in "
                f"properties. Missing '{missing[0]}'."
            )
    for keyword in _SUB_ONE:
        if isinstance(schema.get(keyword), dict):
            found = _strict_problem(schema[keyword], (*context, keyword), forbidden)
            if found:
                return found
    for keyword in _SUB_LIST:
        for i, sub in enumerate(schema.get(keyword) or []):
            found = _strict_problem(sub, (*context, keyword, str(i)), forbidden)
            if found:
                return found
    for keyword in _SUB_MAP:
        subs = schema.get(keyword)
        for key, sub in subs.items() if isinstance(subs, dict) else ():
            found = _strict_problem(sub, (*context, keyword, key), forbidden)
            if found:
                return found
    return None


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    if isinstance(thinking, dict):
        return thinking.get("type") != "disabled"
    return body.get("model") != "deepseek-chat"


def _estimate(text: str) -> int:
    return math.ceil(len(text) / 4)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
    return content or ""


def _default_text(body: dict[str, Any]) -> str:
    last = ""
    for m in body.get("messages", []):
        if m.get("role") == "user":
            last = _text_of(m)
    said = " ".join(str(last).split())
    if len(said) > 120:
        said = said[:119] + "…"
    if not said:
        return "[fake server: not a real model] Hello from the fake OpenAI-compatible server."
    return f"[fake server: not a real model] You said: “{said}”. The story goes on."


def _has_output(frame: str) -> bool:
    """Whether a streamed frame carries output: a delta with text, reasoning or a tool call."""
    if not frame.startswith("data: {"):
        return False
    choices = json.loads(frame[len("data: ") :]).get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))


def _query_value(path: str, name: str) -> str | None:
    values = parse_qs(urlsplit(path).query).get(name)
    return values[0] if values else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up on purpose in timeout tests; a traceback per test would be noise.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Real API front ends send with TCP_NODELAY. Without it each small streamed frame waits for the
    # client's delayed ACK (about 40 ms on Linux) behind the previous one, a latency no provider has
    # and one that would be blamed on the engine in the serve benchmark.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/beta"):
            path = path[len("/beta") :]
        if path.startswith("/v1"):
            path = path[len("/v1") :]
        return path

    def do_GET(self) -> None:
        if self._route() == TIMINGS_PATH:
            return self._send_json(200, self.fake.timings(_query_value(self.path, "key")))
        record = RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None)
        self.fake._record(record)
        auth = self.fake._auth_error(record)
        if auth is not None:
            return self._send_error(auth)
        if self._route() != "/models":
            return self._send_error(FakeError(404, f"no route {self.path}", code="not_found"))
        names = self.fake.models or ["fake-model"]
        data = [{"id": n, "object": "model", "created": 1700000000, "owned_by": "fake"} for n in names]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        received = time.time()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            self.fake._record(RecordedRequest("POST", self.path, headers, raw.decode("utf-8", "replace")))
            return self._send_error(FakeError(400, "We could not parse the JSON body of your request."))
        record = RecordedRequest("POST", self.path, headers, body, received=received)
        number = self.fake._record(record)
        auth = self.fake._auth_error(record)
        if auth is not None:
            return self._send_error(auth)
        if self._route() != "/chat/completions" or not isinstance(body, dict):
            return self._send_error(FakeError(404, f"no route {self.path}", code="not_found"))
        item = self.fake._decide(record)
        if isinstance(item, str):
            item = FakeReply(text=item)
        elif isinstance(item, dict):
            item = FakeReply(**item)
        if isinstance(item, FakeDrop):
            self.close_connection = True
            return
        if isinstance(item, FakeError):
            return self._send_error(item)
        self._send_reply(item, body, number, record)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: FakeError) -> None:
        payload = {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}
        self._send_json(error.status, payload, error.headers)

    def _send_reply(self, reply: FakeReply, body: dict[str, Any], number: int, record: RecordedRequest) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        calls = [_wire_call(c, f"call_{number}_{i}") for i, c in enumerate(reply.tool_calls)]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        model = reply.model or body.get("model") or "fake-model"
        usage = _usage(self.fake.flavor, body, reply, calls)
        meta = {
            "id": "chatcmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16],
            "created": 1700000000 + number,
            "model": model,
            "system_fingerprint": "fp_fake",
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": reply.text if (reply.text or not calls) else None}
            if reply.reasoning is not None:
                message["reasoning_content"] = reply.reasoning
            if calls:
                message["tool_calls"] = calls
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            # Stamped as the answer goes out, not after: a client may ask for the timings the
            # moment it has read the answer, before this thread would have run on.
            record.first_output = record.done = time.time()
            self._send_json(200, {**meta, "object": "chat.completion", "choices": [choice], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        pause = self.fake.chunk_delay if reply.chunk_delay is None else reply.chunk_delay
        for frame in _sse_frames(reply, calls, finish, meta, usage, bool((body.get("stream_options") or {}).get("include_usage"))):
            if record.first_output is None and _has_output(frame):
                record.first_output = time.time()
            self._write_chunk(frame.encode("utf-8"))
            if pause:
                time.sleep(pause)
        record.done = time.time()
        self._write_chunk(b"")

    def _write_chunk(self, data: bytes) -> None:
        # Chunked transfer encoding keeps the connection reusable, as a real API's does.
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _wire_call(call: dict[str, Any], default_id: str) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": call.get("id") or default_id, "type": "function", "function": {"name": call["name"], "arguments": arguments}}


def _usage(flavor: Flavor, body: dict[str, Any], reply: FakeReply, calls: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = _estimate(json.dumps(body.get("messages", []), ensure_ascii=False))
    produced = reply.text + (reply.reasoning or "") + "".join(c["function"]["arguments"] for c in calls)
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": _estimate(produced)}
    if flavor == "deepseek":
        usage["prompt_cache_hit_tokens"] = 0
    else:
        usage["prompt_tokens_details"] = {"cached_tokens": 0}
    if reply.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": _estimate(reply.reasoning)}
    usage.update(reply.usage or {})
    if flavor == "deepseek" and "prompt_cache_miss_tokens" not in (reply.usage or {}):
        usage["prompt_cache_miss_tokens"] = usage["prompt_tokens"] - usage["prompt_cache_hit_tokens"]
    if "total_tokens" not in (reply.usage or {}):
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return usage


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse_frames(
    reply: FakeReply,
    calls: list[dict[str, Any]],
    finish: str,
    meta: dict[str, Any],
    usage: dict[str, Any],
    include_usage: bool,
) -> Iterator[str]:
    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return "data: " + json.dumps({**meta, "object": "chat.completion.chunk", "choices": [choice]}) + "\n\n"

    if reply.keepalive:
        yield ": keep-alive\n\n"
    yield frame({"role": "assistant", "content": ""})
    for piece in _pieces(reply.reasoning or "", reply.chunk_size):
        yield frame({"content": None, "reasoning_content": piece})
    if reply.keepalive:
        yield ": keep-alive\n\n"
    for piece in _pieces(reply.text, reply.chunk_size):
        yield frame({"content": piece})
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}
        yield frame({"tool_calls": [head]})
    fragments = [_pieces(c["function"]["arguments"], reply.chunk_size) for c in calls]
    order: list[tuple[int, str]] = []
    if reply.interleave_tool_calls:
        for step in range(max((len(f) for f in fragments), default=0)):
            order.extend((i, f[step]) for i, f in enumerate(fragments) if step < len(f))
    else:
        order = [(i, piece) for i, f in enumerate(fragments) for piece in f]
    for index, piece in order:
        yield frame({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    if reply.fail_midstream is not None:
        yield "data: " + json.dumps({"error": {"message": reply.fail_midstream, "type": "server_error", "code": None}}) + "\n\n"
        return
    yield frame({}, finish)
    if include_usage:
        yield "data: " + json.dumps({**meta, "object": "chat.completion.chunk", "choices": [], "usage": usage}) + "\n\n"
    yield "data: [DONE]\n\n"


@contextmanager
def serve_fake_openai(**options: Any) -> Iterator[FakeOpenAI]:
    """Run a ``FakeOpenAI`` for the duration of a ``with`` block (options as in its constructor)."""
    fake = FakeOpenAI(**options)
    with fake:
        yield fake


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server (deterministic demo replies).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--flavor", choices=["openai", "deepseek"], default="openai")
    parser.add_argument("--api-key", action="append", dest="api_keys", help="accepted key (repeatable); default: any")
    parser.add_argument("--model", action="append", dest="models", help="known model (repeatable); default: any")
    parser.add_argument("--context-limit", type=int, default=None)
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between streamed frames (default 0)")
    args = parser.parse_args(argv)
    fake = FakeOpenAI(
        host=args.host,
        port=args.port,
        flavor=args.flavor,
        api_keys=args.api_keys,
        models=args.models,
        context_limit=args.context_limit,
        chunk_delay=args.chunk_delay,
    )
    print(f"fake {args.flavor} server on {fake.root_url} (OpenAI base URL {fake.base_url}); Ctrl-C to stop", flush=True)
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()


if __name__ == "__main__":
    main()
