"""``rp_guide``: the guide skills an Agent-mode parent loads on demand (spec: 按需加载当前已启用能力
贡献的指导 Skill).

Only guides of *enabled* features are offered: each feature contributes its own through the
``register_guides`` hook (``rp-guide-state`` from ``rp-state``, ``rp-guide-preset`` and its helper
from ``rp-preset``), collected in the runtime's ``guides`` registry. A helper guide (``parent``
in its front matter, e.g. ``rp-guide-preset-sillytavern``) comes with its parent: it is appended when the parent is loaded
while this turn's input shows SillyTavern preset material (it names SillyTavern / 酒馆, or carries
``prompts`` and ``prompt_order`` arrays), and it may be loaded by name once its parent was loaded
in the run. Bodies are in the user's language (the ``language`` setting, else the locale), read
when the guide is loaded; the catalogue in the tool's guidance stays English, like every other
system text.
"""

from __future__ import annotations

import re
from typing import Any

from roleplay.errors import RpError
from roleplay.guides import GuideRegistry
from roleplay.harness.store.base import EventStore
from roleplay.harness.tools import Tool, ToolContext, ToolOutput
from roleplay.names import GUIDE_LOAD_KIND, GUIDE_TOOL

from .settings import read_settings

_SILLYTAVERN = re.compile(r"sillytavern|silly\s+tavern|酒馆", re.I)
_ARRAYS = (re.compile(r"[\"']?prompts[\"']?\s*:\s*\["), re.compile(r"[\"']?prompt_order[\"']?\s*:\s*\["))


def sillytavern_material(text: str) -> bool:
    """Whether ``text`` shows a SillyTavern preset: named, or its prompts/prompt_order arrays."""
    return bool(_SILLYTAVERN.search(text)) or all(p.search(text) for p in _ARRAYS)


def offered_guides(guides: GuideRegistry) -> list[str]:
    return guides.offered()


def guide_tool(store: EventStore, guides: GuideRegistry, input_text: str) -> Tool | None:
    """The run's ``rp_guide`` over the enabled features' guides (the runtime's ``guides``);
    None when there are none."""
    offered = offered_guides(guides)
    if not offered:
        return None
    helpers = guides.helpers()
    st_material = sillytavern_material(input_text)
    loaded: set[str] = set()

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = args.get("name")
        parent = helpers.get(name) if isinstance(name, str) else None
        if name not in offered and (parent is None or parent not in loaded):
            known = ", ".join(offered)
            hint = f"; load {parent} first" if parent is not None else ""
            raise RpError("guide.not_available", f"no guide {name!r} is available in this run{hint} (available: {known})", pointer="/name")
        assert isinstance(name, str)
        language = (await read_settings(store)).language()
        names = [name] + ([h for h, p in helpers.items() if p == name] if st_material and name in offered else [])
        found = [guides.load(n, language) for n in names]
        loaded.update(names)
        text = "\n\n".join(f'<guide name="{g.name}" title="{g.title}">\n{g.body.strip()}\n</guide>' for g in found)
        others = [h for h, p in helpers.items() if p == name and h not in names]
        if others:
            text += "\n\nHelper guides now loadable by name when they apply: " + ", ".join(
                f"{h} ({guides.load(h, 'en').description})" for h in others
            )
        return ToolOutput(text, meta={"kind": GUIDE_LOAD_KIND, "guides": names, "language": language})

    catalogue = "\n".join(f"- {g}: {guides.load(g, 'en').description}" for g in offered)
    guidance = (
        "## rp_guide\n\nLoads a guide with the rules and steps for a feature before you work on it: "
        '{"name": "<guide>"}. Load the one that applies before you configure or change what it covers. Available:\n' + catalogue
    )
    return Tool(
        GUIDE_TOOL,
        "Load a feature guide (its rules and procedures) by name.",
        {
            "type": "object",
            "properties": {"name": {"type": "string", "enum": [*offered, *helpers]}},
            "required": ["name"],
            "additionalProperties": False,
        },
        handler,
        guidance=guidance,
    )


__all__ = ["guide_tool", "offered_guides", "sillytavern_material"]
