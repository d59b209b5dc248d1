"""The roleplay protocol of the fake OpenAI-compatible server, for requests no script answers.

Without it the fake answered every unscripted request by echoing the last user message, which
for a roleplay parent is the internal ``<roleplay_request>``: the Writer never ran, nothing was
committed, and the README's offline "real provider path" showed no real turn. Now it plays like a
cooperative model, read from the request alone (the same request gives the same answer):

- **Chat parent** (``rp_write_turn`` and ``rp_commit_turn`` offered): calls the Writer, then
  commits with ``references.writer`` and one in-bounds ``state.update`` per namespace taken from
  the state commit contract in the run context. If that commit is refused, it commits again
  without effects rather than loop. An **Agent parent** (``<roleplay_request mode="agent">``) does
  the same and writes the Writer's draft as its reply text with the commit (Agent mode takes the
  body from the parent); it runs no specialists.
- **Writer** (no tools, the Writer's rules as system prompt): a short narration of the current
  input, labelled as fake.
- **Summariser** (no tools, the summariser's instructions as system prompt): a labelled digest
  of the conversation as ``{"summary": ...}``.
- **Continue** (the Writer asked for the rest of the last reply): one more sentence of it;
  **impersonation** (its system prompt): a short first-person draft for the player.
- **JSON mode** (``response_format: json_object``): ``{"effects": [...]}`` from the contract in
  the request, the answer a tool-free turn asks for; a reply-options call (its system prompt)
  gets ``{"options": [...]}`` the way the demo model answers it (``reply_options.demo``).

Anything else gets ``None`` and the server's plain default reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from roleplay.core.player_prompts import CONTINUE_MARK, IMPERSONATE_MARK
from roleplay.core.summary_prompts import SUMMARISER_MARKER, demo_summary
from roleplay.names import COMMIT_TURN_TOOL, STATE_UPDATE_EFFECT, WRITE_TURN_TOOL
from roleplay.reply_options.demo import answer as reply_options_answer
from roleplay.reply_options.generator import SYSTEM_MARKER as REPLY_OPTIONS_MARKER

WRITE_TOOL = WRITE_TURN_TOOL
COMMIT_TOOL = COMMIT_TURN_TOOL
WRITER_MARKER = "You are the Writer of a roleplay story."
CONTRACT_MARK = '{"contract":"state_commit_contract"'
LABEL = "[fake server: not a real model]"
_INPUT = re.compile(r'<section name="Current input">\s*(.*?)\s*</section>', re.S)
_AGENT_REQUEST = '<roleplay_request mode="agent">'
_DRAFT = re.compile(r"<writer_draft[^>]*>\n(.*)\n</writer_draft>", re.S)


def roleplay_reply(body: dict[str, Any]) -> dict[str, Any] | None:
    """A reply (``FakeReply`` fields) for a roleplay request, or None for any other request."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    response_format = body.get("response_format")
    system = _text(messages[0]) if messages and messages[0].get("role") == "system" else ""
    if REPLY_OPTIONS_MARKER in system and messages:
        return {"text": reply_options_answer(_text(messages[-1]))}
    if isinstance(response_format, dict) and response_format.get("type") == "json_object":
        contract = _contract("\n".join(_text(m) for m in messages))
        return {"text": json.dumps({"effects": effects_for(contract)}, ensure_ascii=False)}
    tools = {t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
    if not tools and WRITER_MARKER in system:
        return {"text": narrate(_text(messages[-1]) if messages else "")}
    if not tools and IMPERSONATE_MARK in system:
        # Impersonate (core.impersonate): the player's next message, a draft they edit.
        return {"text": f"I wait by the door and listen. {LABEL}"}
    if not tools and SUMMARISER_MARKER in system:
        # The conversation summariser (core.summary): a labelled digest, in the story's language.
        return {"text": json.dumps({"summary": demo_summary(_text(messages[-1]), f"{LABEL} ")}, ensure_ascii=False)}
    if {WRITE_TOOL, COMMIT_TOOL} <= tools:
        return _parent(messages)
    return None


def narrate(prompt: str) -> str:
    found = _INPUT.search(prompt)
    said = " ".join((found.group(1) if found else prompt[-160:]).split())[:160]
    if said.startswith(CONTINUE_MARK):
        # Continue (core.continue_turn): only the next words of the last reply.
        return f"The lamp turns once more, and the fog draws back a step. {LABEL}"
    return f"{LABEL} “{said}” — the scene answers: the fog shifts, and the lamp above keeps turning."


def effects_for(contract: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One in-bounds increment per writable namespace, on the first rule that allows +1."""
    effects = []
    for name, ns in sorted(((contract or {}).get("namespaces") or {}).items()):
        if not isinstance(ns, dict) or ns.get("updateMode") == "disabled":
            continue
        for rule in ns.get("rules") or []:
            effect = rule.get("effect") or {}
            if effect.get("op") == "increment" and effect.get("minimum", 1) <= 1 <= effect.get("maximum", 1):
                change = {"op": "increment", "path": rule["target"], "by": 1, "ruleId": rule["id"], "reason": f"{LABEL} one small step"}
                payload = {"changes": [change]}
                effects.append(
                    {"kind": STATE_UPDATE_EFFECT, "namespace": name, "expectedRevision": ns["expectedRevision"], "payload": payload}
                )
                break
    return effects


def _parent(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    start = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user" and "<roleplay_request" in _text(messages[i])),
        None,
    )
    if start is None:
        return None
    tail = messages[start + 1 :]
    results = {m.get("tool_call_id"): _text(m) for m in tail if m.get("role") == "tool"}
    writer_id, commits = None, 0
    for m in tail:
        for call in m.get("tool_calls") or []:
            name, call_id = call.get("function", {}).get("name"), call.get("id")
            if name == WRITE_TOOL and call_id in results and not results[call_id].startswith("Error"):
                writer_id = call_id
            elif name == COMMIT_TOOL:
                commits += 1
    if writer_id is None:
        return {"tool_calls": [{"name": WRITE_TOOL, "arguments": {"action": "write"}}]}
    effects = effects_for(_contract(_text(messages[start]))) if commits == 0 else []
    reply: dict[str, Any] = {"tool_calls": [{"name": COMMIT_TOOL, "arguments": {"references": {"writer": writer_id}, "effects": effects}}]}
    if _AGENT_REQUEST in _text(messages[start]):
        draft = _DRAFT.search(results[writer_id])
        reply["text"] = draft.group(1).strip() if draft else ""
    return reply


def _contract(text: str) -> dict[str, Any] | None:
    at = text.find(CONTRACT_MARK)
    if at < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, at)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else ""
