"""Neutral types: request validation and the ``complete`` helper's protocol checks."""

from __future__ import annotations

import pytest

from roleplay.errors import RpError
from roleplay.harness.models.types import (
    Capabilities,
    ChatMessage,
    ChatModel,
    Completed,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolSpec,
    Usage,
    complete,
)

pytestmark = pytest.mark.anyio

TOOL = ToolSpec("roll", "Roll", {"type": "object"})


def response(text: str = "ok") -> ModelResponse:
    return ModelResponse(text, None, [], Usage(1, 1, 2), "stop", "m", "p")


class Canned:
    provider = "canned"
    model = "m"
    label = "canned"
    capabilities = Capabilities()

    def __init__(self, events):
        self.events = events

    async def stream(self, request):
        for event in self.events:
            yield event


def test_message_text_joins_text_blocks_only():
    msg = ChatMessage(
        "user", [{"type": "text", "text": "a"}, {"type": "image", "mediaType": "image/png", "data": "x"}, {"type": "text", "text": "b"}]
    )
    assert msg.text() == "ab"
    assert ChatMessage("user", "plain").text() == "plain"


@pytest.mark.parametrize("choice", ["auto", "none", "required", {"name": "roll"}])
def test_valid_tool_choices(choice):
    assert ModelRequest([ChatMessage("user", "x")], tools=[TOOL], tool_choice=choice).tool_choice == choice


@pytest.mark.parametrize("choice", ["any", {"name": "missing"}, {"tool": "roll"}, {"name": "roll", "x": 1}])
def test_bad_tool_choices(choice):
    with pytest.raises(RpError) as err:
        ModelRequest([ChatMessage("user", "x")], tools=[TOOL], tool_choice=choice)
    assert err.value.code == "model.bad_tool_choice"


def test_bad_effort():
    with pytest.raises(RpError) as err:
        ModelRequest([ChatMessage("user", "x")], reasoning_effort="extreme")
    assert err.value.code == "model.bad_effort"


def test_usage_to_dict_drops_unknowns():
    assert Usage(3, 4, 7, cache_hit_tokens=2).to_dict() == {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 7,
        "cache_hit_tokens": 2,
    }


async def test_complete_returns_the_completed_response():
    model = Canned([TextDelta("o"), TextDelta("k"), Completed(response())])
    assert isinstance(model, ChatModel)
    assert (await complete(model, ModelRequest([ChatMessage("user", "x")]))).text == "ok"


@pytest.mark.parametrize("events", [[TextDelta("x")], [Completed(response()), Completed(response())]])
async def test_complete_rejects_a_broken_stream(events):
    with pytest.raises(RpError) as err:
        await complete(Canned(events), ModelRequest([ChatMessage("user", "x")]))
    assert err.value.code == "model.protocol"
