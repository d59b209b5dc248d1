"""A plain (non-roleplay) agent chat: its preset name and agent spec.

``rp chat`` (``harness/chat.py``) and the HTTP API's chats both run it; kept apart from the
command so that neither the runtime nor the web layer imports the command-line interface.
"""

from __future__ import annotations

from .loop import AgentSpec
from .prompts import ORDER_IDENTITY, PromptAssembly, PromptSection

CHAT_PRESET = "chat"
CHAT_STEP_LIMIT = 5
IDENTITY = "You are a helpful, concise assistant talking with the user in a terminal. Answer in the user's language."


def chat_spec(context_window: int | None = None) -> AgentSpec:
    """``context_window``: the route's window; earlier exchanges give way to it, newest kept."""
    return AgentSpec(
        prompt=PromptAssembly([PromptSection("harness:identity", IDENTITY, ORDER_IDENTITY)]),
        step_limit=CHAT_STEP_LIMIT,
        mode="chat",
        context_window=context_window,
    )
