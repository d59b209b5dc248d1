"""A scripted roleplay parent and Writer whose every reply and commit differ, for action tests.

Message actions (regenerate, swipes, branch) must be checked against replies that are told apart
by their text *and* their state change: ``CountingStory`` numbers each Writer draft and commits a
distinct ``state.update`` for it on the bundled sample card (``/林汐/心情`` set to a numbered mood,
``/林汐/信任`` moved by a small amount in bounds). A refused commit is followed by one without
effects, so a run never loops. Deterministic: the n-th Writer request of the runtime gets draft n.
"""

from __future__ import annotations

import re
from typing import Any

from roleplay.harness.models.demo import DemoModel
from roleplay.harness.models.scripted import ScriptedModel
from roleplay.harness.models.types import ChatMessage, ModelRequest
from roleplay.names import COMMIT_TURN_TOOL, STATE_UPDATE_EFFECT, WRITE_TURN_TOOL

WRITE = WRITE_TURN_TOOL
COMMIT = COMMIT_TURN_TOOL
WRITER_MARKER = "You are the Writer of a roleplay story."
_REVISION = re.compile(r'\\?"expectedRevision\\?":\s*(\d+)')


class CountingStory:
    """``responder`` for :class:`ScriptedModel`; ``drafts`` counts the Writer requests answered."""

    def __init__(self, *, discussion_every: int = 0) -> None:
        self.drafts = 0
        self.parent_turns = 0
        self.discussion_every = discussion_every  # every n-th turn answers without the Writer

    def model(self) -> ScriptedModel:
        return ScriptedModel(responder=self)

    async def __call__(self, request: ModelRequest) -> Any:
        system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
        if not request.tools and WRITER_MARKER not in system:
            # Another no-tool call of the turn (reply options, a summary): the demo answers it.
            return await DemoModel().choose(request)
        if not request.tools:
            self.drafts += 1
            return {"text": f"第{self.drafts}稿：雾里传来第{self.drafts}声钟响。"}
        index = _context_index(request.messages)
        tail = request.messages[index + 1 :]
        results = {m.tool_call_id: m.text() for m in tail if m.role == "tool"}
        calls = [c for m in tail for c in m.tool_calls]
        writer = next((c.id for c in calls if c.name == WRITE and not results.get(c.id, "Error").startswith("Error")), None)
        if writer is None:
            if not calls:
                self.parent_turns += 1
                if self.discussion_every and self.parent_turns % self.discussion_every == 0:
                    return {"text": f"（讨论第{self.parent_turns}次：灯塔有一百零八级台阶。）"}
            return {"tool_calls": [{"name": WRITE, "arguments": {"action": "write"}}]}
        commits = [c for c in calls if c.name == COMMIT]
        if commits:
            return {"tool_calls": [{"name": COMMIT, "arguments": {"references": {"writer": writer}, "effects": []}}]}
        found = _REVISION.search(request.messages[index].text())
        n = self.drafts
        changes: list[dict[str, Any]] = [{"op": "set", "path": "/林汐/心情", "value": f"心情{n}", "ruleId": "mood", "reason": f"第{n}稿"}]
        by = (n % 5) - 2
        if by:
            changes.append({"op": "increment", "path": "/林汐/信任", "by": by, "ruleId": "trust-shift", "reason": f"第{n}稿"})
        effect = {
            "kind": STATE_UPDATE_EFFECT,
            "namespace": "story",
            "expectedRevision": int(found.group(1)) if found else 1,
            "payload": {"changes": changes},
        }
        return {"tool_calls": [{"name": COMMIT, "arguments": {"references": {"writer": writer}, "effects": [effect]}}]}


def _context_index(messages: list[ChatMessage]) -> int:
    return max(i for i, m in enumerate(messages) if m.role == "user" and "<roleplay_request" in m.text())


__all__ = ["CountingStory"]
