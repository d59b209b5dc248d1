"""The offline ``demo`` model: lets a newcomer play end to end without a key or a network.

It follows the whole ``ChatModel`` protocol (deltas, optional reasoning, tool calls, usage) and
says it is a demo in its label and in its own text. Behaviour comes from *policies*: functions
``(request) -> reply | None`` consulted in registration order; the first one that answers wins.
Features register their own (the roleplay engine registers one that calls its tools) and the
built-in fallback writes a short chat reply that reflects the last user message.

Determinism: the same request gives the same reply. Any variation is derived from a hash of the
request, never from a global RNG, so recorded demo sessions replay identically.

Loop safety: tool calls are dropped when no tools are offered, when ``tool_choice`` is "none",
when they name a tool that was not offered, or after ``max_tool_rounds`` consecutive tool rounds;
then the reply falls back to text. A demo policy can therefore never keep a turn calling tools
forever. The default of 4 rounds is the roleplay policy's longest honest path: write, a wrong
commit, its repair, and a plain commit with no effects when the repair still fails.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, AsyncIterator, Callable, Iterator

from roleplay.canonical import sha256_hex
from roleplay.errors import RpError

from .synthetic import Reply, coerce_reply, stream_reply
from .types import Capabilities, ChatMessage, ModelRequest, StreamEvent

DemoPolicy = Callable[[ModelRequest], Any]

DEMO_LABEL = "demo (offline, not a real model)"


class DemoPolicies:
    """An ordered, name-keyed list of policies. Registering a name again replaces it in place, so
    loading a plugin twice is harmless."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, DemoPolicy]] = []

    def register(self, name: str, policy: DemoPolicy, *, first: bool = False) -> None:
        for i, (existing, _) in enumerate(self._entries):
            if existing == name:
                self._entries[i] = (name, policy)
                return
        if first:
            self._entries.insert(0, (name, policy))
        else:
            self._entries.append((name, policy))

    def unregister(self, name: str) -> None:
        before = len(self._entries)
        self._entries = [(n, p) for n, p in self._entries if n != name]
        if len(self._entries) == before:
            raise RpError("model.demo_policy_unknown", f"no demo policy named {name!r}")

    def names(self) -> list[str]:
        return [name for name, _ in self._entries]

    def __iter__(self) -> Iterator[tuple[str, DemoPolicy]]:
        return iter(list(self._entries))


# Process-wide registry used by ``build_model("demo")``; tests pass their own ``DemoPolicies``.
DEFAULT_POLICIES = DemoPolicies()


def register_demo_policy(name: str, policy: DemoPolicy, *, first: bool = False) -> None:
    DEFAULT_POLICIES.register(name, policy, first=first)


class DemoModel:
    provider = "demo"

    def __init__(
        self,
        *,
        model: str = "demo",
        policies: DemoPolicies | None = None,
        max_tool_rounds: int = 4,
    ) -> None:
        self.model = model
        self.label = DEMO_LABEL
        self.capabilities = Capabilities()
        self.policies = DEFAULT_POLICIES if policies is None else policies
        self.max_tool_rounds = max_tool_rounds

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        reply = await self.choose(request)
        async for event in stream_reply(reply, request, provider=self.provider, model=self.model):
            yield event

    async def choose(self, request: ModelRequest) -> Reply:
        seed = request_seed(request)
        may_call_tools = (
            bool(request.tools) and request.tool_choice != "none" and trailing_tool_rounds(request.messages) < self.max_tool_rounds
        )
        offered = {tool.name for tool in request.tools}
        for _name, policy in self.policies:
            value = policy(request)
            if inspect.isawaitable(value):
                value = await value
            if value is None:
                continue
            reply = coerce_reply(value, call_id_prefix=f"demo_{seed[:8]}")
            reply.tool_calls = [c for c in reply.tool_calls if may_call_tools and c.name in offered]
            if reply.text or reply.tool_calls:
                if reply.reasoning is None:
                    reply.reasoning = _reasoning(request, seed)
                return reply
        return fallback_reply(request, seed)


def request_seed(request: ModelRequest) -> str:
    """A stable hash of what the model was shown: the source of every 'random' choice."""
    return sha256_hex([[m.role, m.content, [[c.name, c.arguments] for c in m.tool_calls], m.tool_call_id] for m in request.messages])


def trailing_tool_rounds(messages: list[ChatMessage]) -> int:
    """Assistant tool-call messages since the last user message."""
    rounds = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        if message.role == "assistant" and message.tool_calls:
            rounds += 1
    return rounds


_OPENERS = (
    "[demo reply: offline, not a real model] You said: “{quote}”",
    "[demo reply: offline, not a real model] I heard: “{quote}”",
    "[demo reply: offline, not a real model] “{quote}” (noted)",
)
_FOLLOW_UPS = (
    "So {reflection}? The story waits for your next move.",
    "If {reflection}, then the scene shifts a little. What happens next?",
    "Taking it that {reflection}, the narrator nods and lets you continue.",
    "Since {reflection}, the room falls quiet for a moment. Go on.",
)
_REFLECT = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "am": "are",
    "i'm": "you're",
    "myself": "yourself",
    "you": "I",
    "your": "my",
    "yours": "mine",
    "you're": "I'm",
}


def fallback_reply(request: ModelRequest, seed: str) -> Reply:
    last = request.messages[-1] if request.messages else None
    if last is not None and last.role == "tool":
        results = [m.text() for m in _trailing_tool_results(request.messages)]
        summary = "; ".join(_shorten(r, 60) for r in results if r) or "no output"
        text = (
            f"[demo reply: offline, not a real model] The tools answered ({summary}). A real model would now continue the story from here."
        )
        return Reply(text=text, reasoning=_reasoning(request, seed))
    user = next((m for m in reversed(request.messages) if m.role == "user"), None)
    said = user.text().strip() if user else ""
    if not said:
        text = (
            "[demo reply: offline, not a real model] Hello! I am the built-in demo model. "
            "Set DEEPSEEK_API_KEY or OPENAI_API_KEY to talk to a real one."
        )
        return Reply(text=text, reasoning=_reasoning(request, seed))
    pick = int(seed[:8], 16)
    opener = _OPENERS[pick % len(_OPENERS)].format(quote=_shorten(said, 120))
    follow = _FOLLOW_UPS[(pick // len(_OPENERS)) % len(_FOLLOW_UPS)].format(reflection=reflect(_shorten(said, 80)))
    return Reply(text=f"{opener} {follow}", reasoning=_reasoning(request, seed))


def reflect(text: str) -> str:
    """Swap first and second person, ELIZA-style: a paraphrase that needs no model."""
    words = re.findall(r"[\w']+|[^\w']+", text.rstrip(".!?").strip())
    out = [_REFLECT.get(w.lower(), w) if re.match(r"[\w']", w) else w for w in words]
    if out and out[0] not in ("I",):
        out[0] = out[0][:1].lower() + out[0][1:]
    return "".join(out)


def _trailing_tool_results(messages: list[ChatMessage]) -> list[ChatMessage]:
    results: list[ChatMessage] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(message)
    return list(reversed(results))


def _reasoning(request: ModelRequest, seed: str) -> str | None:
    if request.reasoning_effort in (None, "none"):
        return None
    return f"Demo reasoning (not a real model): replying from a fixed template, variant {seed[:6]}."


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
