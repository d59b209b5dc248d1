"""Settings, features, plugins, quick replies and models.

Every write names the revision it is based on (``revision`` in the body; settings and quick
replies also take ``If-Match``), so a stale tab gets 409 instead of overwriting. A feature change
applies from the next conversation the server opens: this server's runtime keeps the set it was
started with until it restarts (the CLI's rule, "next run, not this one").

Model routes carry no credentials: keys and base URLs stay in the server's environment, and no
response names a key's value.
"""

from __future__ import annotations

import os
import time
from typing import Annotated, Any

from fastapi import APIRouter, Header, Response

from roleplay.core.feature_set import FeatureManager
from roleplay.core.settings import SettingsStore
from roleplay.errors import RpError
from roleplay.harness.models.registry import PROVIDERS, is_configured
from roleplay.harness.models.secrets import KeyFile
from roleplay.harness.models.routes import build_model, deprecation_note, key_file, model_environment, resolve_route
from roleplay.harness.models.types import ChatMessage, ModelRequest, complete
from roleplay.plugins import plugin_manager, plugin_rows
from roleplay.quick_replies import QuickReplies

from .app import Web
from .models import Body, ModelKey, ModelTest, SettingUpdate
from .routes_assets import expected_revision

router = APIRouter(tags=["settings"])


@router.get("/settings")
async def list_settings(w: Web) -> list[dict[str, Any]]:
    """Every setting's effective value, revision and default."""
    snapshot = await SettingsStore(w.rt.store).snapshot()
    return [r.to_dict() for r in snapshot.records()]


@router.get("/settings/{key}")
async def get_setting(w: Web, key: str) -> dict[str, Any]:
    return (await SettingsStore(w.rt.store).get(key)).to_dict()


@router.put("/settings/{key}")
async def set_setting(w: Web, key: str, body: SettingUpdate, if_match: Annotated[str | None, Header()] = None) -> dict[str, Any]:
    """Set a setting (validated); ``revision`` or ``If-Match`` makes it a compare-and-swap."""
    revision = expected_revision(if_match, body.revision, required=False, prefix="settings")
    return (await SettingsStore(w.rt.store).set(key, body.value, expected_revision=revision)).to_dict()


@router.delete("/settings/{key}")
async def reset_setting(w: Web, key: str, revision: int | None = None) -> dict[str, Any]:
    """Back to the default."""
    return (await SettingsStore(w.rt.store).reset(key, expected_revision=revision)).to_dict()


class FeatureBody(Body):
    revision: int | None = None


@router.get("/features")
async def features(w: Web) -> dict[str, Any]:
    """Each feature, on or off, with the set's revision; ``running`` is the set this server runs with."""
    state = await FeatureManager(w.rt.store).state()
    return {**state.to_dict(), "running": sorted(w.rt.features)}


@router.post("/features/{name}/enable")
async def enable(w: Web, name: str, body: FeatureBody | None = None) -> dict[str, Any]:
    """Turn a feature on (and what it needs); applies from the next conversation."""
    return (await FeatureManager(w.rt.store).enable(name, expected_revision=body.revision if body else None)).to_dict()


@router.post("/features/{name}/disable")
async def disable(w: Web, name: str, body: FeatureBody | None = None) -> dict[str, Any]:
    """Turn a feature off (and what needs it)."""
    return (await FeatureManager(w.rt.store).disable(name, expected_revision=body.revision if body else None)).to_dict()


@router.get("/plugins")
async def plugins(w: Web) -> list[dict[str, Any]]:
    """The loaded plugins, built-in and installed, and the hooks each implements."""
    return plugin_rows(plugin_manager(await FeatureManager(w.rt.store).enabled()))


# -- quick replies ----------------------------------------------------------------------------------


class QuickReplyBody(Body):
    label: str
    text: str
    revision: int | None = None


class QuickReplyEdit(Body):
    label: str | None = None
    text: str | None = None
    revision: int | None = None


@router.get("/quick-replies")
async def quick_replies(w: Web) -> dict[str, Any]:
    return (await QuickReplies(w.rt.store).list()).to_dict()


@router.post("/quick-replies", status_code=201)
async def add_quick_reply(w: Web, body: QuickReplyBody) -> dict[str, Any]:
    return (await QuickReplies(w.rt.store).add(body.label, body.text, expected_revision=body.revision)).to_dict()


@router.put("/quick-replies/{label}")
async def edit_quick_reply(w: Web, label: str, body: QuickReplyEdit) -> dict[str, Any]:
    listed = await QuickReplies(w.rt.store).edit(label, new_label=body.label, text=body.text, expected_revision=body.revision)
    return listed.to_dict()


@router.delete("/quick-replies/{label}")
async def delete_quick_reply(w: Web, label: str, revision: int | None = None) -> dict[str, Any]:
    return (await QuickReplies(w.rt.store).delete(label, expected_revision=revision)).to_dict()


# -- models -----------------------------------------------------------------------------------------


@router.get("/models")
async def models(w: Web, all: bool = False) -> dict[str, Any]:
    """Known providers and models, which the server's environment configures, and the server's default route."""
    rows = []
    keys = key_file()
    stored = {name for name, is_set in keys.status().items() if is_set} if keys is not None else set()
    for provider in PROVIDERS.values():
        if provider.test_double and not all:
            continue
        rows.append(
            {
                "provider": provider.name,
                "label": provider.label,
                "configured": is_configured(provider, model_environment()),
                "keyStored": provider.name in stored,
                "keyEnv": provider.key_env,
                "demo": provider.demo,
                "acceptsAnyModel": provider.open_models,
                "models": [
                    {"route": f"{provider.name}/{m.name}", "description": m.description, "default": m.name == provider.default_model,
                     "deprecated": m.deprecated, "contextWindow": m.context_window, "maxOutputTokens": m.max_output_tokens}
                    for m in provider.models
                ],
            }
        )  # fmt: skip
    return {"defaultRoute": w.config.default_route.spec, "providers": rows}


def _keys() -> KeyFile:
    keys = key_file()
    if keys is None:
        raise RpError("keys.unavailable", "this server keeps no model keys (no home directory); set them in its environment")
    return keys


@router.get("/models/keys")
async def key_status(w: Web) -> dict[str, Any]:
    """Which providers have a stored key (never the key), and whether the environment sets one (it wins)."""
    stored = _keys().status()
    env = os.environ
    return {"keys": {p: {"stored": s, "environment": bool(env.get(PROVIDERS[p].key_env or ""))} for p, s in stored.items()}}


@router.put("/models/keys/{provider}", status_code=204)
async def store_key(w: Web, provider: str, body: ModelKey) -> Response:
    """Store a provider's key in the server's home (write-only: no response ever shows it)."""
    _keys().set(provider, body.key)
    w.rt.models.clear()  # the next turn builds its client with this key; a running turn keeps its own
    return Response(status_code=204)


@router.delete("/models/keys/{provider}", status_code=204)
async def forget_key(w: Web, provider: str) -> Response:
    _keys().clear(provider)
    w.rt.models.clear()
    return Response(status_code=204)


@router.post("/models/test")
async def test_model(w: Web, body: ModelTest) -> dict[str, Any]:
    """Send one prompt through a route (default: the server's); the reply, usage and latency."""
    route = resolve_route(body.model) if body.model else w.config.default_route
    model = build_model(route)  # the environment, with the stored keys where it has none
    started = time.perf_counter()
    try:
        response = await complete(model, ModelRequest(messages=[ChatMessage("user", body.prompt)]))
    finally:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await aclose()
    return {
        "ok": True,
        "route": route.spec,
        "label": model.label,
        "demo": model.provider == "demo",
        "reply": response.text,
        "finishReason": response.finish_reason,
        "usage": response.usage.to_dict() if response.usage else None,
        "latencyMs": round((time.perf_counter() - started) * 1000, 1),
        "warnings": [x for x in (deprecation_note(route),) if x] + list(response.warnings),
    }
