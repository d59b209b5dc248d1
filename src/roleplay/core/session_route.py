"""Which route a session's conversation (the parent) runs on.

A story may keep its own route on its profile (``runtime.route``, set by ``rp new --model``).
Order: an explicit route for this command, then the session's stored route, then the
environment's default (``RP_MODEL``, then whichever key is set; see
:func:`~roleplay.harness.models.routes.resolve_route`). An explicit route is used for that command
only; it does not change what is stored.

``provider/model[/effort]`` is stored with its options (``?tools=off``, ``?json=off``: a model that
cannot call tools keeps playing on the tool-free path). Keys and base URLs stay in the
environment, so a route on the profile never carries a credential and a session follows a
rotated key.
"""

from __future__ import annotations

from typing import Any

from roleplay.harness.models.registry import get_provider
from roleplay.harness.models.routes import Route, resolve_route

from .profile import SessionProfile, profile_of, session_projection
from .runtime import RoleplayRuntime


def route_profile_json(route: Route) -> dict[str, Any]:
    """``runtime.route`` for a profile: the route's provider, model, effort and options, nothing else."""
    out: dict[str, Any] = {"provider": route.provider, "model": route.model}
    if route.reasoning_effort is not None:
        out["reasoningEffort"] = route.reasoning_effort
    if route.tools is not None:
        out["tools"] = route.tools
    if route.json_mode is not None:
        out["jsonMode"] = route.json_mode
    return out


def stored_route(profile: SessionProfile) -> Route | None:
    """The profile's own route, or None. Raises ``model.unknown_provider`` when the stored
    provider is no longer known (the profile keeps it; ``--model`` still overrides)."""
    stored = profile.runtime.route
    if stored is None:
        return None
    get_provider(stored.provider)
    return Route(stored.provider, stored.model, stored.reasoning_effort, tools=stored.tools, json_mode=stored.json_mode)


def story_route(story_state: Any, default_route: Route | None = None) -> Route:
    """The route of a story whose command names none: its stored route, else ``default_route``
    (a server's ``--model``), else the environment's. A run reads it from the profile it reads
    under its lease, so a route changed while the run waited for the lease is the one it plays."""
    return stored_route(profile_of(story_state)) or default_route or resolve_route(None)


async def resolve_session_route(rt: RoleplayRuntime, session_id: str, spec: str | None = None, default_route: Route | None = None) -> Route:
    """The conversation route for the next command on ``session_id`` (see the module docstring;
    ``default_route``: a server's ``--model``, before the environment's)."""
    if spec:
        return resolve_route(spec)
    return story_route((await rt.service.projection(session_id, session_projection)).state, default_route)
