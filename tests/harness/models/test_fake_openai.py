"""The fake server's wire format, checked with a raw HTTP client (no SDK in between)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from urllib.parse import urlsplit

from roleplay.testing.fake_openai import FakeError, FakeReply, serve_fake_openai


def post(fake, path, body, key="k"):
    url = urlsplit(fake.root_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    data = response.read().decode()
    conn.close()
    return response.status, dict(response.getheaders()), data


def chat(**kw):
    return {"model": "m", "messages": [{"role": "user", "content": "hello fox"}], **kw}


def data_lines(sse: str) -> list:
    return [json.loads(line[6:]) for line in sse.split("\n") if line.startswith("data: {")]


def test_sse_stream_shape():
    with serve_fake_openai(flavor="deepseek") as fake:
        fake.enqueue(FakeReply(text="abcdefgh", reasoning="rrr", chunk_size=4))
        status, headers, body = post(fake, "/v1/chat/completions", chat(stream=True, stream_options={"include_usage": True}))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert body.startswith(": keep-alive\n\n") and body.count(": keep-alive") == 2
    assert body.endswith("data: [DONE]\n\n")
    chunks = data_lines(body)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"].get("reasoning_content") for c in chunks[1:2]] == ["rrr"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "abcdefgh"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == [] and usage["prompt_cache_hit_tokens"] == 0
    assert usage["prompt_cache_miss_tokens"] == usage["prompt_tokens"]


def test_stream_without_include_usage_has_no_usage_chunk():
    with serve_fake_openai() as fake:
        fake.enqueue("x")
        _, _, body = post(fake, "/chat/completions", chat(stream=True))
    assert all("usage" not in c for c in data_lines(body))


def test_parallel_tool_call_fragments_on_the_wire():
    with serve_fake_openai() as fake:
        fake.enqueue(FakeReply(tool_calls=[{"name": "a", "arguments": {"k": "vvvv"}}, {"name": "b", "arguments": "{}"}], chunk_size=3))
        _, _, body = post(fake, "/v1/chat/completions", chat(stream=True))
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in data_lines(body) if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
    heads = [c for c in calls if "id" in c]
    assert [(h["index"], h["id"], h["function"]["name"]) for h in heads] == [(0, "call_1_0", "a"), (1, "call_1_1", "b")]
    args0 = "".join(c["function"]["arguments"] for c in calls if c["index"] == 0)
    assert json.loads(args0) == {"k": "vvvv"} and sum(1 for c in calls if c["index"] == 0) > 3


def test_non_streaming_json():
    with serve_fake_openai(flavor="deepseek") as fake:
        fake.enqueue(FakeReply(text="", reasoning="r", tool_calls=[{"id": "t", "name": "f", "arguments": {}}]))
        status, _, body = post(fake, "/beta/chat/completions", chat())
        path = fake.requests[0].path
    payload = json.loads(body)
    message = payload["choices"][0]["message"]
    assert status == 200 and payload["object"] == "chat.completion" and path == "/beta/chat/completions"
    assert message["content"] is None and message["reasoning_content"] == "r"
    assert message["tool_calls"] == [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert payload["choices"][0]["finish_reason"] == "tool_calls"


def test_models_endpoint_and_unknown_routes():
    with serve_fake_openai(models=["m1", "m2"]) as fake:
        url = urlsplit(fake.root_url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        conn.request("GET", "/v1/models")
        listing = json.loads(conn.getresponse().read())
        conn.close()
        status, _, _ = post(fake, "/v1/embeddings", {"input": "x"})
    assert [m["id"] for m in listing["data"]] == ["m1", "m2"] and status == 404


def test_error_bodies_and_headers():
    with serve_fake_openai() as fake:
        fake.enqueue(FakeError.rate_limited(retry_after=1))
        status, headers, body = post(fake, "/v1/chat/completions", chat())
    assert status == 429 and headers["retry-after"] == "1"
    assert json.loads(body)["error"]["type"] == "rate_limit_error"


def test_built_in_checks_run_before_the_script():
    tool_turn = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    with serve_fake_openai(flavor="deepseek", api_keys=["good"]) as fake:
        fake.enqueue("kept for later")
        assert post(fake, "/chat/completions", chat(), key="bad")[0] == 401
        status, _, body = post(fake, "/chat/completions", chat(messages=[tool_turn]), key="good")
        assert status == 400 and "reasoning_content" in body
        forced = chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}], tool_choice="required")
        status, _, body = post(fake, "/chat/completions", forced, key="good")
        assert status == 400 and "Thinking mode does not support this tool_choice" in body
        assert fake.pending == 1
        assert json.loads(post(fake, "/chat/completions", chat(), key="good")[2])["choices"][0]["message"]["content"] == "kept for later"
    assert [r.api_key for r in fake.requests] == ["bad", "good", "good", "good"]


def test_responder_then_default_then_strict():
    with serve_fake_openai(responder=lambda r: "from responder" if r.messages[-1]["content"] == "ask" else None) as fake:
        answered = json.loads(post(fake, "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "ask"}]})[2])
        default = json.loads(post(fake, "/chat/completions", chat())[2])
    assert answered["choices"][0]["message"]["content"] == "from responder"
    assert default["choices"][0]["message"]["content"] == "[fake server: not a real model] You said: “hello fox”. The story goes on."
    with serve_fake_openai(strict=True) as fake:
        status, _, body = post(fake, "/chat/completions", chat())
    assert status == 400 and "fake_script_exhausted" in body


def test_runs_standalone():
    proc = subprocess.Popen(
        [sys.executable, "-m", "roleplay.testing.fake_openai", "--port", "0", "--flavor", "deepseek"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        banner = proc.stdout.readline()
        root = banner.split(" on ", 1)[1].split(" ", 1)[0]
        url = urlsplit(root)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
        conn.request("POST", "/chat/completions", json.dumps(chat()), {"Content-Type": "application/json"})
        reply = json.loads(conn.getresponse().read())
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        proc.stdout.close()
    assert banner.startswith("fake deepseek server on http://127.0.0.1:")
    assert "hello fox" in reply["choices"][0]["message"]["content"]
