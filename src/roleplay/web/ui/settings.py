"""The settings page: features (with what each needs and what needs it), the global settings
(Writer route, identity override, language, reply options…), quick replies and models.

It paints from the library; ``settings.js`` changes everything through the JSON API, each write
naming the revision it read. Model keys are never shown or stored by the page: they stay in the
server's environment, and the page names the variable to set.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from roleplay.core.feature_set import FeatureManager
from roleplay.core.settings import SettingsStore
from roleplay.harness.models.registry import PROVIDERS, is_configured
from roleplay.harness.models.routes import key_file, model_environment
from roleplay.quick_replies import QuickReplies

from ..app import Web
from . import page

router = APIRouter(include_in_schema=False)

# Shown in their own sections, not as generic rows.
OWN_SECTIONS = frozenset({"features.enabled", "quickReplies.items"})


def _input_kind(value: Any, default: Any) -> str:
    sample = default if default is not None else value
    if isinstance(sample, bool):
        return "json"
    if isinstance(sample, int) and not isinstance(sample, bool):
        return "number"
    if sample is None or isinstance(sample, str):
        return "text"  # blank is null
    return "json"


@router.get("/settings", response_class=HTMLResponse)
async def settings_page(request: Request, w: Web) -> HTMLResponse:
    snapshot = await SettingsStore(w.rt.store).snapshot()
    rows = []
    for record in snapshot.records():
        d = record.to_dict()
        if d["key"] in OWN_SECTIONS:
            continue
        rows.append({**d, "input": _input_kind(d["value"], d["default"])})
    features = (await FeatureManager(w.rt.store).state()).to_dict()
    quick = await QuickReplies(w.rt.store).list()
    keys = key_file()
    stored = keys.status() if keys is not None else {}
    providers = [
        {"name": p.name, "label": p.label, "configured": is_configured(p, model_environment()), "keyEnv": p.key_env, "demo": p.demo,
         "inEnvironment": bool(p.key_env and os.environ.get(p.key_env)), "stored": stored.get(p.name, False),
         "models": [f"{p.name}/{m.name}" for m in p.models]}
        for p in PROVIDERS.values()
        if not p.test_double
    ]  # fmt: skip
    return page(
        request,
        "settings.html",
        {"nav": "settings", "rows": rows, "features": features, "running": sorted(w.rt.features), "quick": quick.to_dict(),
         "providers": providers, "defaultRoute": w.config.default_route.spec, "keysStorable": keys is not None},
    )  # fmt: skip


__all__ = ["router"]
