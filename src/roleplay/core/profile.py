"""The session profile ``rp/session``: resource bindings, mode, scene, Writer route and layout.

The spec (事务与事件 item 1): every change — binding assets, switching ``executionMode``, a
session Writer route, the prompt layout — is a native ``command/run`` of ``rp-session-apply``
whose *result* is the full profile snapshot, and only the paired ``command/done {kind:
"success"}`` makes it take effect. This module has the three pieces:

* :class:`SessionProfile`, the pydantic model (camelCase JSON, every field bounded);
* :func:`session_apply_handler`, the sync, pure command handler (``(args, ctx) -> result``);
* :data:`session_projection` (``rp/session``), the fold that keeps the effective profile and its
  ``revision`` (the number of applies that took effect).

**Where ``executionMode`` lives.** The spec names it ``rp/session.runtime.executionMode`` (Chat 与
Agent 执行模式), so it is ``runtime.executionMode`` in the JSON; :attr:`SessionProfile.execution_mode`
is the accessor code should use.

**Validation scope.** "Session 的局部绑定命令只解析和校验请求中明确修改的资料字段，不能因其他引用当
前失效而清理它们": a command checks the existence of an asset only when it *binds that id in
that place anew* (compared with the current profile). A re-sent snapshot that still carries a
dangling card id is accepted unchanged; nothing is ever unbound or replaced automatically. Whether
an asset exists is an async question and handlers are sync, so the caller answers it up front:
``ctx.state["assetExists"]`` is a callable ``(kind, asset_id) -> bool`` or a container of
``(kind, asset_id)`` pairs (:func:`apply_profile` and :func:`setup_command` compute it from an
:class:`~roleplay.core.types.AssetReader`). The harness gives setup commands no state at all, so a
handler without ``assetExists`` skips existence checks; session creation goes through
:func:`setup_command`, which runs the same checks before anything is written.

**CAS.** ``expectedRevision`` is compared with the revision the handler is shown
(``ctx.state["rpSession"]``). Because a second command may run between another command's run and
done, the handler also records ``baseRevision`` in its result and the fold applies a result only
when its base is still the current revision; a stale snapshot is kept out and leaves a diagnostic.
A full snapshot can therefore never silently overwrite a change it did not see.

**Dangling references at read time.** :func:`resolve_bindings` reads every bound id through an
``AssetReader``. The binding list keeps the ids as the profile has them ("绑定清单与 ID 仍保留给父
Agent 判断和修复") and each unreadable one gets an ``asset-unavailable`` diagnostic; the context
sources, macros and lore activation treat that asset as unbound.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import Field, StrictBool, StrictInt, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from roleplay.assets.presets.model import FIELD_ID_PATTERN
from roleplay.assets.validation import (
    LONG_TEXT_MAX,
    AssetModel,
    NameRule,
    TextRule,
    problems_from_pydantic,
)
from roleplay.errors import (
    ConflictError,
    Problem,
    RpError,
    ValidationError,
    pointer_from_parts,
)
from roleplay.harness.commands import CommandContext, CommandRegistry, CommandSpec
from roleplay.harness.events import Event
from roleplay.harness.leases import session_lease
from roleplay.harness.projections import Projection
from roleplay.names import SESSION_APPLY_COMMAND, SESSION_APPLY_STATE, SESSION_PROJECTION
from roleplay.harness.names import COMMAND_DONE, COMMAND_RUN

from .types import (
    CARD,
    CARD_DEPTH_PROMPT,
    CONVERSATION,
    CURRENT_INPUT,
    CUSTOM_PREFIX,
    LORE_CHARACTERS,
    LORE_RULES,
    LORE_WORLD,
    NEVER_IDLE,
    PERSONA,
    PLAYER,
    PRESET_PREFIX,
    STATE,
    STYLE_PREFIX,
    SUMMARY,
    AssetReader,
    Diagnostic,
)

if TYPE_CHECKING:  # pragma: no cover
    from roleplay.harness.sessions import CommandOutcome, SessionService

SESSION_APPLY = SESSION_APPLY_COMMAND
PROJECTION_VERSION = 1
KIND = "profile"  # error-code prefix: profile.invalid, profile.asset_not_found, …
ASSET_UNAVAILABLE = "asset-unavailable"

# Bounds. Lists are small on purpose: each bound item becomes prompt material or a prompt slot.
MAX_LOREBOOKS = 32
MAX_WRITING_STYLES = 16
MAX_CUSTOM_PROMPTS = 32
MAX_SLOTS = 64
MAX_SOURCES_PER_SLOT = 64
MAX_OPENING_INDEX = 10_000
MAX_DIAGNOSTICS = 20

ASSET_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
LOCAL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # slot ids and custom prompt ids
_ASSET_ID_RE = re.compile(ASSET_ID_PATTERN)
_LOCAL_ID_RE = re.compile(LOCAL_ID_PATTERN)
_FIELD_ID_RE = re.compile(FIELD_ID_PATTERN)
FIXED_SOURCES = frozenset(
    {CARD, CARD_DEPTH_PROMPT, PERSONA, PLAYER, LORE_WORLD, LORE_CHARACTERS, LORE_RULES, STATE, SUMMARY, CONVERSATION, CURRENT_INPUT}
)

AssetId = Annotated[str, StringConstraints(strict=True, pattern=ASSET_ID_PATTERN)]
LocalId = Annotated[str, StringConstraints(strict=True, pattern=LOCAL_ID_PATTERN)]
RouteText = Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1, max_length=200)]
Effort = Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
SourceRef = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=200)]
LongText = Annotated[str, TextRule(LONG_TEXT_MAX)]
Label = Annotated[str, NameRule()]


def _duplicates(values: tuple[str, ...], what: str, at: tuple[Any, ...], code: str) -> list[Problem]:
    seen: dict[str, int] = {}
    out: list[Problem] = []
    for index, value in enumerate(values):
        if value in seen:
            out.append(
                Problem(
                    code,
                    f"{what} {value!r} is listed twice (first at index {seen[value]})",
                    pointer_from_parts((*at, index)),
                    {"value": value, "first": seen[value]},
                )
            )
        seen.setdefault(value, index)
    return out


class Resources(AssetModel):
    """Asset ids only; the assets themselves are shared and read live every turn."""

    card: AssetId | None = None
    lorebooks: tuple[AssetId, ...] = Field(default=(), max_length=MAX_LOREBOOKS)
    persona: AssetId | None = None
    preset: AssetId | None = None
    writing_styles: tuple[AssetId, ...] = Field(default=(), max_length=MAX_WRITING_STYLES)


class Scene(AssetModel):
    """Which opening the user chose. ``openingIndex`` 0 is the card's ``first_mes``, n is
    ``alternate_greetings[n-1]``; ``openingText`` is the replayable source text (spec: the
    materializer may only return a non-persisted ``openingMessageText`` derived from it)."""

    opening_source: Literal["card", "custom", "skip"] = "card"
    opening_index: StrictInt = Field(default=0, ge=0, le=MAX_OPENING_INDEX)
    opening_text: LongText = ""


class WriterRoute(AssetModel):
    """Either a fixed ``{provider, model, reasoningEffort?}`` or ``{followConversation: true}``."""

    provider: RouteText | None = None
    model: RouteText | None = None
    reasoning_effort: Effort | None = None
    follow_conversation: StrictBool | None = None

    @model_validator(mode="after")
    def _one_form(self) -> WriterRoute:
        fixed = self.provider is not None or self.model is not None or self.reasoning_effort is not None
        if self.follow_conversation is not None:
            if self.follow_conversation is not True or fixed:
                raise PydanticCustomError(
                    "route_form", "a route is either {followConversation: true} alone or {provider, model, reasoningEffort?}"
                )
        elif self.provider is None or self.model is None:
            raise PydanticCustomError("route_form", "a fixed Writer route needs both provider and model")
        return self

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class SessionRoute(AssetModel):
    """The conversation's own route, ``{provider, model, reasoningEffort?, tools?, jsonMode?}``,
    chosen when the story was created (``rp new --model``). Only the route and its options: keys
    and base URLs stay in the environment, so nothing secret is ever written to the log."""

    provider: RouteText
    model: RouteText
    reasoning_effort: Effort | None = None
    # Route options (``?tools=off``, ``?json=off``): false turns the model's capability off;
    # absent keeps the provider's own flag.
    tools: StrictBool | None = None
    json_mode: StrictBool | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Runtime(AssetModel):
    execution_mode: Literal["chat", "agent"] = "chat"
    # None: the session has no route of its own; each command uses --model or the environment.
    route: SessionRoute | None = None
    # None: no session override, every prepareRun reads the latest global default.
    writer_route: WriterRoute | None = None


class SlotSpec(AssetModel):
    id: LocalId
    name: Label
    sources: tuple[SourceRef, ...] = Field(default=(), max_length=MAX_SOURCES_PER_SLOT)
    section_tag: StrictBool = True
    idle: StrictBool = False


class ContextBuild(AssetModel):
    slots: tuple[SlotSpec, ...] = Field(default=(), max_length=MAX_SLOTS)


class CustomPrompt(AssetModel):
    id: LocalId
    title: Label
    text: LongText = ""


class SessionProfile(AssetModel):
    participation: Literal["adaptive", "actor", "director"] = "adaptive"
    resources: Resources = Field(default_factory=Resources)
    scene: Scene = Field(default_factory=Scene)
    runtime: Runtime = Field(default_factory=Runtime)
    # None: the default layout (derived from the sources at build time, preset defaults included).
    context_build: ContextBuild | None = None
    custom_prompts: tuple[CustomPrompt, ...] = Field(default=(), max_length=MAX_CUSTOM_PROMPTS)

    @property
    def execution_mode(self) -> str:
        return self.runtime.execution_mode

    def to_json_dict(self) -> dict[str, Any]:
        # The spec: restoring the global Writer default *removes* ``runtime.writerRoute``; and a
        # route's unused keys stay absent too (its two forms are mutually exclusive).
        out = self.model_dump(mode="json", by_alias=True)
        # Absent rather than null, so profiles stored before sessions had routes read back unchanged.
        if self.runtime.route is None:
            del out["runtime"]["route"]
        else:
            out["runtime"]["route"] = self.runtime.route.to_json_dict()
        if self.runtime.writer_route is None:
            del out["runtime"]["writerRoute"]
        else:
            out["runtime"]["writerRoute"] = self.runtime.writer_route.to_json_dict()
        return out


def default_profile() -> SessionProfile:
    return SessionProfile()


def parse_profile(data: Any, base: tuple[Any, ...] = ()) -> SessionProfile:
    """Validate untrusted JSON; raise ``profile.invalid`` listing every problem (pointers under
    ``base``), including the layout rules of :func:`context_build_problems`."""
    if not isinstance(data, Mapping):
        pointer = pointer_from_parts(base)
        raise ValidationError(
            f"{KIND}.invalid",
            "a profile must be a JSON object",
            pointer=pointer,
            problems=[Problem(f"{KIND}.wrong_type", "expected a JSON object", pointer)],
        )
    try:
        profile = SessionProfile.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        _raise(f"{KIND}.invalid", problems_from_pydantic(KIND, exc, base))
    problems = _duplicates(profile.resources.lorebooks, "lorebook id", (*base, "resources", "lorebooks"), f"{KIND}.duplicate")
    problems += _duplicates(
        profile.resources.writing_styles, "writing style id", (*base, "resources", "writingStyles"), f"{KIND}.duplicate"
    )
    problems += _duplicates(tuple(c.id for c in profile.custom_prompts), "custom prompt id", (*base, "customPrompts"), f"{KIND}.duplicate")
    problems += context_build_problems(profile, base)
    if problems:
        _raise(f"{KIND}.invalid", problems)
    return profile


def _raise(code: str, problems: list[Problem], exc_type: type[RpError] = ValidationError) -> Any:
    # The harness keeps only code, message, pointer and details of a failed command, so the whole
    # problem list also travels in details: every independent problem reaches the caller at once.
    first = problems[0]
    message = first.message if len(problems) == 1 else f"{len(problems)} problems, first: {first.message}"
    raise exc_type(code, message, pointer=first.pointer, details={"problems": [p.to_dict() for p in problems]}, problems=problems)


# -- context build rules ----------------------------------------------------------------------------


def source_id_problem(source_id: str) -> str | None:
    """Why ``source_id`` is not a well-formed source id (None when it is)."""
    if source_id in FIXED_SOURCES:
        return None
    for prefix, pattern, what in (
        (PRESET_PREFIX, _FIELD_ID_RE, "preset field id"),
        (STYLE_PREFIX, _ASSET_ID_RE, "asset id"),
        (CUSTOM_PREFIX, _LOCAL_ID_RE, "custom prompt id"),
    ):
        if source_id.startswith(prefix):
            return None if pattern.match(source_id[len(prefix) :]) else f"{source_id!r} does not end in a valid {what}"
    return f"unknown source id {source_id!r}"


def context_build_problems(profile: SessionProfile, base: tuple[Any, ...] = ()) -> list[Problem]:
    """The layout rules: unique slot ids; known, well-formed source ids, each in one slot only;
    ``rp.custom:<id>`` naming one of the session's custom prompts; no ``idle`` slot holding a
    source that must always take part (checked by source identity, so moving such a source into
    another slot cannot dodge it); ``rp.current-input`` exactly once."""
    build = profile.context_build
    if build is None:
        return []
    code = f"{KIND}.context_build"
    at = (*base, "contextBuild", "slots")
    problems: list[Problem] = []
    slot_ids: dict[str, int] = {}
    placed: dict[str, tuple[int, int]] = {}
    custom_ids = {p.id for p in profile.custom_prompts}
    for i, slot in enumerate(build.slots):
        if slot.id in slot_ids:
            problems.append(
                Problem(
                    f"{code}.duplicate_slot",
                    f"slot id {slot.id!r} is used twice",
                    pointer_from_parts((*at, i, "id")),
                    {"slotId": slot.id, "first": slot_ids[slot.id]},
                )
            )
        slot_ids.setdefault(slot.id, i)
        for j, source in enumerate(slot.sources):
            ptr = pointer_from_parts((*at, i, "sources", j))
            why = source_id_problem(source)
            if why is not None:
                problems.append(Problem(f"{code}.unknown_source", why, ptr, {"sourceId": source}))
            elif source.startswith(CUSTOM_PREFIX) and source[len(CUSTOM_PREFIX) :] not in custom_ids:
                problems.append(
                    Problem(f"{code}.unknown_source", f"{source!r} names no custom prompt of this session", ptr, {"sourceId": source})
                )
            if source in placed:
                problems.append(
                    Problem(
                        f"{code}.duplicate_source",
                        f"source {source!r} is placed twice",
                        ptr,
                        {"sourceId": source, "first": pointer_from_parts((*at, *placed[source]))},
                    )
                )
            placed.setdefault(source, (i, j))
        if slot.idle:
            pinned = sorted(set(slot.sources) & NEVER_IDLE)
            if pinned:
                problems.append(
                    Problem(
                        f"{code}.idle_not_allowed",
                        f"slot {slot.id!r} holds {', '.join(pinned)}, which must always take part; it cannot be idle",
                        pointer_from_parts((*at, i)),
                        {"slotId": slot.id, "sourceIds": pinned},
                    )
                )
    if CURRENT_INPUT not in placed:
        problems.append(
            Problem(f"{code}.current_input_missing", f"{CURRENT_INPUT} must be placed in exactly one slot", pointer_from_parts(at))
        )
    return problems


# -- the command handler ----------------------------------------------------------------------------

ARG_KEYS = ("profile", "patch", "stateBootstrap", "expectedRevision")
RESOURCE_KINDS = {"card": "card", "persona": "persona", "preset": "preset", "lorebooks": "lorebook", "writingStyles": "writing-style"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge, ``null`` removes (the field falls back to its
    default: unbound, no route override, default layout), anything else — lists included —
    replaces. Pure: neither argument is mutated."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def new_references(old: SessionProfile | None, new: SessionProfile) -> list[tuple[str, str, tuple[Any, ...]]]:
    """``(kind, asset_id, path)`` for every id ``new`` binds that ``old`` did not bind in the same
    field: the only references a command is allowed to check."""
    before = old.resources if old is not None else Resources()
    after = new.resources
    out: list[tuple[str, str, tuple[Any, ...]]] = []
    for field, key in (("card", "card"), ("persona", "persona"), ("preset", "preset")):
        value = getattr(after, field)
        if value is not None and value != getattr(before, field):
            out.append((RESOURCE_KINDS[key], value, ("resources", key)))
    for field, key in (("lorebooks", "lorebooks"), ("writing_styles", "writingStyles")):
        known = set(getattr(before, field))
        for i, value in enumerate(getattr(after, field)):
            if value not in known:
                out.append((RESOURCE_KINDS[key], value, ("resources", key, i)))
    return out


def mentioned_references(args: Any) -> list[tuple[str, str]]:
    """Every ``(kind, asset_id)`` the args mention under ``resources`` (tolerant of malformed
    args): what a caller must look up before running the command."""
    out: list[tuple[str, str]] = []
    if not isinstance(args, Mapping):
        return out
    for key in ("profile", "patch"):
        doc = args.get(key)
        resources = doc.get("resources") if isinstance(doc, Mapping) else None
        if not isinstance(resources, Mapping):
            continue
        for name, kind in RESOURCE_KINDS.items():
            value = resources.get(name)
            many = name in ("lorebooks", "writingStyles")
            values = (value if isinstance(value, list) else []) if many else [value]
            out.extend((kind, v) for v in values if isinstance(v, str) and (kind, v) not in out)
    return out


def _exists_fn(value: Any) -> Callable[[str, str], bool] | None:
    if value is None:
        return None
    if callable(value):
        return value  # type: ignore[no-any-return]
    if isinstance(value, Collection):
        return lambda kind, asset_id: (kind, asset_id) in value
    raise RpError(f"{KIND}.asset_check_invalid", "state['assetExists'] must be a callable or a collection of (kind, id) pairs")


def _current(ctx: CommandContext) -> tuple[SessionProfile | None, int]:
    state = ctx.state.get(SESSION_APPLY_STATE)
    if state is None:
        return None, 0
    if not isinstance(state, Mapping) or not isinstance(state.get("revision"), int):
        raise RpError(f"{KIND}.projection_invalid", "state['rpSession'] must be the rp/session projection state")
    profile = state.get("profile")
    return (parse_profile(profile) if profile is not None else None), state["revision"]


def plan_apply(
    args: Mapping[str, Any], current: SessionProfile | None, revision: int, asset_exists: Callable[[str, str], bool] | None
) -> dict[str, Any]:
    """Validate one ``rp-session-apply`` against the current profile; return the command result
    ``{profile, baseRevision, stateBootstrap?}``. Pure; raises :class:`RpError` with pointers into
    the args."""
    unknown = [
        Problem(f"{KIND}.args_unknown", f"unknown argument {k!r}", pointer_from_parts((k,))) for k in sorted(args) if k not in ARG_KEYS
    ]
    if "profile" in args and "patch" in args:
        unknown.append(Problem(f"{KIND}.args_conflict", "give either a full profile or a patch, not both", "/patch"))
    if "patch" in args and not isinstance(args["patch"], Mapping):
        unknown.append(Problem(f"{KIND}.wrong_type", "patch must be a JSON object", "/patch"))
    expected = args.get("expectedRevision")
    if "expectedRevision" in args and (not isinstance(expected, int) or isinstance(expected, bool) or expected < 0):
        unknown.append(Problem(f"{KIND}.bad_revision", "expectedRevision must be an integer ≥ 0", "/expectedRevision"))
    if unknown:
        _raise(f"{KIND}.args_invalid", unknown)
    if expected is not None and expected != revision:
        raise ConflictError(
            f"{KIND}.revision_conflict",
            f"the profile is at revision {revision}, not at the expected revision {expected}; re-read and retry",
            pointer="/expectedRevision",
            details={"expectedRevision": expected, "currentRevision": revision},
        )
    if "profile" in args:
        new = parse_profile(args["profile"], ("profile",))
        base: tuple[Any, ...] = ("profile",)
    else:
        start = current.to_json_dict() if current is not None else default_profile().to_json_dict()
        new = parse_profile(merge_patch(start, args.get("patch", {})), ("patch",))
        base = ("patch",)
    refs = new_references(current, new)
    if refs and asset_exists is not None:
        missing = [
            Problem(
                f"{KIND}.asset_not_found",
                f"no {kind} asset {asset_id!r}",
                pointer_from_parts((*base, *path)),
                {"assetId": asset_id, "kind": kind},
            )
            for kind, asset_id, path in refs
            if not asset_exists(kind, asset_id)
        ]
        if missing:
            _raise(f"{KIND}.asset_not_found", missing)
    result: dict[str, Any] = {"profile": new.to_json_dict(), "baseRevision": revision}
    if "stateBootstrap" in args:
        result["stateBootstrap"] = args["stateBootstrap"]  # opaque here: rp/state owns its meaning
    return result


def session_apply_handler(args: dict[str, Any], ctx: CommandContext) -> dict[str, Any]:
    """``rp-session-apply``. Reads ``ctx.state["rpSession"]`` (the projection state; absent for a
    new session) and ``ctx.state["assetExists"]`` (see the module docstring)."""
    current, revision = _current(ctx)
    return plan_apply(args, current, revision, _exists_fn(ctx.state.get("assetExists")))


def register_profile_commands(registry: CommandRegistry) -> None:
    registry.register(SESSION_APPLY, session_apply_handler)


# -- the projection ---------------------------------------------------------------------------------


def _initial() -> dict[str, Any]:
    return {"profile": None, "revision": 0, "pending": {}, "diagnostics": []}


def _diagnose(state: dict[str, Any], code: str, message: str, event: Event) -> None:
    item = {"code": code, "message": message, "seq": event.seq, "commandId": event.payload.get("commandId")}
    state["diagnostics"] = (state["diagnostics"] + [item])[-MAX_DIAGNOSTICS:]


def _apply(state: dict[str, Any], event: Event) -> dict[str, Any]:
    p = event.payload
    if event.type == COMMAND_RUN and p.get("name") == SESSION_APPLY:
        state["pending"][p["commandId"]] = event.seq
    elif event.type == COMMAND_DONE and p.get("commandId") in state["pending"]:
        del state["pending"][p["commandId"]]
        if p.get("kind") != "success":
            return state  # an error done changes nothing
        result = p.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("profile"), dict) or not isinstance(result.get("baseRevision"), int):
            _diagnose(state, f"{KIND}.result_malformed", "a successful rp-session-apply without {profile, baseRevision}", event)
        elif result["baseRevision"] != state["revision"]:
            _diagnose(
                state,
                f"{KIND}.stale_apply",
                f"computed against revision {result['baseRevision']}, but the profile was at {state['revision']}",
                event,
            )
        else:
            state["profile"] = result["profile"]
            state["revision"] += 1
    return state


session_projection = Projection(name=SESSION_PROJECTION, version=PROJECTION_VERSION, initial=_initial, apply=_apply)


def profile_of(state: Mapping[str, Any] | None) -> SessionProfile:
    """The effective profile of a projection state (the default profile before any apply)."""
    if state is None or state.get("profile") is None:
        return default_profile()
    return parse_profile(state["profile"])


# -- async conveniences (reading assets, running the command) ----------------------------------------


async def existing_assets(pairs: list[tuple[str, str]], reader: AssetReader) -> frozenset[tuple[str, str]]:
    found = set()
    for kind, asset_id in pairs:
        if await reader.read(kind, asset_id) is not None:
            found.add((kind, asset_id))
    return frozenset(found)


async def setup_command(args: dict[str, Any], reader: AssetReader) -> CommandSpec:
    """The ``rp-session-apply`` spec for ``SessionService.create(setup=…)``, checked first with
    real asset existence: the harness gives setup commands no state, so this is where a new
    session's bindings are verified. Raises exactly what the command would."""
    plan_apply(args, None, 0, _exists_fn(await existing_assets(mentioned_references(args), reader)))
    return CommandSpec(SESSION_APPLY, args)


@dataclass(frozen=True)
class ApplyOutcome:
    outcome: CommandOutcome
    applied: bool  # the command succeeded and its snapshot took effect
    state: dict[str, Any]  # the rp/session projection state after it


async def apply_profile(
    service: SessionService, session_id: str, args: dict[str, Any], reader: AssetReader, *, source: dict[str, Any] | None = None
) -> ApplyOutcome:
    """Run ``rp-session-apply`` on a live session: load ``rp/session``, look up the assets the
    args mention, and append the run as a CAS on the head that was loaded (so the handler's view
    is the log's). The projection must be registered with the service or is passed directly.

    A profile change takes the session's run lease, so it is ``run.busy`` while a turn runs (the
    turn froze its bindings at prepare). The running turn's own work (a tool binding an asset)
    reuses the turn's lease, but even it may not switch ``executionMode``: the spec allows that
    only while the session is idle."""
    async with session_lease(service.store, session_id) as lease:
        loaded = await service.projection(session_id, session_projection)
        if lease.nested:
            _refuse_mode_switch(args, loaded.state, session_id)
        exists = await existing_assets(mentioned_references(args), reader)
        outcome = await service.run_command(
            session_id,
            SESSION_APPLY,
            args,
            expected_seq=loaded.upto_seq,
            source=source,
            state={SESSION_APPLY_STATE: loaded.state, "assetExists": exists},
        )
        after = (await service.projection(session_id, session_projection)).state
    stale = any(d.get("commandId") == outcome.command_id for d in after["diagnostics"])
    return ApplyOutcome(outcome, outcome.ok and not stale, after)


def _refuse_mode_switch(args: dict[str, Any], state: Mapping[str, Any], session_id: str) -> None:
    current = profile_of(state)
    try:
        planned = plan_apply(args, current if state.get("profile") is not None else None, state["revision"], None)
    except RpError:
        return  # the command itself reports what is wrong with the args
    mode = parse_profile(planned["profile"]).execution_mode
    if mode != current.execution_mode:
        pointer = f"/{'profile' if 'profile' in args else 'patch'}/runtime/executionMode"
        raise ConflictError(
            "run.busy",
            f"executionMode can only change while session {session_id} is idle; a turn is running",
            pointer=pointer,
            details={"sessionId": session_id, "from": current.execution_mode, "to": mode},
        )


# -- read time: bindings --------------------------------------------------------------------------------


async def resolve_bindings(profile: SessionProfile | None, reader: AssetReader) -> tuple[dict[str, Any], list[Diagnostic]]:
    """``{characterId, lorebookIds, personaId, presetId, writingStyleIds}`` (null / [] when
    unbound) and one ``asset-unavailable`` diagnostic per bound id the reader cannot return. Ids
    stay in the list either way: the parent sees what is bound and what needs repair."""
    res = (profile or default_profile()).resources
    diagnostics: list[Diagnostic] = []

    async def check(kind: str, asset_id: str, pointer: str, source_id: str | None) -> None:
        if await reader.read(kind, asset_id) is None:
            diagnostics.append(
                Diagnostic(
                    ASSET_UNAVAILABLE,
                    f"bound {kind} {asset_id} is unavailable; it is read as unbound",
                    source_id,
                    {"assetId": asset_id, "kind": kind, "reason": "missing", "binding": pointer},
                )
            )

    if res.card:
        await check("card", res.card, "/resources/card", CARD)
    for i, book in enumerate(res.lorebooks):
        await check("lorebook", book, f"/resources/lorebooks/{i}", None)
    if res.persona:
        await check("persona", res.persona, "/resources/persona", PERSONA)
    if res.preset:
        await check("preset", res.preset, "/resources/preset", None)
    for i, style in enumerate(res.writing_styles):
        await check("writing-style", style, f"/resources/writingStyles/{i}", STYLE_PREFIX + style)
    bindings = {
        "characterId": res.card,
        "lorebookIds": list(res.lorebooks),
        "personaId": res.persona,
        "presetId": res.preset,
        "writingStyleIds": list(res.writing_styles),
    }
    return bindings, diagnostics


__all__ = [
    "ASSET_UNAVAILABLE",
    "FIXED_SOURCES",
    "SESSION_APPLY",
    "SESSION_PROJECTION",
    "ApplyOutcome",
    "ContextBuild",
    "CustomPrompt",
    "Resources",
    "Runtime",
    "Scene",
    "SessionProfile",
    "SlotSpec",
    "WriterRoute",
    "apply_profile",
    "context_build_problems",
    "default_profile",
    "existing_assets",
    "mentioned_references",
    "merge_patch",
    "new_references",
    "parse_profile",
    "plan_apply",
    "profile_of",
    "register_profile_commands",
    "resolve_bindings",
    "session_apply_handler",
    "session_projection",
    "setup_command",
]
