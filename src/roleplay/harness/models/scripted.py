"""``ScriptedModel``: a ``ChatModel`` whose replies a test writes down in advance.

The pattern of simonw/llm's ``MockModel.enqueue`` and pydantic-ai's ``FunctionModel``: replies
come from a queue, then from an optional responder function of the request; every request is
recorded so a test can assert what the loop offered at each step. An exhausted script is an
error, never a silent default, so a loop that asks once too often fails loudly.
"""

from __future__ import annotations

import inspect
from typing import Any, AsyncIterator, Callable, Iterable

from roleplay.errors import RpError

from .synthetic import coerce_reply, stream_reply
from .types import Capabilities, ModelRequest, StreamEvent

Responder = Callable[[ModelRequest], Any]


class ScriptedModel:
    provider = "scripted"

    def __init__(
        self,
        replies: Iterable[Any] = (),
        *,
        responder: Responder | None = None,
        model: str = "scripted",
        capabilities: Capabilities | None = None,
        pieces: int = 3,
    ) -> None:
        self.model = model
        self.label = f"scripted ({model}, test double)"
        self.capabilities = capabilities or Capabilities()
        self.requests: list[ModelRequest] = []
        self._queue: list[Any] = list(replies)
        self._responder = responder
        self._pieces = pieces

    def enqueue(self, *replies: Any) -> None:
        """Append replies: strings, ``Reply``/dict/``ModelResponse`` specs, or exceptions to raise."""
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        number = len(self.requests)
        if self._queue:
            value = self._queue.pop(0)
        elif self._responder is not None:
            value = self._responder(request)
            if inspect.isawaitable(value):
                value = await value
        else:
            raise RpError(
                "model.script_exhausted",
                f"scripted model {self.model!r} got request #{number} but has no reply left; enqueue more",
                details={"requests": number},
            )
        if isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException)):
            raise value
        reply = coerce_reply(value, call_id_prefix=f"call_{number}")
        async for event in stream_reply(reply, request, provider=self.provider, model=self.model, pieces=self._pieces):
            yield event
