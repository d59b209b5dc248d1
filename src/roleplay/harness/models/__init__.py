"""The model layer: a small ``ChatModel`` protocol with providers behind it.

Real providers (DeepSeek, any OpenAI-compatible server) run on the ``openai`` SDK; the scripted
model drives tests; the offline demo model lets a newcomer play without a key. Routes pick one.
"""

from typing import Any

from .demo import DEFAULT_POLICIES, DemoModel, DemoPolicies, register_demo_policy
from .deepseek import DEEPSEEK_CAPABILITIES, deepseek_model
from .failures import RetryPolicy
from .routes import Route, build_model, parse_route_spec, resolve_route
from .scripted import ScriptedModel
from .synthetic import Reply
from .types import (
    Capabilities,
    ChatMessage,
    ChatModel,
    Completed,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
)


def __getattr__(name: str) -> Any:
    # The provider on the ``openai`` SDK loads on first use: importing the package (every story
    # command does) must not cost the SDK's import time.
    if name == "OpenAICompatModel":
        from .openai_compat import OpenAICompatModel

        return OpenAICompatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEEPSEEK_CAPABILITIES",
    "DEFAULT_POLICIES",
    "Capabilities",
    "ChatMessage",
    "ChatModel",
    "Completed",
    "DemoModel",
    "DemoPolicies",
    "ModelRequest",
    "ModelResponse",
    "OpenAICompatModel",
    "ReasoningDelta",
    "Reply",
    "RetryPolicy",
    "Route",
    "ScriptedModel",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "build_model",
    "complete",
    "deepseek_model",
    "parse_route_spec",
    "register_demo_policy",
    "resolve_route",
]
