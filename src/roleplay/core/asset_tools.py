"""Model-facing shared-asset tools: read-only ``rp_asset_read`` and the Agent-only ``rp_asset``.

A thin adapter over :class:`~roleplay.assets.store.AssetStore` and the ``rp/session`` profile
(spec row ``rp-asset-tools``): it builds no storage of its own. :func:`asset_tools` returns both as
harness :class:`~roleplay.harness.tools.Tool` objects and wires the ``rp-session-apply`` command
and the ``rp/session`` projection into the service (idempotent).

**Mode.** The run lends its mode in ``RpRunDeps.mode`` (:mod:`roleplay.core.run_context`); a call
without run dependencies and every sub-agent (depth ≥ 1) count as Chat, the narrower view. The execution layer,
not the prompt, is the permission boundary ("Chat 的 ``rp_asset_read`` 在执行层以该 profile 为权限
边界"):

* ``rp_asset_read`` in Chat sees only the session's current bindings: ``list`` lists the bindings
  (in profile order, each with its ``binding`` pointer), ``get`` refuses any other id with
  ``asset.not_bound``. In Agent mode it browses the whole shared library; every item carries
  ``bound: true|false`` from the profile, so library visibility is never mistaken for a binding.
  Agent mode may ask for ``scope: "bound"`` to see the Chat view (e.g. to repair bindings).
* A bound id whose asset is gone (or now names another kind) reads as unavailable: an entry with
  ``status: "unavailable"`` and ``error.code = "asset.unavailable"`` in ``list``, an
  ``asset.unavailable`` error result for ``get``. The binding is never dropped or guessed at.
* ``rp_asset`` runs only in Agent mode at depth 0 and refuses otherwise with ``asset.agent_only``.
  :data:`AGENT_ONLY_TOOLS` names it: a Chat run's visible set must leave it out (the spec's Chat
  mask is ``rp_write_turn``, ``rp_commit_turn``, ``rp_asset_read``, ``rp_state_read``). The handler
  check is what makes that hold *by construction* even when an allow-list is wrong: sub-agents get
  depth 1 and no run dependencies, so they can never write or bind.

**Large assets.** ``get`` answers with the whole ``data`` only when its compact JSON fits
``maxChars``. Anything larger comes back as an outline (``truncated: true``): one level of
children, each with its JSON Pointer, type, size and — for lorebook-like entries — a label and
the first keys, so the model can ask again with ``fields: ["/book/entries/7"]``. The bound keeps
results below the registry's own trimming, which would otherwise cut JSON in half.

**Writes.** ``create`` and ``update`` go through the store's one validated commit path
(``update`` is a CAS on ``expectedRevision``: a stale one is ``asset.revision_conflict`` and
writes nothing). ``bind`` is a merge patch of ``resources`` run through
:func:`~roleplay.core.profile.apply_profile`, i.e. a native ``rp-session-apply`` command whose
``expectedRevision`` is the caller's ``expectedProfileRevision`` (the ``profileRevision`` every
read reports): single slots take an id or ``null`` (unbind), ordered lists replace the whole list.
Creating an asset never binds it: the two mutation boundaries stay separate, so a failed bind
never looks like a failed create.

**Context refresh.** A successful write or bind returns ``meta = {kind: "rp-asset/write",
refreshContext: true, target, assetId, revision, …}``. The tool does not touch the run's context:
the run (``core/run.py``) sees ``refreshContext`` and rebuilds the Session Slot context, discards
Writer artifacts built before the change and returns the refreshed Writer context to the Agent
(spec: "Agent 完成 ``rp_asset`` … 写入后，运行时按同一 Session Slot 自动刷新").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roleplay.core.run_context import run_deps
from roleplay.core.profile import (
    MAX_LOREBOOKS,
    MAX_WRITING_STYLES,
    SessionProfile,
    apply_profile,
    profile_of,
    register_profile_commands,
    session_projection,
)
from roleplay.core.sources import StoreAssetReader
from roleplay.errors import ConflictError, Problem, RpError, ValidationError
from roleplay.harness.sessions import SessionService
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import ASSET_READ_KIND, ASSET_READ_TOOL, ASSET_WRITE_KIND, ASSET_WRITE_TOOL
from roleplay.state.pointers import (
    MISSING,
    PointerError,
    format_pointer,
    lookup,
    parse_pointer,
)

from roleplay.assets.kinds import KINDS, validate_asset_data
from roleplay.assets.store import AssetRecord, AssetStore, not_found, wrong_kind

READ_TOOL = ASSET_READ_TOOL
WRITE_TOOL = ASSET_WRITE_TOOL
AGENT_ONLY_TOOLS = frozenset({WRITE_TOOL})
READ_META = ASSET_READ_KIND
WRITE_META = ASSET_WRITE_KIND

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
DEFAULT_MAX_CHARS = 16_000
MIN_MAX_CHARS = 1_000
MAX_MAX_CHARS = 40_000  # below the registry's 50 000-character trim, so JSON is never cut mid-way
MAX_FIELDS = 20
OUTLINE_CHILDREN = 100
LABEL_CHARS = 80
BIND_ATTEMPTS = 5

ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 128}
KIND_SCHEMA = {"type": "string", "enum": list(KINDS)}
SLOT_SCHEMA = {"type": ["string", "null"], "minLength": 1, "maxLength": 128}

READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["list", "get"]},
        "kind": {**KIND_SCHEMA, "description": "asset kind; required to list the library"},
        "id": {**ID_SCHEMA, "description": "get: the asset id"},
        "scope": {
            "type": "string",
            "enum": ["bound", "library"],
            "description": "bound: only this session's current bindings (always in Chat mode); library: the whole shared library (Agent mode default)",
        },
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": f"list page size (default {DEFAULT_LIMIT})"},
        "offset": {"type": "integer", "minimum": 0},
        "fields": {
            "type": "array",
            "items": {"type": "string", "maxLength": 500},
            "minItems": 1,
            "maxItems": MAX_FIELDS,
            "description": "get: JSON Pointers into the asset data, e.g. /description or /book/entries/3 (default: all data)",
        },
        "maxChars": {
            "type": "integer",
            "minimum": MIN_MAX_CHARS,
            "maximum": MAX_MAX_CHARS,
            "description": f"get: larger values come back as an outline of JSON Pointers (default {DEFAULT_MAX_CHARS})",
        },
    },
    "required": ["action"],
    "additionalProperties": False,
}

WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["create", "update", "bind"]},
        "kind": {**KIND_SCHEMA, "description": "create: the asset kind"},
        "id": {**ID_SCHEMA, "description": "update: the asset id"},
        "data": {"type": "object", "description": "create/update: the complete asset data, validated by its kind"},
        "expectedRevision": {"type": "integer", "minimum": 1, "description": "update: the asset revision you read"},
        "bind": {
            "type": "object",
            "description": "bind: only the bindings to change. card/persona/preset: an id, or null to unbind; "
            "lorebooks/writingStyles: the complete ordered list ([] unbinds all)",
            "properties": {
                "card": SLOT_SCHEMA,
                "persona": SLOT_SCHEMA,
                "preset": SLOT_SCHEMA,
                "lorebooks": {"type": "array", "items": ID_SCHEMA, "maxItems": MAX_LOREBOOKS},
                "writingStyles": {"type": "array", "items": ID_SCHEMA, "maxItems": MAX_WRITING_STYLES},
            },
            "minProperties": 1,
            "additionalProperties": False,
        },
        "expectedProfileRevision": {"type": "integer", "minimum": 0, "description": "bind: the profileRevision rp_asset_read reported"},
    },
    "required": ["action"],
    "additionalProperties": False,
}

# (required, optional) arguments besides ``action``; anything else is refused rather than ignored,
# so a model that mixes up actions learns it instead of silently losing an argument.
READ_ARGS = {
    "list": ((), ("kind", "scope", "limit", "offset")),
    "get": (("id",), ("kind", "scope", "fields", "maxChars")),
}
WRITE_ARGS = {
    "create": (("kind", "data"), ()),
    "update": (("id", "data", "expectedRevision"), ()),
    "bind": (("bind", "expectedProfileRevision"), ()),
}

READ_GUIDANCE = (
    "rp_asset_read reads shared assets (card, lorebook, persona, preset, writing-style). In Chat mode it "
    "sees only this session's current bindings. In Agent mode it browses the whole library; an asset "
    "being visible there does not mean it is bound — check `bound`. Large assets come back as an "
    "outline of JSON Pointers: ask again with `fields` for the parts you need."
)
WRITE_GUIDANCE = (
    "rp_asset creates, updates or binds shared assets. Agent mode only, on an explicit user request. "
    "Read first: update needs the asset's `revision` as expectedRevision, bind needs `profileRevision` "
    "as expectedProfileRevision. Creating an asset does not bind it. After a successful change the "
    "runtime refreshes the Writer context."
)


@dataclass(frozen=True)
class Binding:
    pointer: str  # where the profile holds it, e.g. /resources/lorebooks/1
    kind: str
    id: str


def bindings_of(profile: SessionProfile) -> list[Binding]:
    """Every bound id in profile order (card, lorebooks, persona, preset, writing styles)."""
    res = profile.resources
    out = [Binding("/resources/card", "card", res.card)] if res.card else []
    out += [Binding(f"/resources/lorebooks/{i}", "lorebook", b) for i, b in enumerate(res.lorebooks)]
    out += [Binding(f"/resources/{k}", k, v) for k, v in (("persona", res.persona), ("preset", res.preset)) if v]
    out += [Binding(f"/resources/writingStyles/{i}", "writing-style", s) for i, s in enumerate(res.writing_styles)]
    return out


def manifest(profile: SessionProfile) -> dict[str, Any]:
    """The binding list in the shape the spec gives the parent (null / [] when unbound)."""
    res = profile.resources
    return {
        "characterId": res.card,
        "lorebookIds": list(res.lorebooks),
        "personaId": res.persona,
        "presetId": res.preset,
        "writingStyleIds": list(res.writing_styles),
    }


def tool_mode(ctx: ToolContext) -> str:
    """``"agent"`` only for a top-level run the runtime marked as Agent mode."""
    deps = run_deps(ctx)
    return "agent" if ctx.depth == 0 and deps is not None and deps.mode == "agent" else "chat"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _check_args(args: Mapping[str, Any], table: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> str:
    action = args["action"]
    required, optional = table[action]
    problems = [Problem("asset.argument_missing", f"{action} needs {k!r}", f"/{k}") for k in required if k not in args]
    problems += [
        Problem("asset.argument_unexpected", f"{action} does not take {k!r}", f"/{k}")
        for k in sorted(args)
        if k != "action" and k not in required and k not in optional
    ]
    if problems:
        raise ValidationError("asset.invalid_arguments", problems[0].message, pointer=problems[0].pointer, problems=problems)
    return action


def _item(record: AssetRecord, binding: Binding | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": record.id,
        "kind": record.kind,
        "name": record.name,
        "revision": record.revision,
        "updatedAt": record.updated_at,
        "status": "available",
        "bound": binding is not None,
    }
    if binding is not None:
        out["binding"] = binding.pointer
    return out


def _unavailable(binding: Binding, record: AssetRecord | None) -> dict[str, Any]:
    reason = "missing" if record is None else "kind-mismatch"
    message = f"bound {binding.kind} {binding.id} is unavailable ({reason}); it is read as unbound until the binding is repaired"
    return {
        "id": binding.id,
        "kind": binding.kind,
        "status": "unavailable",
        "bound": True,
        "binding": binding.pointer,
        "error": {"code": "asset.unavailable", "message": message, "reason": reason},
    }


# -- size bounding ----------------------------------------------------------------------------------


def _type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool) or value is None:
        return "boolean" if isinstance(value, bool) else "null"
    return "string" if isinstance(value, str) else "number"


def _summary(pointer: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"pointer": pointer, "type": _type(value), "chars": len(_dump(value))}
    if isinstance(value, (dict, list)):
        out["length"] = len(value)
    if isinstance(value, str):
        out["head"] = value[:LABEL_CHARS]
    elif isinstance(value, dict):
        # Lorebook entries (and most named things) say what they are in one of these keys; the
        # label and first trigger keys let the model pick an entry without reading them all.
        label = next((value[k] for k in ("name", "title", "comment") if isinstance(value.get(k), str) and value[k].strip()), None)
        if label is not None:
            out["label"] = label[:LABEL_CHARS]
        keys = value.get("key", value.get("keys"))
        if isinstance(keys, list):
            out["keys"] = [k[:LABEL_CHARS] for k in keys[:5] if isinstance(k, str)]
    return out


def _outline(pointer: str, value: Any, room: int) -> dict[str, Any]:
    """What replaces a value too large for the answer: one level of children (or a string head)."""
    out: dict[str, Any] = {"truncated": True, "type": _type(value), "chars": len(_dump(value))}
    if isinstance(value, str):
        out["head"] = value[: max(room, LABEL_CHARS)]
        return out
    if isinstance(value, dict):
        children = [(format_pointer([k]), v) for k, v in value.items()]
    elif isinstance(value, list):
        children = [(f"/{i}", v) for i, v in enumerate(value)]
    else:  # a number cannot be too large in practice; keep the answer total anyway
        return {**out, "value": value}
    out["length"] = len(children)
    out["children"] = [_summary(pointer + child, v) for child, v in children[:OUTLINE_CHILDREN]]
    if len(children) > OUTLINE_CHILDREN:
        out["moreChildren"] = len(children) - OUTLINE_CHILDREN
    out["hint"] = "ask again with fields set to the child pointers you need"
    return out


def _select(data: dict[str, Any], fields: list[str] | None, max_chars: int) -> tuple[dict[str, Any], bool]:
    """``{pointer: value-or-outline}`` in the requested order; fields are kept whole while they fit
    and outlined once they do not (so one huge field does not hide the small ones before it)."""
    picked: list[tuple[str, Any]] = []
    for i, pointer in enumerate(fields if fields is not None else [""]):
        try:
            value = lookup(data, parse_pointer(pointer))
        except PointerError as exc:
            raise ValidationError("asset.read.pointer_invalid", str(exc), pointer=f"/fields/{i}") from None
        if value is MISSING:
            raise ValidationError("asset.read.field_missing", f"the asset data has nothing at {pointer!r}", pointer=f"/fields/{i}")
        picked.append((pointer, value))
    out: dict[str, Any] = {}
    used, truncated = 0, False
    for pointer, value in picked:
        size = len(_dump(value))
        if used + size <= max_chars:
            out[pointer] = value
            used += size
        else:
            out[pointer] = _outline(pointer, value, max_chars - used)
            truncated = True
    return out, truncated


# -- rp_asset_read ----------------------------------------------------------------------------------


def read_tool(service: SessionService, assets: AssetStore) -> Tool:
    async def handle(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        action = _check_args(args, READ_ARGS)
        mode = tool_mode(ctx)
        scope = args.get("scope", "library" if mode == "agent" else "bound")
        if scope == "library" and mode != "agent":
            raise RpError(
                "asset.library_agent_only",
                "Chat mode reads only the assets bound to this session; switch to Agent mode to browse the shared library",
                pointer="/scope",
            )
        loaded = await service.projection(ctx.session_id, session_projection)
        profile = profile_of(loaded.state)
        bound = bindings_of(profile)
        head = {"action": action, "mode": mode, "scope": scope, "profileRevision": loaded.state["revision"]}
        if action == "list":
            body = await (_list_bound(assets, bound, args) if scope == "bound" else _list_library(assets, bound, args))
        else:
            body = await _get(assets, bound, args, scope)
        return ToolOutput(_dump({**head, **body}), meta={"kind": READ_META, **head})

    return Tool(
        READ_TOOL,
        "Read shared assets (card, lorebook, persona, preset, writing-style): list or get. Chat mode sees only "
        "this session's bindings; Agent mode browses the library. Read-only.",
        READ_PARAMETERS,
        handle,
        guidance=READ_GUIDANCE,
    )


def _page(args: Mapping[str, Any]) -> tuple[int, int]:
    return args.get("limit", DEFAULT_LIMIT), args.get("offset", 0)


async def _list_bound(assets: AssetStore, bound: list[Binding], args: Mapping[str, Any]) -> dict[str, Any]:
    limit, offset = _page(args)
    chosen = [b for b in bound if args.get("kind") in (None, b.kind)]
    page = chosen[offset : offset + limit]

    async def body(tx: Any) -> list[AssetRecord | None]:
        return [await tx.get(b.id) for b in page]  # one transaction: one consistent moment

    records = await assets.read(body)
    items = [_item(r, b) if r is not None and r.kind == b.kind else _unavailable(b, r) for b, r in zip(page, records)]
    return {"total": len(chosen), "offset": offset, "limit": limit, "items": items}


async def _list_library(assets: AssetStore, bound: list[Binding], args: Mapping[str, Any]) -> dict[str, Any]:
    if "kind" not in args:
        raise ValidationError("asset.read.kind_required", "listing the library needs a kind", pointer="/kind")
    limit, offset = _page(args)
    page = await assets.list(args["kind"], limit=limit, offset=offset)
    by_key = {(b.kind, b.id): b for b in bound}
    items = [_item(r, by_key.get((r.kind, r.id))) for r in page.items]
    return {"kind": args["kind"], "total": page.total, "offset": offset, "limit": limit, "items": items}


async def _get(assets: AssetStore, bound: list[Binding], args: Mapping[str, Any], scope: str) -> dict[str, Any]:
    asset_id, kind = args["id"], args.get("kind")
    binding = next((b for b in bound if b.id == asset_id and kind in (None, b.kind)), None)
    if binding is None and scope == "bound":
        raise RpError(
            "asset.not_bound",
            f"asset {asset_id} is not bound to this session" + (f" as a {kind}" if kind else "") + "; only bound assets can be read here",
            pointer="/id",
            details={"assetId": asset_id},
        )
    record = await assets.read(lambda tx: tx.get(asset_id))
    if binding is not None and (record is None or record.kind != binding.kind):
        entry = _unavailable(binding, record)
        raise RpError(
            "asset.unavailable",
            entry["error"]["message"],
            pointer="/id",
            details={"assetId": asset_id, "kind": binding.kind, "binding": binding.pointer, "reason": entry["error"]["reason"]},
        )
    if record is None:
        raise not_found(asset_id)
    if kind is not None and record.kind != kind:
        raise wrong_kind(record, kind)
    selected, truncated = _select(record.data, args.get("fields"), args.get("maxChars", DEFAULT_MAX_CHARS))
    asset = _item(record, binding)
    if "fields" in args:
        asset["fields"] = selected
    else:
        asset["data"] = selected[""]
    return {"asset": asset, "truncated": truncated}


# -- rp_asset -----------------------------------------------------------------------------------------


def _in_data(exc: ValidationError) -> ValidationError:
    """A kind validator points into the data; the model sent it under ``/data``."""
    problems = [Problem(p.code, p.message, "/data" + (p.pointer or ""), p.details) for p in exc.problems]
    return ValidationError(exc.code, exc.message, pointer="/data" + (exc.pointer or ""), details=exc.details, problems=problems)


def _bind_pointer(pointer: Any) -> Any:
    """Map ``rp-session-apply`` pointers back to this tool's arguments."""
    if not isinstance(pointer, str):
        return pointer
    if pointer == "/expectedRevision":
        return "/expectedProfileRevision"
    if pointer.startswith("/patch/resources"):
        return "/bind" + pointer[len("/patch/resources") :]
    return pointer


def _bind_error(error: Mapping[str, Any]) -> RpError:
    details = dict(error.get("details") or {})
    if isinstance(details.get("problems"), list):
        details["problems"] = [{**p, "pointer": _bind_pointer(p.get("pointer"))} if isinstance(p, dict) else p for p in details["problems"]]
    return RpError(
        error.get("code", "profile.rejected"),
        error.get("message", "the binding was rejected"),
        pointer=_bind_pointer(error.get("pointer")),
        details=details,
    )


def write_tool(service: SessionService, assets: AssetStore) -> Tool:
    async def create(args: dict[str, Any]) -> AssetRecord:
        try:
            validate_asset_data(args["kind"], args["data"])  # first, so its pointers can be moved under /data
        except ValidationError as exc:
            raise _in_data(exc) from None
        return await assets.create(args["kind"], args["data"])

    async def update(args: dict[str, Any]) -> AssetRecord:
        current = await assets.get(args["id"])
        try:
            validate_asset_data(current.kind, args["data"])
        except ValidationError as exc:
            raise _in_data(exc) from None
        return await assets.update(args["id"], args["data"], expected_revision=args["expectedRevision"])

    async def bind(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        # A merge patch: null unbinds a slot, a list replaces the whole ordered list.
        apply_args = {"patch": {"resources": dict(args["bind"])}, "expectedRevision": args["expectedProfileRevision"]}
        source = {"tool": WRITE_TOOL, "callId": ctx.call_id, **{k: v for k, v in (("turnId", ctx.turn_id), ("stepId", ctx.step_id)) if v}}
        for _ in range(BIND_ATTEMPTS):
            try:
                # A fresh reader per attempt: existence is checked against the assets of that moment.
                applied = await apply_profile(service, ctx.session_id, apply_args, StoreAssetReader(assets), source=source)
            except ConflictError as exc:
                if exc.code == "event.seq_conflict":
                    continue  # an unrelated append moved the head; the profile CAS is re-checked next time
                raise
            if not applied.outcome.ok:
                raise _bind_error(applied.outcome.error or {})
            if not applied.applied:
                raise ConflictError(
                    "profile.stale_apply",
                    "another profile change took effect first; re-read and retry",
                    pointer="/expectedProfileRevision",
                    details={"commandId": applied.outcome.command_id},
                )
            return {
                "profileRevision": applied.state["revision"],
                "bindings": manifest(profile_of(applied.state)),
                "commandId": applied.outcome.command_id,
            }
        raise RpError("asset.bind_contended", f"the session kept changing; gave up after {BIND_ATTEMPTS} attempts")

    async def handle(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        mode = tool_mode(ctx)
        if mode != "agent":
            raise RpError(
                "asset.agent_only",
                "rp_asset creates, updates and binds shared assets only in Agent mode; ask the user to switch to Agent mode",
                details={"mode": mode, "depth": ctx.depth},
            )
        action = _check_args(args, WRITE_ARGS)
        if action == "bind":
            done = await bind(args, ctx)
            meta = {
                "kind": WRITE_META,
                "action": action,
                "refreshContext": True,
                "target": "profile",
                "assetId": None,
                "revision": done["profileRevision"],
                **done,
            }
            return ToolOutput(_dump({"ok": True, "action": action, **done}), meta=meta)
        record = await (create(args) if action == "create" else update(args))
        asset = {"id": record.id, "kind": record.kind, "name": record.name, "revision": record.revision}
        meta = {
            "kind": WRITE_META,
            "action": action,
            "refreshContext": True,
            "target": "asset",
            "assetId": record.id,
            "revision": record.revision,
        }
        return ToolOutput(_dump({"ok": True, "action": action, "asset": asset}), meta=meta)

    return Tool(
        WRITE_TOOL,
        "Create or update a shared asset, or change this session's asset bindings. Agent mode only, on an explicit user request.",
        WRITE_PARAMETERS,
        handle,
        guidance=WRITE_GUIDANCE,
    )


def asset_tools(service: SessionService, assets: AssetStore) -> list[Tool]:
    """``[rp_asset_read, rp_asset]`` bound to ``service`` and ``assets``, with ``rp-session-apply``
    and the ``rp/session`` projection registered on the service (both idempotent)."""
    register_profile_commands(service.commands)
    if session_projection.name not in service.projections.names():
        service.projections.register(session_projection)
    return [read_tool(service, assets), write_tool(service, assets)]


__all__ = [
    "AGENT_ONLY_TOOLS",
    "READ_META",
    "READ_TOOL",
    "WRITE_META",
    "WRITE_TOOL",
    "Binding",
    "asset_tools",
    "bindings_of",
    "manifest",
    "read_tool",
    "tool_mode",
    "write_tool",
]
