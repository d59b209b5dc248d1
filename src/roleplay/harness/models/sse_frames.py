"""The provider's SSE body as batches of decoded frames: one batch per read from the socket.

The SDK's ``AsyncStream`` decodes a body line by line through four nested async generators and
hands out one frame per step; a loaded server spent more CPU there than on anything else it did
per streamed frame. ``FrameBatches`` is an ``AsyncStream`` (the request still goes through the
SDK's ``client.post``: its transport, timeouts and status-error mapping) whose iteration yields a
list per chunk of bytes read, with the same frames, ``[DONE]`` handling, in-stream ``error``
objects and transport-error mapping as the SDK's ``__stream__``.

Decoding (``SSEFrames``) is the SDK's ``SSEDecoder`` over its line splitter, event for event
(property-tested against them): blocks made of one ``data:`` line (what providers send) are
decoded directly; any other block goes through an ``SSEDecoder`` line by line; a body with a
carriage return is handed to the SDK's decoder whole from there on.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Iterator, cast

import openai
from openai._streaming import SSEDecoder, ServerSentEvent, drain_response_async, request_exceptions, timeout_exceptions

Frame = tuple[str | None, str]  # (the SSE event name, its data)


class SSEFrames:
    """Incremental SSE decoding of ``\\n``-separated bodies: ``feed`` appends the events (event,
    data) completed by each chunk. Blocks of one ``data:`` line, comments and empty blocks are
    read here; from the first other block on, every line goes through an ``SSEDecoder`` (whose
    state, the last event id above all, then decides). A chunk with a carriage return is kept
    (``feed`` returns False) and the caller decodes the rest of the body with ``sdk_decoder()``
    from ``pending()`` on."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # bytes not decoded yet: after the last blank line, or line
        self._lines: SSEDecoder | None = None  # line by line once a block other than the above came

    def feed(self, chunk: bytes, out: list[Frame]) -> bool:
        if not chunk:
            return True
        if b"\r" in chunk:
            self._parts.append(chunk)
            return False
        if self._lines is not None:
            self._feed_lines(chunk, out)
            return True
        if b"\n\n" not in chunk:
            # No blank line inside the chunk; one may still straddle it and the previous chunk.
            if not (chunk[:1] == b"\n" and self._parts and self._parts[-1][-1:] == b"\n"):
                self._parts.append(chunk)
                return True
        if self._parts:
            self._parts.append(chunk)
            chunk = b"".join(self._parts)
            self._parts = []
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        for i, block in enumerate(blocks):
            if block[:6] == b"data: " and b"\n" not in block:
                out.append((None, block[6:].decode("utf-8")))
            elif block and not (block[:1] == b":" and b"\n" not in block):
                # Not one data line, a comment or nothing: the SDK's decoder from here on.
                self._lines = SSEDecoder()
                self._feed_lines(b"\n\n".join(blocks[i:]) + b"\n\n" + rest, out)
                return True
        if rest:
            self._parts.append(rest)
        return True

    def _feed_lines(self, chunk: bytes, out: list[Frame]) -> None:
        if b"\n" not in chunk:
            self._parts.append(chunk)
            return
        if self._parts:
            self._parts.append(chunk)
            chunk = b"".join(self._parts)
            self._parts = []
        end = chunk.rfind(b"\n")
        if end + 1 < len(chunk):
            self._parts.append(chunk[end + 1 :])
        decode = self._lines.decode  # type: ignore[union-attr]
        for line in chunk[:end].split(b"\n"):
            sse = decode(line.decode("utf-8"))
            if sse is not None:
                out.append((sse.event, sse.data))

    def pending(self) -> bytes:
        return b"".join(self._parts)

    def sdk_decoder(self) -> SSEDecoder:
        """The decoder to go on with from ``pending()``, in the state the lines so far left."""
        return self._lines if self._lines is not None else SSEDecoder()


async def _sdk_frames(decoder: SSEDecoder, first: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
    async def body() -> AsyncIterator[bytes]:
        yield first
        async for chunk in chunks:
            yield chunk

    async for sse in decoder.aiter_bytes(body()):
        yield sse


# The most the SDK's aiohttp transport reads at once: a shorter read took all that was buffered.
AIOHTTP_READ = 16 * 1024


class FrameBatches(openai.AsyncStream[object]):
    """``client.post(..., stream=True, stream_cls=FrameBatches)``: iterates lists of frames (the
    decoded JSON of each ``data``; a ``null`` is left out), one list per chunk read.
    ``last_read`` is the size of the chunk the latest batch came from."""

    last_read = 0

    async def __stream__(self) -> AsyncIterator[Any]:  # type: ignore[override]
        response = self.response
        options = self._options
        legacy = options is None or options.stream_mode == "legacy"
        synthesize = options is not None and bool(options.synthesize_event_and_data)
        decoder = SSEFrames()
        chunks = response.aiter_bytes()
        try:
            try:
                async for chunk in chunks:
                    self.last_read = len(chunk)
                    frames: list[Frame] = []
                    try:
                        plain = decoder.feed(chunk, frames)
                    except Exception as exc:  # noqa: BLE001 - raised after the frames before it
                        batch, done, error = _decode(frames, response, legacy, synthesize)
                        if batch:
                            yield batch
                        raise error or exc
                    if plain:
                        if not frames:
                            continue
                        batch, done, error = _decode(frames, response, legacy, synthesize)
                        if batch:
                            yield batch
                        if error is not None:
                            raise error
                        if done:
                            await _drain(response)
                            return
                        continue
                    # A carriage return: the SDK's decoder takes the body from here, a frame a batch.
                    async for sse in _sdk_frames(decoder.sdk_decoder(), decoder.pending(), chunks):
                        batch, done, error = _decode([(sse.event, sse.data)], response, legacy, synthesize)
                        if batch:
                            yield batch
                        if error is not None:
                            raise error
                        if done:
                            await _drain(response)
                            return
                    return
            except timeout_exceptions() as err:
                raise openai.APITimeoutError(request=response.request) from err
            except request_exceptions() as err:
                raise openai.APIConnectionError(request=response.request) from err
        finally:
            await response.aclose()

    def batches(self) -> AsyncIterator[list[Any]]:
        return cast("AsyncIterator[list[Any]]", self._iterator)


async def _drain(response: Any) -> None:
    # HTTP/1.1 needs the rest of the body read for the connection to be reused (as the SDK does).
    if response.http_version == "HTTP/1.1":
        await drain_response_async(response)


def _decode(frames: list[Frame], response: Any, legacy: bool, synthesize: bool) -> tuple[list[Any], bool, BaseException | None]:
    """The SDK's ``__stream__`` over these events: their data, whether ``[DONE]`` came, and the
    error that stopped them (an in-stream ``error`` object, undecodable JSON), which the caller
    raises after handing out the frames before it, as the SDK would have."""
    batch: list[Any] = []
    for event, data in frames:
        if data.startswith("[DONE]"):
            return batch, True, None
        try:
            value = json.loads(data)
        except ValueError as exc:
            return batch, False, exc
        if legacy and event and event.startswith("thread."):
            batch.append({"data": value, "event": event})
            continue
        if legacy and isinstance(value, dict) and value.get("error"):
            error = value["error"]
            message = error.get("message") if isinstance(error, dict) else None
            if not message or not isinstance(message, str):
                message = "An error occurred during streaming"
            return batch, False, openai.APIError(message=message, request=response.request, body=error)
        if synthesize:
            value = {"data": value, "event": event}
        if value is not None:
            batch.append(value)
    return batch, False, None


def iter_frames(chunks: Iterator[bytes]) -> Iterator[Frame]:
    """Every (event, data) of a body given as chunks, by ``SSEFrames`` (with its SDK fallback):
    what the property tests compare with the SDK's own decoding."""
    decoder = SSEFrames()
    for chunk in chunks:
        out: list[Frame] = []
        if decoder.feed(chunk, out):
            yield from out
            continue
        sdk = decoder.sdk_decoder()
        rest = [decoder.pending(), *chunks]
        for sse in sdk.iter_bytes(iter(rest)):
            yield (sse.event, sse.data)
        return
