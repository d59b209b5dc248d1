"""The fake server's wire format, checked with a raw HTTP client (no SDK in between)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

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
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0] for c in data_lines(body) if c["choices"] and "tool_calls" in c["choices"][0]["delta"]
    ]
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
    tool_turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
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


# -- function declarations: the rules the real APIs enforce on ``tools[].function`` --------------

POINT = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"], "additionalProperties": False}


def with_tool(parameters: dict, *, strict: bool | None = None, name: str = "f") -> dict:
    function: dict = {"name": name, "description": "d", "parameters": parameters}
    if strict is not None:
        function["strict"] = strict
    return chat(tools=[{"type": "function", "function": {"name": "ok", "parameters": POINT}}, {"type": "function", "function": function}])


def rejected(fake, body: dict, path: str = "/v1/chat/completions") -> dict:
    status, _, data = post(fake, path, body)
    assert status == 400, data
    return json.loads(data)["error"]


def test_a_root_one_of_declaration_is_rejected_with_openais_error():
    union = {"type": "object", "oneOf": [POINT, {"type": "object", "properties": {"y": {"type": "string"}}}]}
    with serve_fake_openai(strict=True) as fake:
        error = rejected(fake, with_tool(union, name="rp_commit_turn"))
        assert fake.pending == 0  # rejected before the script is consulted
    assert error == {
        "message": "Invalid schema for function 'rp_commit_turn': schema must have type 'object' and not have "
        "'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level.",
        "type": "invalid_request_error",
        "param": "tools[1].function.parameters",
        "code": "invalid_function_parameters",
    }


@pytest.mark.parametrize("keyword", ["oneOf", "anyOf", "allOf", "enum", "not"])
def test_every_root_combinator_is_rejected_by_both_flavours(keyword):
    value = {"oneOf": [POINT], "anyOf": [POINT], "allOf": [POINT], "enum": [{"x": 1}], "not": {"required": ["y"]}}[keyword]
    for flavor in ("openai", "deepseek"):
        with serve_fake_openai(flavor=flavor) as fake:
            error = rejected(fake, with_tool({**POINT, keyword: value}))
        assert "at the top level" in error["message"], (flavor, keyword)


def test_a_root_that_is_not_an_object_schema_is_rejected():
    with serve_fake_openai() as fake:
        untyped = rejected(fake, with_tool({"oneOf": [POINT]}))
        array = rejected(fake, with_tool({"type": "array", "items": {"type": "string"}}))
    assert (
        untyped["message"] == "Invalid schema for function 'f': schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'."
    )
    assert "got 'type: \"array\"'" in array["message"] and array["code"] == "invalid_function_parameters"


def test_nested_combinators_and_a_missing_parameters_object_are_accepted():
    nested = {"type": "object", "properties": {"e": {"type": "array", "items": {"oneOf": [POINT, {"type": "string"}]}}}}
    with serve_fake_openai() as fake:
        fake.enqueue("fine", "fine too")
        assert post(fake, "/v1/chat/completions", with_tool(nested))[0] == 200
        no_params = chat(tools=[{"type": "function", "function": {"name": "g"}}])
        assert post(fake, "/v1/chat/completions", no_params)[0] == 200


def test_a_bad_function_name_is_rejected():
    with serve_fake_openai() as fake:
        error = rejected(fake, with_tool(POINT, name="rp commit"))
    assert error["param"] == "tools[1].function.name" and "does not match pattern" in error["message"]


def test_strict_functions_must_close_every_object_and_require_every_property():
    loose = {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "string"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    open_inner = {**POINT, "properties": {"x": {"type": "object", "properties": {"z": {"type": "string"}}, "required": ["z"]}}}
    one_of = {**POINT, "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "number"}]}}}
    with serve_fake_openai() as fake:
        missing = rejected(fake, with_tool(loose, strict=True))
        inner = rejected(fake, with_tool(open_inner, strict=True))
        combinator = rejected(fake, with_tool(one_of, strict=True))
        fake.enqueue("ok", "ok")
        assert post(fake, "/v1/chat/completions", with_tool(loose, strict=False))[0] == 200  # not strict: fine
        any_of = {**POINT, "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]}}}
        assert post(fake, "/v1/chat/completions", with_tool(any_of, strict=True))[0] == 200
    assert missing["message"] == (
        "Invalid schema for function 'f': In context=(), 'required' is required to be supplied and to be an array "
        "including every key in properties. Missing 'y'."
    )
    assert inner["message"] == (
        "Invalid schema for function 'f': In context=('properties', 'x'), 'additionalProperties' is required to be "
        "supplied and to be false."
    )
    assert combinator["message"] == "Invalid schema for function 'f': In context=('properties', 'x'), 'oneOf' is not permitted."


def test_deepseek_checks_strict_schemas_only_on_the_beta_endpoint_and_refuses_length_bounds():
    bounded = {**POINT, "properties": {"x": {"type": "string", "maxLength": 3}}}
    with serve_fake_openai(flavor="deepseek", require_reasoning_content=False) as fake:
        fake.enqueue("ignored outside beta")
        assert post(fake, "/chat/completions", with_tool(bounded, strict=True))[0] == 200
        error = rejected(fake, with_tool(bounded, strict=True), path="/beta/chat/completions")
    assert error["code"] == "invalid_request_error" and error["param"] is None
    assert "'maxLength' is not permitted" in error["message"]


def test_declaration_checks_can_be_switched_off_for_lenient_local_servers():
    with serve_fake_openai(check_declarations=False) as fake:
        fake.enqueue("llama.cpp takes anything")
        assert post(fake, "/v1/chat/completions", with_tool({"oneOf": [POINT]}))[0] == 200


def get_json(fake, path):
    url = urlsplit(fake.root_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.request("GET", path)
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


def test_each_answer_is_timed_on_the_servers_side_and_keyed_by_its_last_match():
    with serve_fake_openai(chunk_delay=0.01) as fake:
        # Three frames before any output (keep-alive, role, keep-alive), then "ab", "cd".
        fake.enqueue(FakeReply(text="abcd", chunk_size=2), FakeReply(text="x"))
        messages = [
            {"role": "user", "content": "turn 1"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "turn 2 and turn 3"},
        ]
        post(fake, "/v1/chat/completions", {"model": "m", "stream": True, "messages": messages})
        post(fake, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "turn 7"}]}]})
        status, rows = get_json(fake, "/v1/_fake/timings?key=turn%20(%5Cd)")
        _, unkeyed = get_json(fake, "/_fake/timings")
    assert status == 200 and [r["key"] for r in rows] == ["3", "7"] and [r["number"] for r in rows] == [1, 2]
    streamed, plain = rows
    # The first output comes after the frames without any (each followed by the 10 ms pause).
    assert streamed["received"] + 0.025 <= streamed["firstOutput"] < streamed["done"]
    assert streamed["done"] - streamed["received"] >= 0.07  # seven frames, each then a pause
    assert plain["received"] <= plain["firstOutput"] == plain["done"]
    assert [r["key"] for r in unkeyed] == [None, None]
    assert fake.requests[0].done == streamed["done"]  # the timings endpoint itself is not recorded
    assert len(fake.requests) == 2
