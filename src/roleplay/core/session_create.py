"""New stories: resolve live assets, run the session materializers, create the session.

The spec (State paragraph of 数据所有权与消息实体): the host resolves the current live assets,
then ordered, generic *materializers* compose the profile, the complete State v2 bootstrap and
the opening; the profile command and the optional closed turn 1 go to session creation
together (``seed`` + ``setup``). The coordinator knows no community format; adapters (MVU)
plug in as further materializers.

``scene.openingText`` is the persisted, replayable source of the opening. A materializer may only
return a non-persisted ``opening_message_text`` (macros expanded, control blocks cleaned); the
assistant message shows that text, and a reload rebuilds it from the same source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal

from roleplay.errors import RpError, ValidationError
from roleplay.harness.commands import CommandContext, CommandSpec
from roleplay.harness.events import EventDraft
from roleplay.harness.leases import run_lease
from roleplay.harness.models.routes import Route
from roleplay.harness.store.base import SessionRecord
from roleplay.names import MESSAGE_ACTION_SOURCE, SESSION_APPLY_STATE
from roleplay.harness.names import ASSISTANT_MESSAGE, COMMAND_DONE, COMMAND_RUN, TURN_END, TURN_START

from .macros import MacroContext, expand_opening
from .profile import SESSION_APPLY, existing_assets, mentioned_references, profile_of, session_projection, setup_command
from .run import OPENING
from .runtime import ROLEPLAY_PRESET, RoleplayRuntime
from .session_route import route_profile_json
from .sources import StoreAssetReader
from .types import AssetView

OpeningSource = Literal["card", "custom", "skip"]


@dataclass
class StoryRequest:
    card: str | None = None
    # The spec's setup: every kind can be left out explicitly, distinct from "use the default".
    persona: str | Literal[False] | None = None  # None: the default persona; False: none
    preset: str | Literal[False] | None = None  # None: the default preset; False: none
    lorebooks: list[str] | None = None  # None: the card's linked lorebooks; []: none
    writing_styles: list[str] | None = None  # None: the default writing style; []: none
    opening: OpeningSource = "card"
    opening_index: int = 0
    opening_text: str = ""
    mode: Literal["chat", "agent"] = "chat"
    participation: Literal["adaptive", "actor", "director"] = "adaptive"  # spec: nothing to configure up front
    title: str | None = None
    route: Route | None = None  # the conversation's own route (runtime.route); None: follow the environment


@dataclass
class Materializing:
    """What the materializers build together, in order."""

    request: StoryRequest
    card: AssetView | None
    persona: AssetView | None
    macros: MacroContext
    profile: dict[str, Any]
    opening_text: str | None  # the persisted source (None: skipped)
    opening_message_text: str | None = None  # what the opening message shows (never persisted)
    state_bootstrap: dict[str, Any] | None = None
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    runtime: Any = None  # the RoleplayRuntime (adapters read blobs and lorebooks through it)
    lorebook_ids: list[str] = field(default_factory=list)


Materializer = Callable[[Materializing], Awaitable[None]]


# Core's own step (order 500); features add theirs through ``register_materializers``.
macro_opening = expand_opening


def opening_source_text(card: AssetView | None, request: StoryRequest) -> str | None:
    if request.opening == "skip":
        return None
    if request.opening == "custom":
        if not request.opening_text.strip():
            raise ValidationError("story.opening_empty", "a custom opening needs text", pointer="/openingText")
        return request.opening_text
    if card is None:
        return None  # nothing to open with: the first user message starts turn 1
    greetings = [card.data.get("first_mes", "")] + list(card.data.get("alternate_greetings") or [])
    if not 0 <= request.opening_index < len(greetings):
        raise ValidationError(
            "story.opening_out_of_range",
            f"the card has {len(greetings)} opening(s): choose 0..{len(greetings) - 1}",
            pointer="/openingIndex",
        )
    text = greetings[request.opening_index]
    return text if text.strip() else None


async def create_story(
    rt: RoleplayRuntime, request: StoryRequest, *, materializers: list[Materializer] | None = None
) -> tuple[SessionRecord, Materializing]:
    reader = StoreAssetReader(rt.assets)
    card = await _require(reader, "card", request.card) if request.card else None
    persona_id = await _chosen_or_default(rt, "persona", request.persona)
    preset_id = await _chosen_or_default(rt, "preset", request.preset)
    styles = request.writing_styles if request.writing_styles is not None else [i for i in [await _default_id(rt, "writing-style")] if i]
    if request.lorebooks is not None:
        lorebooks = request.lorebooks
    elif card is not None:
        lorebooks = [r.id for r in await rt.assets.read(lambda tx: tx.linked_lorebooks(card.id))]
    else:
        lorebooks = []
    persona = await reader.read("persona", persona_id) if persona_id else None
    macros = rt.macros_for(card.data if card else None, persona.data if persona else None)
    opening = opening_source_text(card, request)
    profile: dict[str, Any] = {
        "participation": request.participation,
        "resources": {"card": request.card, "lorebooks": lorebooks, "persona": persona_id, "preset": preset_id, "writingStyles": styles},
        "scene": {"openingSource": request.opening, "openingIndex": request.opening_index, "openingText": opening or ""},
        "runtime": {"executionMode": request.mode, **({"route": route_profile_json(request.route)} if request.route else {})},
        "contextBuild": None,
        "customPrompts": [],
    }
    m = Materializing(request, card, persona, macros, profile, opening, runtime=rt, lorebook_ids=list(lorebooks))
    for step in materializers if materializers is not None else rt.materializers:
        await step(m)
    args: dict[str, Any] = {"profile": m.profile}
    if m.state_bootstrap is not None:
        args["stateBootstrap"] = m.state_bootstrap
    spec = await setup_command(args, reader)
    seed: list[EventDraft] = []
    if m.opening_message_text is not None:
        turn_id = rt.ids("turn_")
        seed = [
            EventDraft(TURN_START, {"turnId": turn_id, "mode": "opening"}),
            EventDraft(
                ASSISTANT_MESSAGE,
                {
                    "messageId": rt.ids("msg_"),
                    "content": [{"type": "text", "text": m.opening_message_text}],
                    "turnId": turn_id,
                    "source": {OPENING: {"source": request.opening, "index": request.opening_index}},
                },
            ),
            EventDraft(TURN_END, {"turnId": turn_id, "outcome": "completed"}),
        ]
    title = request.title or (card.data.get("name") if card else None) or "story"
    # The setup command runs here, before the session exists, exactly as session creation would
    # run it (no state); its run and done go into the creating transaction. A rejected profile
    # therefore creates nothing, where a setup inside ``create`` would leave an orphan session.
    session_id = rt.ids("ses_")
    command = _executed(rt, session_id, spec, {}, failure="story.setup_failed", what="the session profile was rejected")
    record = await rt.service.create(ROLEPLAY_PRESET, title=title, seed=[*seed, *command], session_id=session_id)
    return record, m


async def rechoose_opening(
    rt: RoleplayRuntime,
    session_id: str,
    opening: OpeningSource,
    *,
    index: int = 0,
    text: str = "",
    materializers: list[Materializer] | None = None,
) -> Materializing:
    """Choose another opening on a *blank* session (no user turn yet).

    The spec: the State bootstrap is replaced only when a blank session re-chooses its opening
    material; once the story has started it is never recomputed from shared assets. The new
    scene and bootstrap go through ``rp-session-apply``; the opening message is replaced on the
    surface (or removed, when the new choice is ``skip``), so the log keeps the old one. After
    creation an opening can only be edited or removed, never added as a first message
    (``story.opening_not_in_seed``).

    One append carries the command's run and done and the opening replacement, as a CAS on the
    head everything was read at: a concurrent writer costs the whole choice (``event.seq_conflict``),
    never leaves a profile that names one opening beside a message that shows another.
    """
    async with run_lease(rt.store, session_id):
        return await _rechoose(rt, session_id, opening, index, text, materializers)


async def _rechoose(
    rt: RoleplayRuntime, session_id: str, opening: OpeningSource, index: int, text: str, materializers: list[Materializer] | None
) -> Materializing:
    from .message_actions import ACTION_VERSION

    loaded = await rt.service.projection(session_id, session_projection)
    head = loaded.upto_seq
    nodes = (await rt.service.surface(session_id))["nodes"]
    if any(n["role"] == "user" for n in nodes):
        raise RpError("story.not_blank", "the opening can only be re-chosen before the first user turn", details={"sessionId": session_id})
    profile = profile_of(loaded.state)
    reader = StoreAssetReader(rt.assets)
    res = profile.resources
    card = await reader.read("card", res.card) if res.card else None
    persona = await reader.read("persona", res.persona) if res.persona else None
    request = StoryRequest(card=res.card, opening=opening, opening_index=index, opening_text=text)
    source_text = opening_source_text(card, request)
    scene = {"openingSource": opening, "openingIndex": index, "openingText": source_text or ""}
    m = Materializing(
        request,
        card,
        persona,
        rt.macros_for(card.data if card else None, persona.data if persona else None),
        {**profile.to_json_dict(), "scene": scene},
        source_text,
        runtime=rt,
        lorebook_ids=list(res.lorebooks),
    )
    for step in materializers if materializers is not None else rt.materializers:
        await step(m)
    current = next((n for n in nodes if n["role"] == "assistant" and (n.get("source") or {}).get(OPENING) is not None), None)
    content = [{"type": "text", "text": m.opening_message_text}] if m.opening_message_text else []
    if current is None and content:
        reason = "removed" if await _seed_had_opening(rt, session_id) else "skipped-at-creation"
        raise RpError(
            "story.opening_not_in_seed",
            "this story has no opening message to replace ("
            + ("it was removed" if reason == "removed" else "it was created without one")
            + "); after creation an opening can only be edited or removed, not added. Start a new story to open with this text",
            details={"sessionId": session_id, "reason": reason},
        )
    args: dict[str, Any] = {"patch": {"scene": scene}}
    if m.state_bootstrap is not None:
        args["stateBootstrap"] = m.state_bootstrap
    exists = await existing_assets(mentioned_references(args), reader)
    drafts = _executed(
        rt,
        session_id,
        CommandSpec(SESSION_APPLY, args),
        {SESSION_APPLY_STATE: loaded.state, "assetExists": exists},
        failure="story.rechoose_failed",
        what="the new opening could not be applied",
    )
    if current is not None:
        source = {OPENING: {"source": opening, "index": index}, MESSAGE_ACTION_SOURCE: {"v": ACTION_VERSION, "kind": "rechoose-opening"}}
        drafts.append(
            EventDraft(
                ASSISTANT_MESSAGE,
                {
                    "messageId": rt.ids("msg_"),
                    "content": content,
                    "source": source,
                    "surfaceOp": {"op": "replace", "range": "node", "targetMessageId": current["id"]},
                },
            )
        )
    await rt.service.append(session_id, drafts, expected_seq=head)
    return m


def _executed(
    rt: RoleplayRuntime, session_id: str, spec: CommandSpec, state: dict[str, Any], *, failure: str, what: str
) -> list[EventDraft]:
    """Run a command's handler now and return its ``command/run`` + ``command/done`` drafts, for
    an append that carries them together with what depends on them. A rejection writes
    nothing: it raises ``failure`` with the handler's error in ``details.error``."""
    command_id = rt.ids("cmd_")
    ok, value = rt.service.commands.execute(spec, CommandContext(session_id, command_id, state))
    if not ok:
        raise RpError(
            failure,
            f"{what}: [{value.get('code')}] {value.get('message')}",
            pointer=value.get("pointer"),
            details={"sessionId": session_id, "error": value},
        )
    done: dict[str, Any] = {"commandId": command_id, "kind": "success"}
    if value is not None:
        done["result"] = value
    return [EventDraft(COMMAND_RUN, {"commandId": command_id, "name": spec.name, "args": spec.args}), EventDraft(COMMAND_DONE, done)]


async def _seed_had_opening(rt: RoleplayRuntime, session_id: str) -> bool:
    """Whether the session was created with an opening (the seed's closed opening turn 1)."""
    first = await rt.service.events(session_id, limit=1)
    return bool(first) and first[0].type == TURN_START and first[0].payload.get("mode") == "opening"


async def _require(reader: StoreAssetReader, kind: str, asset_id: str) -> AssetView:
    view = await reader.read(kind, asset_id)
    if view is None:
        raise RpError("asset.not_found", f"no {kind} {asset_id!r}", pointer=f"/{kind}")
    return view


async def _chosen_or_default(rt: RoleplayRuntime, kind: str, chosen: str | Literal[False] | None) -> str | None:
    if chosen is False:
        return None  # left out explicitly: the profile binds nothing and no default steps in
    return chosen or await _default_id(rt, kind)


async def _default_id(rt: RoleplayRuntime, kind: str) -> str | None:
    record = await rt.assets.get_default(kind)
    return record.id if record is not None else None
