"""The surface-owned entity folder: which business entities are still effective.

The spec (数据所有权与消息实体) gives rp-core "能力无关的 surface-owned entity 折叠器": a business
entity (a successful ``rp_state`` configuration, the effects of a successful ``rp_commit_turn``, …)
has a *business root* (the event that made it exist) and a *surface owner* (the assistant message
that asked for it). This module knows nothing about State or any other capability; it only decides
whether an owner is still alive on the surface. The rules, with the spec sentences they implement:

1. **Edits migrate.** "普通 replacement 只迁移 entity 所有者" and "正文编辑保留". A message
   replacement with ``range: "node"`` and visible content makes the new event the owner's
   successor; the entity stays effective.
2. **Delete and regenerate retract.** "delete/reroll replacement 才撤销被引用的 entity" and
   "删除范围内所有已提交助手 entity 随 replacement ancestry 失活". A replacement with
   ``range: "suffix"``, or any assistant replacement without visible content (the empty control
   carrier, ``events.is_empty_assistant``), retires every owner whose chain (the original owner or
   a successor through edits) appears in its ``sourceEventSeqs``.
3. **Compaction never retracts.** "a checkpoint carries the surface ownership of what it
   replaced": owners in a checkpoint's ``sourceEventSeqs`` become *kept*, a terminal status that
   no later replacement can change (the harness refuses to target a summary node anyway).
4. **Unowned entities are permanent.** "Bootstrap initialization is not message-owned and is never
   retracted this way": an entity with ``owner=None`` is always effective.

Retirement and keeping are terminal and the owner chain only grows, so whether an entity is
effective depends only on the ownership state at the current head, never on when its root
arrived: an entity whose owner was already retired when its root is logged is born retracted.
That is what makes the incremental form equal to the batch form (property-tested).

Two forms:

- :func:`effective_entities` (batch): events + candidates → the candidates still effective.
- the incremental *folder state*, plain JSON so it can live inside a projection snapshot::

      {"v": 1,
       "calls":    {callId: {"messageId", "seq", "name", "turnId"?, "stepId"?, "toolCall"?}},
       "owners":   {"<seq>": {"chain": [seq, …], "status": "live" | "retired" | "kept"}},
       "entities": [{"root": seq, "owner": seq | None, "data": …}, …]}   # root-seq order

  ``calls`` indexes unanswered tool calls by id, because in this engine every owner is the
  assistant message that made a tool call (the assistant-tool owner). ``owners`` tracks only the
  messages that can still matter: those with an unanswered call (a future entity may name them)
  and those owning an effective entity. Everything else is pruned, so the state stays as small as
  the effective entity list.

  A capability folds each event with :func:`observe` (which returns the entities it retracted),
  adds the entities it recognises with :func:`add`, and finally calls :func:`settle` so that an
  answered call leaves the index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from roleplay.harness.events import MESSAGE_TYPES, Event, is_empty_assistant
from roleplay.harness.names import ASSISTANT_MESSAGE, COMPACTION_CHECKPOINT, TOOL_CALL, TOOL_RESULT

FOLDER_VERSION = 1

LIVE, RETIRED, KEPT = "live", "retired", "kept"

EDIT, RETRACT, KEEP = "edit", "retract", "keep"


def classify(event: Event) -> tuple[str, list[int]] | None:
    """What a surface-changing event does to owners: ``(EDIT | RETRACT | KEEP, sourceEventSeqs)``,
    or None for an event that changes no ownership."""
    p = event.payload
    if event.type == COMPACTION_CHECKPOINT:
        return KEEP, list(p.get("sourceEventSeqs", []))
    if event.type not in MESSAGE_TYPES:
        return None
    op = p.get("surfaceOp")
    if not op:
        return None
    seqs = list(op.get("sourceEventSeqs", []))
    if op.get("range") == "suffix":
        return RETRACT, seqs
    if event.type == ASSISTANT_MESSAGE and is_empty_assistant(p):
        # An empty node replacement removes the node from the surface: a delete, not an edit.
        return RETRACT, seqs
    return EDIT, seqs


def _touch(owner: dict[str, Any], kind: str, seqs: set[int], at: int) -> bool:
    """Apply one classified event to one owner record; True when it became retired."""
    if owner["status"] != LIVE or not seqs.intersection(owner["chain"]):
        return False
    if kind == EDIT:
        owner["chain"].append(at)
        return False
    owner["status"] = RETIRED if kind == RETRACT else KEPT
    return kind == RETRACT


# -- batch form ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """An entity a capability recognised: its business root, its owner message event (None for an
    unowned entity) and whatever the capability wants back."""

    root_seq: int
    owner_seq: int | None
    data: Any = None


def owner_statuses(events: Iterable[Event], owner_seqs: Iterable[int]) -> dict[int, str]:
    """The final status of each owner (``live``, ``retired`` or ``kept``) after ``events``."""
    wanted = set(owner_seqs)
    owners: dict[int, dict[str, Any]] = {}
    for ev in events:
        if ev.seq in wanted:
            owners[ev.seq] = {"chain": [ev.seq], "status": LIVE}
        change = classify(ev)
        if change is None:
            continue
        kind, seqs = change
        hit = set(seqs)
        for owner in owners.values():
            _touch(owner, kind, hit, ev.seq)
    # An owner seq that never appeared in the log has no surface to live on.
    return {seq: owners[seq]["status"] if seq in owners else RETIRED for seq in wanted}


def effective_entities(events: Iterable[Event], candidates: Iterable[Candidate]) -> list[Candidate]:
    """The candidates still effective after ``events``, in business-root order."""
    candidates = list(candidates)
    statuses = owner_statuses(events, [c.owner_seq for c in candidates if c.owner_seq is not None])
    alive = [c for c in candidates if c.owner_seq is None or statuses[c.owner_seq] != RETIRED]
    return sorted(alive, key=lambda c: c.root_seq)


# -- incremental form ----------------------------------------------------------------------------


def initial() -> dict[str, Any]:
    return {"v": FOLDER_VERSION, "calls": {}, "owners": {}, "entities": []}


def observe(state: dict[str, Any], event: Event) -> list[dict[str, Any]]:
    """Fold one event into the folder (mutating it); return the entities it retracted.

    Indexes the tool calls of a new assistant message (its seq becomes a potential owner), records
    native ``tool/call`` events, and applies replacements and checkpoints to owner chains.
    """
    p = event.payload
    if event.type == ASSISTANT_MESSAGE and p.get("toolCalls") and not p.get("surfaceOp"):
        replaced = False
        for call in p["toolCalls"]:
            entry = {"messageId": p["messageId"], "seq": event.seq, "name": call["name"]}
            for key in ("turnId", "stepId"):
                if p.get(key) is not None:
                    entry[key] = p[key]
            replaced = state["calls"].get(call["id"]) is not None or replaced
            state["calls"][call["id"]] = entry
        state["owners"].setdefault(str(event.seq), {"chain": [event.seq], "status": LIVE})
        if replaced:  # a reused call id: the message that made it may have lost its last reference
            _prune(state)
    elif event.type == TOOL_CALL:
        entry = state["calls"].get(p["callId"])
        if entry is not None and "toolCall" not in entry:
            native = {"seq": event.seq, "name": p["name"]}
            for key in ("turnId", "stepId"):
                if p.get(key) is not None:
                    native[key] = p[key]
            entry["toolCall"] = native
    change = classify(event)
    if change is None:
        return []
    kind, seqs = change
    hit = set(seqs)
    retired = {key for key, owner in state["owners"].items() if _touch(owner, kind, hit, event.seq)}
    if not retired:
        return []
    gone = [e for e in state["entities"] if e["owner"] is not None and str(e["owner"]) in retired]
    state["entities"] = [e for e in state["entities"] if not (e["owner"] is not None and str(e["owner"]) in retired)]
    _prune(state)
    return gone


def owner_status(state: dict[str, Any], owner_seq: int | None) -> str:
    """``live``, ``retired`` or ``kept``; an unowned entity counts as kept (never retracted), and
    an owner the folder does not track (never indexed, or pruned) as retired."""
    if owner_seq is None:
        return KEPT
    owner = state["owners"].get(str(owner_seq))
    return RETIRED if owner is None else owner["status"]


def add(state: dict[str, Any], root_seq: int, owner_seq: int | None, data: Any) -> bool:
    """Record an entity whose root is ``root_seq`` (the event being folded, so the list stays in
    root order). False, and nothing recorded, when its owner is already retired or unknown."""
    if owner_status(state, owner_seq) == RETIRED:
        return False
    state["entities"].append({"root": root_seq, "owner": owner_seq, "data": data})
    return True


def remove(state: dict[str, Any], root_seq: int) -> dict[str, Any] | None:
    """Drop one entity (a capability superseding it, e.g. a newer bootstrap)."""
    for i, entity in enumerate(state["entities"]):
        if entity["root"] == root_seq:
            del state["entities"][i]
            _prune(state)
            return entity
    return None


def settle(state: dict[str, Any], event: Event) -> None:
    """After the capability has seen ``event``: an answered call leaves the index, because no
    entity can name a call after its result (a command it ran is logged before the result)."""
    if event.type == TOOL_RESULT:
        call = state["calls"].pop(event.payload["callId"], None)
        if call is not None:
            _release(state, call["seq"])


def is_permanent(state: dict[str, Any], entity: dict[str, Any]) -> bool:
    """True when nothing can retract ``entity`` any more (unowned, or kept by a checkpoint)."""
    return owner_status(state, entity["owner"]) == KEPT


def pop_permanent_prefix(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Remove and return the leading entities that can never be retracted, so a capability can
    fold them into a base once and forget them (the state then only grows with what is still
    retractable, i.e. what came after the latest checkpoint)."""
    out: list[dict[str, Any]] = []
    entities = state["entities"]
    while entities and is_permanent(state, entities[0]):
        out.append(entities.pop(0))
    if out:
        _prune(state)
    return out


def _release(state: dict[str, Any], seq: int) -> None:
    """``_prune`` once the call of message ``seq`` left the index: every owner kept is referred to
    (each change of the index or the entities prunes), and nothing else lost a reference, so only
    that message's owner can go. Checked without a pass over every entity of a long story: an
    entity is recorded at its root, the event being folded, for an owner already tracked (``add``),
    so its owner's message came before its root; the entities are in root order, so only those
    from the message on, the newest, can name it."""
    key = str(seq)
    if key not in state["owners"] or any(c["seq"] == seq for c in state["calls"].values()):
        return
    for entity in reversed(state["entities"]):
        if entity["root"] < seq:
            break
        if entity["owner"] == seq:
            return
    del state["owners"][key]


def _prune(state: dict[str, Any]) -> None:
    keep = {str(c["seq"]) for c in state["calls"].values()}
    keep.update(str(e["owner"]) for e in state["entities"] if e["owner"] is not None)
    for key in [k for k in state["owners"] if k not in keep]:
        del state["owners"][key]
