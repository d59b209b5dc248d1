"""``rp-state`` as a plugin: everything story state adds to a runtime.

- tools ``rp_state_read`` and the Agent-only ``rp_state``;
- the ``rp-state-configure`` command and the ``rp/state`` and ``rp/state/activity`` projections;
- the ``state.update`` effect capability of ``rp_commit_turn``;
- the ``rp.state`` context source (the Writer's compact view; the parent gets the commit contract);
- the native-state materializer (a card's ``extensions.roleplay.state`` seeds the story);
- the ``rp-guide-state`` guide skill Agent mode's ``rp_guide`` offers.

Turned off (spec: 停用后不挂载变量 service、投影注册、上下文来源、读写工具), none of these exist
in the runtime. The session log keeps every state event, so turning it on again folds the same
``rp/state`` from the log. Lorebook ``stateCondition`` entries fail closed meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from roleplay.core.sources import POSITION_STATE, TITLES, SourceProvider, SourceRun
from roleplay.core.types import STATE, ContextSource
from roleplay.errors import RpError
from roleplay.hookspecs import hookimpl
from roleplay.state import bootstrap_payload, render_commit_contract, render_writer_view
from roleplay.state.commands import CONFIGURE, configure_handler
from roleplay.state.effect import state_update_capability
from roleplay.state.events import activity_projection, state_projection
from roleplay.state.tools import read_tool, state_tool
from roleplay.names import STATE_FEATURE, STATE_SOURCE

FEATURE = STATE_FEATURE
NATIVE_STATE_EXTENSION = "roleplay"  # a card's data.extensions.roleplay.state
MATERIALIZER_ORDER = 100


def state_source(view: Mapping[str, Any] | None) -> ContextSource | None:
    """``rp.state``: compact Writer view; the parent gets the commit contract instead."""
    if view is None:
        return None
    text = render_writer_view(view)
    if not text:
        return None
    return ContextSource(STATE, TITLES[STATE], text, "factual", parent_delivery="commit", parent_text=render_commit_contract(view))


async def collect_state(run: SourceRun) -> None:
    run.add(state_source(run.inputs.state), POSITION_STATE)


async def native_state(m: Any) -> None:
    """A card may carry a native ``rp.state`` namespace under ``extensions.roleplay.state``."""
    if m.card is None:
        return
    spec = ((m.card.data.get("extensions") or {}).get(NATIVE_STATE_EXTENSION) or {}).get("state")
    if not spec:
        return
    try:
        m.state_bootstrap = bootstrap_payload(spec["definition"], spec["initialValue"], namespace=spec.get("namespace", "story"))
    except (RpError, KeyError, TypeError) as exc:
        code = exc.code if isinstance(exc, RpError) else "state.bootstrap.invalid"
        m.diagnostics.append({"code": code, "message": f"the card's state namespace was not used: {exc}"})


@hookimpl
def register_tools(register: Any, runtime: Any) -> None:
    register(read_tool(runtime.service))
    register(state_tool(runtime.service))


@hookimpl
def register_guides(register: Any) -> None:
    register("rp-guide-state")


@hookimpl
def register_projections(register: Any) -> None:
    register(state_projection)
    register(activity_projection)


@hookimpl
def register_session_commands(register: Any) -> None:
    register(CONFIGURE, configure_handler)


@hookimpl
def register_effect_capabilities(register: Any) -> None:
    register(state_update_capability())


@hookimpl
def register_context_sources(register: Any) -> None:
    register(SourceProvider(STATE_SOURCE, collect_state))


@hookimpl
def register_materializers(register: Any) -> None:
    register(native_state, order=MATERIALIZER_ORDER)


__all__ = ["FEATURE", "collect_state", "native_state", "state_source"]
