"""The model layer: a small ``ChatModel`` protocol with providers behind it.

Real providers (DeepSeek, any OpenAI-compatible server) run on the ``openai`` SDK; the scripted
model drives tests; the offline demo model lets a newcomer play without a key. Routes pick one.
"""

from .demo import DEFAULT_POLICIES, DemoModel, DemoPolicies, register_demo_policy
from .deepseek import DEEPSEEK_CAPABILITIES, deepseek_model
from .failures import RetryPolicy
from .openai_compat import OpenAICompatModel
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
