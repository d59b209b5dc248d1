"""The real openai-SDK provider against the fake server over loopback."""

from __future__ import annotations

import json

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.failures import RetryPolicy
from roleplay.harness.models.openai_compat import OpenAICompatModel, beta_url_for
from roleplay.harness.models.types import (
    Capabilities,
    ChatMessage,
    Completed,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    complete,
)
from roleplay.testing.fake_openai import FakeDrop, FakeError, FakeReply, serve_fake_openai

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
ROLL = ToolSpec("roll_dice", "Roll dice", {"type": "object", "properties": {"sides": {"type": "integer"}}})
LOOK = ToolSpec("look", "Look around", {"type": "object", "properties": {"target": {"type": "string"}}})


def make_model(fake, sleeps=None, **kw) -> OpenAICompatModel:
    return OpenAICompatModel(
        model=kw.pop("model", "gpt-test"),
        base_url=fake.base_url,
        api_key=KEY,
        sleep=sleeps,
        retry=kw.pop("retry", RetryPolicy(max_retries=3, base_delay=0.5, max_delay=4.0)),
        **kw,
    )


def ask(text: str = "Hello there", **kw) -> ModelRequest:
    return ModelRequest(messages=[ChatMessage("system", "Be brief."), ChatMessage("user", text)], **kw)


async def events_of(model, request):
    return [e async for e in model.stream(request)]


async def test_streams_text_in_deltas_and_reports_usage(fake_openai):
    fake_openai.enqueue(
        FakeReply(
            text="Once upon a time, a fox.", chunk_size=5, usage={"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 32}}
        )
    )
    model = make_model(fake_openai)
    events = await events_of(model, ask())
    await model.aclose()
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 5 and "".join(deltas) == "Once upon a time, a fox."
    assert isinstance(events[-1], Completed) and sum(isinstance(e, Completed) for e in events) == 1
    response = events[-1].response
    assert response.text == "Once upon a time, a fox."
    assert response.finish_reason == "stop" and response.provider == "openai" and response.model == "gpt-test"
    assert response.usage.prompt_tokens == 40
    assert response.usage.cache_hit_tokens == 32 and response.usage.cache_miss_tokens == 8
    assert response.usage.total_tokens == 40 + response.usage.completion_tokens
    body = fake_openai.chat_requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    assert fake_openai.chat_requests[0].api_key == KEY


async def test_single_tool_call_is_assembled(fake_openai):
    fake_openai.enqueue(FakeReply(tool_calls=[{"id": "call_a", "name": "roll_dice", "arguments": {"sides": 20}}], chunk_size=4))
    model = make_model(fake_openai)
    response = await complete(model, ask(tools=[ROLL], tool_choice="required"))
    await model.aclose()
    assert response.tool_calls == [ToolCall("call_a", "roll_dice", '{"sides": 20}')]
    assert response.finish_reason == "tool_calls" and response.text == ""
    body = fake_openai.chat_requests[0].body
    assert body["tool_choice"] == "required"
    assert body["tools"] == [
        {"type": "function", "function": {"name": "roll_dice", "description": "Roll dice", "parameters": ROLL.parameters}}
    ]


async def test_parallel_tool_calls_with_interleaved_fragments_assemble_by_index(fake_openai):
    fake_openai.enqueue(
        FakeReply(
            text="Let me check.",
            tool_calls=[
                {"id": "c1", "name": "roll_dice", "arguments": {"sides": 6, "note": "first of two"}},
                {"id": "c2", "name": "look", "arguments": {"target": "the old oak door"}},
            ],
            chunk_size=3,
            interleave_tool_calls=True,
        )
    )
    model = make_model(fake_openai)
    events = await events_of(model, ask(tools=[ROLL, LOOK]))
    await model.aclose()
    fragments = [e for e in events if isinstance(e, ToolCallDelta)]
    # Interleaving really happened on the wire: indexes alternate after the two headers.
    assert [f.index for f in fragments[2:6]] == [0, 1, 0, 1]
    assert fragments[0].id == "c1" and fragments[0].name == "roll_dice"
    calls = events[-1].response.tool_calls
    assert [c.id for c in calls] == ["c1", "c2"]
    assert json.loads(calls[0].arguments) == {"sides": 6, "note": "first of two"}
    assert json.loads(calls[1].arguments) == {"target": "the old oak door"}
    assert events[-1].response.text == "Let me check."


async def test_history_with_tool_turn_and_named_choice_goes_out_in_wire_format(fake_openai):
    fake_openai.enqueue("The die shows 4.")
    model = make_model(fake_openai, capabilities=Capabilities(max_tokens_param="max_completion_tokens"))
    history = [
        ChatMessage("user", "roll"),
        ChatMessage("assistant", "", tool_calls=[ToolCall("c1", "roll_dice", '{"sides":6}')], reasoning="secret"),
        ChatMessage("tool", "4", tool_call_id="c1"),
    ]
    request = ModelRequest(history, tools=[ROLL], tool_choice={"name": "roll_dice"}, max_tokens=99, temperature=0.3)
    await complete(model, request)
    await model.aclose()
    body = fake_openai.chat_requests[0].body
    assert body["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "roll_dice", "arguments": '{"sides":6}'}}],
    }
    assert body["messages"][2] == {"role": "tool", "content": "4", "tool_call_id": "c1"}
    assert body["tool_choice"] == {"type": "function", "function": {"name": "roll_dice"}}
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    assert body["temperature"] == 0.3


async def test_reasoning_deltas_are_read(fake_openai):
    fake_openai.enqueue(FakeReply(text="Yes.", reasoning="Weighing the options carefully.", chunk_size=8))
    model = make_model(fake_openai)
    events = await events_of(model, ask(reasoning_effort="high"))
    await model.aclose()
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Weighing the options carefully."
    assert events[-1].response.reasoning == "Weighing the options carefully."
    assert events[-1].response.usage.reasoning_tokens is not None
    # A generic server gets the effort word as is.
    assert fake_openai.chat_requests[0].body["reasoning_effort"] == "high"


async def test_images_become_data_urls(fake_openai):
    fake_openai.enqueue("A red square.")
    model = make_model(fake_openai)
    blocks = [{"type": "text", "text": "What is this?"}, {"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}]
    await complete(model, ModelRequest([ChatMessage("user", blocks)]))
    await model.aclose()
    assert fake_openai.chat_requests[0].body["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]


async def test_429_is_retried_with_backoff_then_succeeds(fake_openai, sleeps):
    fake_openai.enqueue(FakeError.rate_limited(), FakeError.rate_limited(), "finally")
    model = make_model(fake_openai, sleeps)
    response = await complete(model, ask())
    await model.aclose()
    assert response.text == "finally"
    assert len(fake_openai.chat_requests) == 3
    assert sleeps.calls == [0.5, 1.0]
    assert response.warnings == ("retried 2 time(s) after: HTTP 429, HTTP 429",)


async def test_retry_after_header_is_honoured(fake_openai, sleeps):
    fake_openai.enqueue(FakeError.rate_limited(retry_after=2), "ok")
    model = make_model(fake_openai, sleeps)
    await complete(model, ask())
    await model.aclose()
    assert sleeps.calls == [2.0]


async def test_429_after_all_retries_is_rate_limited(fake_openai, sleeps):
    fake_openai.enqueue(*[FakeError.rate_limited() for _ in range(4)])
    model = make_model(fake_openai, sleeps)
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.rate_limited"
    assert err.value.details["attempts"] == 4 and err.value.details["status"] == 429
    assert sleeps.calls == [0.5, 1.0, 2.0]
    assert len(fake_openai.chat_requests) == 4


async def test_500_is_retried(fake_openai, sleeps):
    fake_openai.enqueue(FakeError.server_error(), FakeError.server_error(503), "recovered")
    model = make_model(fake_openai, sleeps)
    response = await complete(model, ask())
    await model.aclose()
    assert response.text == "recovered" and len(sleeps.calls) == 2
    assert "HTTP 500, HTTP 503" in response.warnings[0]


async def test_persistent_500_is_server_error(fake_openai, sleeps):
    fake_openai.enqueue(*[FakeError.server_error() for _ in range(2)])
    model = make_model(fake_openai, sleeps, retry=RetryPolicy(max_retries=1))
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.server_error" and err.value.details["attempts"] == 2


async def test_401_is_auth_and_never_shows_the_key(sleeps):
    with serve_fake_openai(api_keys=["sk-the-right-key"], strict=True) as fake:
        model = make_model(fake, sleeps)
        with pytest.raises(RpError) as err:
            await complete(model, ask())
        await model.aclose()
    assert err.value.code == "model.auth"
    assert sleeps.calls == [] and len(fake.chat_requests) == 1
    rendered = str(err.value) + json.dumps(err.value.to_dict()) + repr(model)
    assert KEY not in rendered and KEY[-8:] not in rendered
    assert err.value.__cause__ is None and err.value.__suppress_context__


async def test_openai_context_length_code_is_context_overflow(fake_openai):
    fake_openai.enqueue(FakeError.context_overflow(limit=8192, requested=9000, flavor="openai"))
    model = make_model(fake_openai)
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.context_overflow" and err.value.details["limit"] == 8192


async def test_unknown_model_404(sleeps):
    with serve_fake_openai(models=["gpt-known"], strict=True) as fake:
        model = make_model(fake, sleeps, model="gpt-typo")
        with pytest.raises(RpError) as err:
            await complete(model, ask())
        await model.aclose()
    assert err.value.code == "model.unknown_model" and err.value.details["status"] == 404
    assert "gpt-typo" in err.value.message and sleeps.calls == []


async def test_other_4xx_is_bad_request(fake_openai):
    fake_openai.enqueue(FakeError(422, "messages[0].role is invalid"))
    model = make_model(fake_openai)
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.bad_request" and "messages[0].role is invalid" in err.value.message


async def test_timeout_is_retried_then_reported(fake_openai, sleeps):
    fake_openai.enqueue(FakeReply(text="late", delay=0.5), "on time")
    model = make_model(fake_openai, sleeps, timeout=0.15, connect_timeout=0.15)
    response = await complete(model, ask())
    assert response.text == "on time" and response.warnings == ("retried 1 time(s) after: timeout",)
    fake_openai.enqueue(FakeReply(text="late", delay=0.5), FakeReply(text="late", delay=0.5))
    model.retry = RetryPolicy(max_retries=1)
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.timeout" and err.value.details["attempts"] == 2


async def test_dropped_connection_is_retried(fake_openai, sleeps):
    fake_openai.enqueue(FakeDrop(), "after the drop")
    model = make_model(fake_openai, sleeps)
    response = await complete(model, ask())
    await model.aclose()
    assert response.text == "after the drop" and len(sleeps.calls) == 1


async def test_unreachable_server_is_connection_error(sleeps):
    with serve_fake_openai() as fake:
        url = fake.base_url
    model = OpenAICompatModel(model="m", base_url=url, api_key=KEY, sleep=sleeps, retry=RetryPolicy(max_retries=2))
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    assert err.value.code == "model.connection" and err.value.details["attempts"] == 3
    assert len(sleeps.calls) == 2


async def test_error_event_mid_stream_is_not_retried(fake_openai, sleeps):
    fake_openai.enqueue(FakeReply(text="partial", fail_midstream="overloaded mid-stream"))
    model = make_model(fake_openai, sleeps)
    seen = []
    with pytest.raises(RpError) as err:
        async for event in model.stream(ask()):
            seen.append(event)
    await model.aclose()
    assert err.value.code == "model.server_error" and "overloaded mid-stream" in err.value.message
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "partial"
    assert sleeps.calls == [] and len(fake_openai.chat_requests) == 1


async def test_server_without_usage_support_gives_no_usage(fake_openai):
    fake_openai.enqueue("plain")
    model = make_model(fake_openai, capabilities=Capabilities(supports_stream_usage=False))
    response = await complete(model, ask())
    await model.aclose()
    assert response.usage is None and "stream_options" not in fake_openai.chat_requests[0].body


def test_beta_url_sits_beside_v1():
    assert beta_url_for("https://api.deepseek.com") == "https://api.deepseek.com/beta"
    assert beta_url_for("https://api.deepseek.com/v1/") == "https://api.deepseek.com/beta"


async def test_a_connection_error_never_shows_credentials_from_the_base_url(sleeps):
    with serve_fake_openai() as fake:
        closed = fake.base_url  # nothing listens here once the server stops
    url = closed.replace("http://", "http://alice:s3cret@") + "?token=tok123"
    model = OpenAICompatModel(model="m", base_url=url, api_key=KEY, sleep=sleeps, retry=RetryPolicy(max_retries=0))
    with pytest.raises(RpError) as err:
        await complete(model, ask())
    await model.aclose()
    shown = f"{err.value.message} {err.value.to_dict()} {model!r}"
    assert err.value.code == "model.connection"
    assert not any(s in shown for s in ("alice", "s3cret", "tok123")), shown
    assert "http://***@" in err.value.message and "token=***" in err.value.message


async def test_the_kept_url_and_headers_build_the_requests_the_sdk_builds():
    """The client keeps a path's URL and the default headers; what it sends stays the SDK's own
    request, byte for byte, also after the base URL, the key or the transport's headers change."""
    import openai
    from openai._models import FinalRequestOptions

    from roleplay.harness.models.openai_compat import AsyncOpenAI, _HttpClient

    body = {"model": "m", "messages": [{"role": "user", "content": "鉄門 " * 50}], "stream": True}
    ours = AsyncOpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1", max_retries=0, http_client=_HttpClient())
    sdk = openai.AsyncOpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1", max_retries=0, http_client=openai.DefaultAioHttpClient())

    def same() -> None:
        for _ in range(3):
            mine, theirs = (
                c._build_request(FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=body)) for c in (ours, sdk)
            )
            assert (mine.method, str(mine.url), mine.headers.multi_items(), mine.read(), mine.extensions) == (
                theirs.method,
                str(theirs.url),
                theirs.headers.multi_items(),
                theirs.read(),
                theirs.extensions,
            )
            mine.headers["x-edited"] = "1"  # a built request's headers are its own

    same()
    changes = (
        ("base_url", "http://127.0.0.1:10/beta"),
        ("api_key", "sk-other"),
        ("timeout", 42.0),
        ("transport headers", {"x-extra": "1"}),
    )
    for what, value in changes:  # one at a time, each after a request that was remembered
        for client in (ours, sdk):
            if what == "transport headers":
                client._client.headers.update(value)
            else:
                setattr(client, what, value)
        same()
    with_own = FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=body, headers={"x-own": "2"})
    assert ours._build_request(with_own).headers["x-own"] == "2"
    await ours.close()
    await sdk.close()


async def test_clients_share_one_tls_context_made_off_the_event_loop(fake_openai, monkeypatch):
    """Loading the CA bundle held the loop for 10–15 ms at each new client: it is made once per
    process, on a worker thread, with the SDK's own settings, and every client verifies with it."""
    import ssl
    import threading

    import httpx2

    from roleplay.harness.models import openai_compat

    made: list[str] = []
    real = httpx2.create_ssl_context

    def counted(verify=True, **kwargs):
        if not isinstance(verify, ssl.SSLContext):  # one given is handed back as it is
            made.append(threading.current_thread().name)
        return real(verify=verify, **kwargs)

    monkeypatch.setattr(openai_compat, "_SSL_CONTEXT", [])
    monkeypatch.setattr(httpx2, "create_ssl_context", counted)
    loop_thread = threading.current_thread().name
    models = [make_model(fake_openai), make_model(fake_openai, model="gpt-other")]
    for model in models:
        fake_openai.enqueue(FakeReply(text="ok"))
        assert (await complete(model, ask())).text == "ok"
    assert len(made) == 1 and made[0] != loop_thread
    shared = openai_compat._SSL_CONTEXT[0]
    transports = [next(iter(m._clients.values()))._client._transport for m in models]
    assert all(t.ssl_context is shared for t in transports)
    for model in models:
        await model.aclose()


async def test_first_requests_at_once_share_one_client(fake_openai, monkeypatch):
    """Requests that all find no client yet (a server's sessions at start) wait for the TLS
    context together; one client is made, not one each with all but the last left open."""
    import anyio

    from roleplay.harness.models import openai_compat

    monkeypatch.setattr(openai_compat, "_SSL_CONTEXT", [])
    model = make_model(fake_openai)
    made = []
    real = openai_compat.AsyncOpenAI

    def counted(**kwargs):
        made.append(kwargs["base_url"])
        return real(**kwargs)

    monkeypatch.setattr(openai_compat, "AsyncOpenAI", counted)
    fake_openai.enqueue(*(FakeReply(text="ok") for _ in range(4)))
    answers = []

    async def one():
        answers.append((await complete(model, ask())).text)

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert answers == ["ok"] * 4 and len(made) == 1 and len(model._clients) == 1
    await model.aclose()
