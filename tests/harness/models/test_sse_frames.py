"""SSE decoding in batches (``sse_frames``): the same events as the openai SDK's own decoder, and
the client's events handed on a batch per read."""

from __future__ import annotations

from typing import Any, AsyncIterator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from roleplay.harness.models.openai_compat import OpenAICompatModel
from roleplay.harness.models.sse_frames import SSEFrames, iter_frames
from roleplay.harness.models.types import (
    ChatMessage,
    Completed,
    ModelRequest,
    StreamEvent,
    TextDelta,
    flatten,
    stream_batches,
)
from roleplay.testing.fake_openai import FakeReply

LINES = st.one_of(
    st.builds(lambda s: "data: " + s, st.text(max_size=12)),
    st.builds(lambda s: "data:" + s, st.text(max_size=6)),
    st.just('data: {"a": 1}'),
    st.just("data: [DONE]"),
    st.builds(lambda s: "event: " + s, st.sampled_from(["", "thread.x", "error", "message"])),
    st.builds(lambda s: "id: " + s, st.sampled_from(["", "7", "a\0b", " x"])),
    st.builds(lambda s: "retry: " + s, st.sampled_from(["5", "x", ""])),
    st.builds(lambda s: ":" + s, st.text(max_size=8)),
    st.sampled_from(["", "", "", "data", "event", "id", "other: value", "data:  two spaces"]),
)


def sdk_frames(body: bytes, cuts: list[int]) -> list[tuple[str | None, str]]:
    return [(sse.event, sse.data) for sse in SSEDecoder().iter_bytes(iter(split(body, cuts)))]


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    out, start = [], 0
    for point in points:
        out.append(body[start:point])
        start = point
    out.append(body[start:])
    return out  # empty chunks included: a transport may hand one out


@settings(max_examples=600, deadline=None)
@given(
    lines=st.lists(LINES, max_size=24),
    endings=st.lists(st.sampled_from(["\n", "\n", "\n", "\n", "\r\n", "\r"]), min_size=1, max_size=24),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    cuts_sdk=st.lists(st.integers(min_value=0, max_value=400), max_size=3),
)
def test_frames_match_the_sdk_decoder(lines: list[str], endings: list[str], cuts: list[int], cuts_sdk: list[int]) -> None:
    body = "".join(line + endings[i % len(endings)] for i, line in enumerate(lines)).encode()
    assert list(iter_frames(iter(split(body, cuts)))) == sdk_frames(body, cuts_sdk)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(max_size=10), max_size=12),
    keepalive=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=10),
)
def test_provider_shaped_bodies_match_the_sdk_decoder(texts: list[str], keepalive: bool, cuts: list[int]) -> None:
    # What providers send: one data line per event, keep-alive comments, blank-line separators.
    parts = [": keep-alive\n\n"] if keepalive else []
    parts += [f"data: {text}\n\n" for text in texts] + ["data: [DONE]\n\n"]
    body = "".join(parts).encode()
    assert list(iter_frames(iter(split(body, cuts)))) == sdk_frames(body, [])


def test_a_multibyte_character_split_across_reads_is_decoded_whole() -> None:
    body = 'data: {"t": "café ☕"}\n\n'.encode()
    for cut in range(1, len(body)):
        assert list(iter_frames(iter([body[:cut], body[cut:]]))) == [(None, '{"t": "café ☕"}')]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_frames_read_together_come_as_one_batch_with_the_same_events(fake_openai) -> None:
    text = "Once upon a time, a fox crossed the frozen river at dawn."
    fake_openai.enqueue(FakeReply(text=text, chunk_size=4), FakeReply(text=text, chunk_size=4))
    model = OpenAICompatModel(model="gpt-test", base_url=fake_openai.base_url, api_key="sk-test")
    request = ModelRequest(messages=[ChatMessage("user", "Hi")])
    batches = [list(batch) async for batch in model.stream_batches(request)]
    events = [e async for e in model.stream(request)]
    await model.aclose()
    flat = [e for batch in batches for e in batch]
    assert [e for e in flat if isinstance(e, TextDelta)] == [e for e in events if isinstance(e, TextDelta)]
    assert "".join(e.text for e in flat if isinstance(e, TextDelta)) == text
    assert isinstance(flat[-1], Completed) and flat[-1].response.text == text
    assert [e for e in flat if isinstance(e, Completed)] == [flat[-1]]
    assert all(batches)  # no empty batch is handed on


def test_every_frame_a_read_completes_comes_out_of_that_read() -> None:
    decoder = SSEFrames()
    out: list[tuple[str | None, str]] = []
    assert decoder.feed(b": keep-alive\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4", out)
    assert out == [(None, "1"), (None, "2"), (None, "3")]
    out.clear()
    assert decoder.feed(b"\n\n", out) and out == [(None, "4")]


class _Stream:
    """A model with ``stream`` only."""

    provider, model, label = "fake", "m", "fake/m"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta("a")
        yield TextDelta("b")


class _Batches(_Stream):
    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[StreamEvent]]:
        yield [TextDelta("a"), TextDelta("b")]


class _ForwardingWrapper:
    """Forwards every other attribute to its inner model, as the wrappers in core do."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in self._inner.stream(request):
            yield TextDelta(event.text.upper())  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_stream_batches_falls_back_to_stream_and_never_bypasses_a_forwarding_wrapper() -> None:
    request = ModelRequest(messages=[ChatMessage("user", "Hi")])
    assert [list(b) async for b in stream_batches(_Stream(), request)] == [[TextDelta("a")], [TextDelta("b")]]  # type: ignore[arg-type]
    assert [list(b) async for b in stream_batches(_Batches(), request)] == [[TextDelta("a"), TextDelta("b")]]  # type: ignore[arg-type]
    wrapped = _ForwardingWrapper(_Batches())
    assert [list(b) async for b in stream_batches(wrapped, request)] == [[TextDelta("A")], [TextDelta("B")]]  # type: ignore[arg-type]
    assert [e async for e in flatten(stream_batches(_Batches(), request))] == [TextDelta("a"), TextDelta("b")]  # type: ignore[arg-type]
