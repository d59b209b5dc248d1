"""The offline ``demo`` model in Agent mode: it plans, writes with a brief, polishes and commits.

Like the Chat demo (``core.demo``) it follows the real protocol, derived only from the request:

- As the **Agent parent** (the last ``<roleplay_request mode="agent">``): if the catalog holds a
  built-in planning specialist (规划 / Planning, recognised by its seed name in any language), it
  runs it first with ``rp_run_subagent``; then ``rp_write_turn`` with the plan as the ``brief``;
  then the built-in polishing specialist (润色 / Polishing) on the draft; then its final text
  (the polished draft when polishing succeeded, else the draft) with one ``rp_commit_turn`` that
  carries the Chat demo's small in-bounds state step. A failed planning run stops the turn with a
  plain reply that says so (the Writer is blocked); a failed commit is repaired with one patch
  call. Items the demo does not know are left alone (it cannot read a free-text contract).
- As a **task specialist** (a ``<task_input>``): planning answers a three-point outline of the
  request, polishing returns the draft it was given with its whitespace tidied (paragraphs kept).
"""

from __future__ import annotations

import json
import re
from typing import Any

from roleplay.harness.models.types import ChatMessage, ModelRequest
from roleplay.names import COMMIT_TURN_TOOL, RUN_SUBAGENT_TOOL, WRITE_TURN_TOOL

from .demo import _TOKEN, _arguments, _commit, _contract, repair_patches
from .subagent_catalog import seed_instructions, seed_names

_AGENT_REQUEST = '<roleplay_request mode="agent">'
_CATALOG = re.compile(r'<specialist_catalog format="json">(.*?)</specialist_catalog>', re.S)
_TASK = re.compile(r'<task_input format="json">(.*?)</task_input>', re.S)
_DRAFT = re.compile(r"<writer_draft[^>]*>\n(.*)\n</writer_draft>", re.S)
_RESULT = re.compile(r"<subagent_result[^>]*>\n(.*)\n</subagent_result>", re.S)
_INPUT = re.compile(r'<section name="Current input">\s*(.*?)\s*</section>', re.S)
DEMO_PLAN = "[demo plan]"


def agent_demo_policy(request: ModelRequest) -> dict[str, Any] | None:
    task = _task(request)
    if task is not None:
        return {"text": specialist(request, task)}
    start = _request_index(request.messages)
    if start is None or not request.tools:
        return None
    return parent_step(request, start)


def specialist(request: ModelRequest, task: dict[str, Any]) -> str:
    system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
    given = task.get("input")
    value: dict[str, Any] = given if isinstance(given, dict) else {}
    draft = value.get("draft")
    if isinstance(draft, str) and draft.strip() and _role_in(system) == "polish":
        return tidy(draft)
    said = " ".join(str(value.get("request") or task.get("task") or "").split())[:120]
    return f"{DEMO_PLAN} 1. Take in “{said}”. 2. Let the scene answer it. 3. Leave a thread open for the next move."


def tidy(draft: str) -> str:
    """The demo's polish: the same text, runs of spaces and blank lines folded, paragraphs kept."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", draft.strip())]
    return "\n\n".join(p for p in paragraphs if p)


def parent_step(request: ModelRequest, start: int) -> dict[str, Any]:
    context = request.messages[start].text()
    catalog = _catalog(context)
    roles = seed_names()
    plan = next((e["name"] for e in catalog if roles.get(str(e.get("name"))) == "plan"), None)
    polish = next((e["name"] for e in catalog if roles.get(str(e.get("name"))) == "polish"), None)
    tail = request.messages[start + 1 :]
    results = {m.tool_call_id: m.text() for m in tail if m.role == "tool"}
    ok = {cid: not text.startswith("Error") for cid, text in results.items()}
    calls = [c for m in tail for c in m.tool_calls]
    runs: dict[str, list[tuple[str, bool]]] = {}
    writer: tuple[str, str] | None = None
    commits: list[str] = []
    for call in calls:
        if call.name == RUN_SUBAGENT_TOOL and call.id in results:
            name = _arguments(tail, call.id).get("name")
            runs.setdefault(str(name), []).append((results[call.id], ok[call.id]))
        elif call.name == WRITE_TURN_TOOL and ok.get(call.id):
            found = _DRAFT.search(results[call.id])
            writer = (call.id, found.group(1).strip() if found else "")
        elif call.name == COMMIT_TURN_TOOL:
            commits.append(call.id)
    said = _current_input(context)
    brief = ""
    if plan is not None:
        done = runs.get(plan, [])
        if not done:
            args = {"name": plan, "task": "Outline the next passage for this request.", "input": {"request": said, "notes": ""}}
            return {"tool_calls": [{"name": RUN_SUBAGENT_TOOL, "arguments": args}]}
        text, success = done[-1]
        if not success:
            return {"text": f"[demo] The planning specialist failed, so nothing was written this turn: {text[:300]}"}
        found = _RESULT.search(text)
        brief = (found.group(1) if found else text).strip()[:3900]
    if writer is None:
        args = {"action": "write", **({"brief": brief} if brief else {})}
        return {"tool_calls": [{"name": WRITE_TURN_TOOL, "arguments": args}]}
    final = writer[1]
    if polish is not None:
        done = runs.get(polish, [])
        if not done:
            args = {"name": polish, "task": "Polish this draft.", "input": {"draft": writer[1], "brief": brief}}
            return {"tool_calls": [{"name": RUN_SUBAGENT_TOOL, "arguments": args}]}
        text, success = done[-1]
        found = _RESULT.search(text) if success else None
        final = found.group(1).strip() if found else final
    contract = _contract(context)
    if not commits:
        return {"text": final, "tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": _commit(writer[0], contract)}]}
    last = results.get(commits[-1], "")
    token = _TOKEN.search(last)
    if len(commits) == 1 and token is not None:
        patches = repair_patches(_arguments(tail, commits[0]), last, writer[0], contract)
        return {"tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": {"retry": {"token": token.group(0), "patches": patches}}}]}
    return {"text": final, "tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": _commit(writer[0], None)}]}


def _role_in(system: str) -> str | None:
    """Which built-in specialist a child's persona is: its instructions are a seed's, verbatim."""
    return next((role for text, role in seed_instructions().items() if text in system), None)


def _task(request: ModelRequest) -> dict[str, Any] | None:
    if request.tools or not request.messages:
        return None
    found = _TASK.search(request.messages[-1].text())
    if not found:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _request_index(messages: list[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and _AGENT_REQUEST in messages[i].text():
            return i
    return None


def _catalog(context: str) -> list[dict[str, Any]]:
    found = _CATALOG.search(context)
    try:
        value = json.loads(found.group(1)) if found else []
    except ValueError:
        return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _current_input(context: str) -> str:
    found = _INPUT.search(context)
    return " ".join((found.group(1) if found else "").split())[:300]


__all__ = ["agent_demo_policy", "tidy"]
