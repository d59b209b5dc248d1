"""The roleplay policy of the offline ``demo`` model: a key-less newcomer can play a whole story.

It follows the real protocol, not a shortcut, so a demo session's log looks like a real one:

- As the **Writer** (no tools, the Writer rules in the system prompt) it writes a short narration
  that answers the current input, labelled as a demo; asked to continue the last reply
  (``core.continue_turn``), one more beat of it.
- Asked for a **tool-free turn's state changes** (one JSON-mode call, ``core.toolfree``), it answers
  ``{"effects": [...]}`` with that same small step, so a ``?tools=off`` demo story changes state.
- As the **impersonation** sub-agent (``core.impersonate``) it drafts one short move for the
  player, labelled as a demo draft.
- As the **Chat parent** it calls ``rp_write_turn``, then commits. The first commit of each turn
  is deliberately wrong (its writer reference is off), and the demo repairs it with one
  ``retry.patches`` call, so every demo turn also shows the repair path.

The effects come from the turn's ``state_commit_contract``: per writable namespace, one small
increment by the first ``increment`` rule whose target holds a number, the smallest step the
rule's delta bounds allow, upwards (the story drifts, as a story does). The contract does not
carry the target's own schema bounds, so the demo learns them as a real model would: from the
refusal. The repair patch reads every problem the failed commit lists, by pointer:

- ``/references/writer``: the deliberate mistake, replaced with the Writer call id;
- ``/effects/N/…/by``: the step went past a bound of the target, so it steps back the other way
  instead (trust at its maximum of 100 goes to 99), when the rule's delta bounds allow that;
- any other problem under ``/effects/N``: that effect is removed.

So when no change fits, the repair leaves a commit with no effects, and the story plays on
indefinitely. Should the repaired commit still fail (a target whose schema admits one value
only), the next call is a full commit with no effects; that is the fourth tool round, which
:class:`roleplay.harness.models.demo.DemoModel` allows for this reason.

Everything is derived from the request: the same request gives the same reply.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeGuard

import jsonpointer

from roleplay.canonical import sha256_hex
from roleplay.harness.models.demo import register_demo_policy
from roleplay.harness.models.types import ChatMessage, ModelRequest
from roleplay.names import STATE_UPDATE_EFFECT

from .player_prompts import CONTINUE_MARK, IMPERSONATE_MARK
from .prompts import COMMIT_TURN_TOOL, WRITE_TURN_TOOL

WRITER_MARKER = "You are the Writer of a roleplay story."
DEMO_LABEL = "[demo · offline narration]"
_TOKEN = re.compile(r"rct_[0-9A-Za-z_-]+")
_INPUT = re.compile(r'<section name="Current input">\s*(.*?)\s*</section>', re.S)
_COMMIT_BLOCK = re.compile(r"<commit_context>(.*?)</commit_context>", re.S)
# One listed problem of a failed commit: "- <pointer> [<code>] <message>" (core.commit._listing).
_PROBLEM = re.compile(r"^- (\S+) \[[^\]\s]+\] ", re.M)
_MORE = re.compile(r"^- … \d+ more$", re.M)
_EFFECT_POINTER = re.compile(r"^/effects/(\d+)(/.*)?$")
DEMO_CONTINUED = "[demo · continued]"
DEMO_DRAFT = "[demo draft]"
MOVES = (
    "I step closer and ask what happened here.",
    "I look around slowly, taking in every detail.",
    "I nod and wait for them to go on.",
    "I pick up the lamp and hold it higher.",
)
BEATS = (
    "The fog thickens for a moment, then parts just enough to show the way ahead.",
    "Somewhere below, the sea answers with a long, slow breath against the rocks.",
    "A lamp flickers, steadies, and throws a warmer light across the room.",
    "For a while nobody speaks; the silence itself seems to be listening.",
    "Footsteps echo and fade, and the night settles back into its rhythm.",
)


def roleplay_demo_policy(request: ModelRequest) -> dict[str, Any] | None:
    system = request.messages[0].text() if request.messages and request.messages[0].role == "system" else ""
    if WRITER_MARKER in system and not request.tools:
        return {"text": narrate(request)}
    if IMPERSONATE_MARK in system and not request.tools:
        return {"text": impersonate(request)}
    changes = state_changes(request)
    if changes is not None:
        return {"text": changes}
    offered = {t.name for t in request.tools}
    if WRITE_TURN_TOOL not in offered or COMMIT_TURN_TOOL not in offered:
        return None
    start = _run_context_index(request.messages)
    if start is None:
        return None
    tail = request.messages[start + 1 :]
    results = {m.tool_call_id: m for m in tail if m.role == "tool"}
    writer_id: str | None = None
    commits: list[tuple[str, ChatMessage | None]] = []
    for m in tail:
        for call in m.tool_calls:
            result = results.get(call.id)
            if call.name == WRITE_TURN_TOOL and result is not None and not result.text().startswith("Error"):
                writer_id = call.id
            elif call.name == COMMIT_TURN_TOOL:
                commits.append((call.id, result))
    if writer_id is None:
        return {"tool_calls": [{"name": WRITE_TURN_TOOL, "arguments": {"action": "write"}}]}
    contract = _contract(request.messages[start].text())
    if not commits:
        # The deliberate mistake: a writer reference that is not this run's Writer call.
        return {"tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": _commit(f"{writer_id}-x", contract)}]}
    last = commits[-1][1]
    token = _TOKEN.search(last.text()) if last is not None else None
    if len(commits) == 1 and token is not None:
        patches = repair_patches(_arguments(tail, commits[0][0]), last.text(), writer_id, contract)  # type: ignore[union-attr]
        return {"tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": {"retry": {"token": token.group(0), "patches": patches}}}]}
    # Anything else went wrong: commit the reply without effects rather than retry forever.
    return {"tool_calls": [{"name": COMMIT_TURN_TOOL, "arguments": _commit(writer_id, None)}]}


def narrate(request: ModelRequest) -> str:
    prompt = request.messages[-1].text() if request.messages else ""
    found = _INPUT.search(prompt)
    said = " ".join((found.group(1) if found else prompt[-200:]).split())[:160]
    beat = BEATS[int(sha256_hex(prompt)[:8], 16) % len(BEATS)]
    if said.startswith(CONTINUE_MARK):
        # Continue: only the next words of the reply before, still labelled as the demo's.
        return f"{beat} {DEMO_CONTINUED}"
    return f"{DEMO_LABEL} “{said}” — the story takes that in. {beat}"


def state_changes(request: ModelRequest) -> str | None:
    """The JSON-mode call of a tool-free turn (``core.toolfree``): ``{"effects": [...]}`` from the
    commit material it is given, the same small in-bounds step a demo commit makes; None for any
    other request."""
    response_format = request.extra.get("response_format")
    if request.tools or not isinstance(response_format, dict) or response_format.get("type") != "json_object":
        return None
    text = request.messages[-1].text() if request.messages else ""
    if "<commit_context>" not in text:
        return None
    return json.dumps({"effects": _effects(_contract(text))}, ensure_ascii=False)


def impersonate(request: ModelRequest) -> str:
    """The player's next message as the demo drafts it: one of a few moves, picked by the prompt."""
    prompt = request.messages[-1].text() if request.messages else ""
    move = MOVES[int(sha256_hex(prompt)[:8], 16) % len(MOVES)]
    return f"{move} {DEMO_DRAFT}"


def _run_context_index(messages: list[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and "<roleplay_request" in messages[i].text():
            return i
    return None


def _contract(run_context: str) -> dict[str, Any] | None:
    block = _COMMIT_BLOCK.search(run_context)
    if not block:
        return None
    text = block.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) and value.get("contract") == "state_commit_contract" else None


def _commit(writer_id: str, contract: dict[str, Any] | None) -> dict[str, Any]:
    return {"references": {"writer": writer_id}, "summary": "[demo] the story moved on", "effects": _effects(contract)}


def _effects(contract: dict[str, Any] | None) -> list[dict[str, Any]]:
    effects: list[dict[str, Any]] = []
    for name, ns in sorted(((contract or {}).get("namespaces") or {}).items()):
        if ns.get("updateMode") == "disabled":
            continue
        for rule in ns.get("rules") or []:
            effect = rule.get("effect") or {}
            if effect.get("op") != "increment" or not _is_number(_current(ns, rule["target"])):
                continue
            up, down = _steps(effect)
            by = up if up is not None else down
            if by is None:
                continue
            change = {
                "op": "increment",
                "path": rule["target"],
                "by": by,
                "ruleId": rule["id"],
                "reason": "[demo] a small step in the story",
            }
            effects.append(
                {
                    "kind": STATE_UPDATE_EFFECT,
                    "namespace": name,
                    "expectedRevision": ns["expectedRevision"],
                    "payload": {"changes": [change]},
                }
            )
            break
    return effects


def repair_patches(draft: dict[str, Any], error_text: str, writer_id: str, contract: dict[str, Any] | None) -> list[dict[str, Any]]:
    """RFC 6902 patches that repair every problem the failed ``draft``'s error lists (see the
    module docstring). Replacements come first and removals last, highest index first, so each
    pointer still names what the error named when its patch applies."""
    patches: list[dict[str, Any]] = [{"op": "replace", "path": "/references/writer", "value": writer_id}]
    drafted = draft.get("effects")
    effects: list[Any] = drafted if isinstance(drafted, list) else []
    refused: dict[int, set[str]] = {}
    for pointer in _PROBLEM.findall(error_text):
        found = _EFFECT_POINTER.match(pointer)
        if found and int(found.group(1)) < len(effects):
            refused.setdefault(int(found.group(1)), set()).add(found.group(2))
    if _MORE.search(error_text):
        refused = {i: {"(unlisted)"} for i in range(len(effects))}  # not every problem was listed: drop them all
    removed = []
    for i in sorted(refused):
        back = _step_back(effects[i], contract) if refused[i] == {"/payload/changes/0/by"} else None
        if back is None:
            removed.append(i)
        else:
            patches.append({"op": "replace", "path": f"/effects/{i}/payload/changes/0/by", "value": back})
    patches += [{"op": "remove", "path": f"/effects/{i}"} for i in sorted(removed, reverse=True)]
    return patches


def _step_back(effect: Any, contract: dict[str, Any] | None) -> int | float | None:
    """The opposite step for a refused increment, if its rule allows one."""
    try:
        change = effect["payload"]["changes"][0]
        ns = (contract or {})["namespaces"][effect["namespace"]]
        rule = next(r for r in ns.get("rules") or [] if r.get("id") == change.get("ruleId"))
    except (KeyError, IndexError, TypeError, StopIteration):
        return None
    up, down = _steps(rule.get("effect") or {})
    by = change.get("by")
    if not _is_number(by):
        return None
    return down if by > 0 else up if by < 0 else None


def _steps(effect: dict[str, Any]) -> tuple[int | float | None, int | float | None]:
    """The smallest upward and downward deltas an increment rule allows (±1 clamped into its
    ``minimum``/``maximum``), or None for a direction it forbids."""
    low, high = effect.get("minimum"), effect.get("maximum")

    def clamp(value: int | float) -> int | float:
        if _is_number(low):
            value = max(value, low)
        if _is_number(high):
            value = min(value, high)
        return value

    up, down = clamp(1), clamp(-1)
    return (up if up > 0 else None), (down if down < 0 else None)


def _current(ns: dict[str, Any], target: str) -> Any:
    try:
        return jsonpointer.resolve_pointer(ns.get("currentValue"), target, None)
    except jsonpointer.JsonPointerException:
        return None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _arguments(tail: list[ChatMessage], call_id: str) -> dict[str, Any]:
    for m in tail:
        for call in m.tool_calls:
            if call.id == call_id:
                try:
                    value = json.loads(call.arguments) if isinstance(call.arguments, str) else call.arguments
                except ValueError:
                    return {}
                return value if isinstance(value, dict) else {}
    return {}


def register() -> None:
    """Consulted before the generic demo fallback; idempotent (a name registers once)."""
    register_demo_policy("roleplay", roleplay_demo_policy, first=True)
