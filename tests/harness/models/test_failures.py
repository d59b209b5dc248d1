"""Error mapping and retry decisions on SDK exceptions built by hand."""

from __future__ import annotations

import httpx2
import openai
import pytest

from roleplay.harness.models.failures import RetryPolicy, is_retryable, map_error, redact, retry_after_seconds
from roleplay.harness.models.types import Capabilities

REQUEST = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")


def status_error(status: int, body: dict, headers: dict | None = None) -> openai.APIStatusError:
    response = httpx2.Response(status, request=REQUEST, headers=headers or {})
    return openai.APIStatusError(f"Error code: {status}", response=response, body=body)


def mapped(exc, key="sk-live-SECRET-abcdef"):
    return map_error(exc, provider="p", model="m", base_url="http://x", caps=Capabilities(), api_key=key, attempts=1)


def test_backoff_doubles_and_caps():
    policy = RetryPolicy(max_retries=6, base_delay=0.5, max_delay=3.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(1, retry_after=1.5) == 1.5
    assert policy.delay(1, retry_after=60) == 0.5  # longer than the cap: our schedule wins


def test_retry_after_headers():
    assert retry_after_seconds(status_error(429, {}, {"retry-after-ms": "250"})) == 0.25
    assert retry_after_seconds(status_error(429, {}, {"retry-after": "3"})) == 3.0
    assert retry_after_seconds(status_error(429, {}, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None


@pytest.mark.parametrize("status, retry", [(400, False), (401, False), (404, False), (429, True), (500, True), (503, True)])
def test_retryable_statuses(status, retry):
    assert is_retryable(status_error(status, {})) is retry


def test_connection_errors_are_retryable():
    assert is_retryable(openai.APITimeoutError(REQUEST)) and is_retryable(openai.APIConnectionError(request=REQUEST))
    assert not is_retryable(ValueError("x"))


def test_redact_removes_the_key_and_key_like_tokens():
    assert redact("bad key sk-live-SECRET-abcdef here", "sk-live-SECRET-abcdef") == "bad key *** here"
    assert redact("Incorrect API key provided: sk-proj-****wxyz.", None) == "Incorrect API key provided: sk-***."


def test_provider_message_echoing_the_key_is_redacted():
    err = mapped(status_error(400, {"message": "key sk-live-SECRET-abcdef is not allowed for this"}))
    assert err.code == "model.bad_request" and "SECRET" not in err.message


@pytest.mark.parametrize(
    "status, body, code",
    [
        (401, {"message": "x"}, "model.auth"),
        (403, {"message": "x"}, "model.auth"),
        (402, {"message": "Insufficient Balance"}, "model.insufficient_balance"),
        (404, {"message": "x"}, "model.unknown_model"),
        (400, {"message": "Model Not Exist"}, "model.unknown_model"),
        (400, {"message": "x", "code": "model_not_found"}, "model.unknown_model"),
        (400, {"message": "This model's maximum context length is 65536 tokens. However..."}, "model.context_overflow"),
        (400, {"message": "too long", "code": "context_length_exceeded"}, "model.context_overflow"),
        (400, {"message": "Invalid max_tokens value"}, "model.bad_request"),
        (429, {"message": "slow down"}, "model.rate_limited"),
        (502, {"message": "bad gateway"}, "model.server_error"),
    ],
)
def test_status_codes_map_to_stable_codes(status, body, code):
    assert mapped(status_error(status, body)).code == code


def test_overflow_details_carry_the_window():
    err = mapped(status_error(400, {"message": "This model's maximum context length is 65536 tokens."}))
    assert err.details["limit"] == 65536
    assert "limit" not in mapped(status_error(400, {"message": "too long", "code": "context_length_exceeded"})).details


def test_stream_error_event_is_server_error():
    err = mapped(openai.APIError("boom", REQUEST, body={"message": "boom"}))
    assert err.code == "model.server_error" and "boom" in err.message
