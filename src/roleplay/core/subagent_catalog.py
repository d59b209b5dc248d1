"""The task sub-agent catalog of the ``rp-subagent-manager`` (spec row ``rp-subagent-manager``).

One global, atomic catalog in the settings table (``subagents.catalog``; DESIGN.md §3.4 puts the
sub-agent catalog there), managed with ``rp subagents list|add|edit|enable|disable|delete``.

An item is ``{name, usageContract, instructions, enabled, tools, route}``:

- ``usageContract``: the whole scheduling contract the Agent parent reads (when it applies,
  whether it is required, where it runs relative to the Writer, its input, what its result is
  for). The runtime adds no structured ``required`` or phase field (spec).
- ``instructions``: the user's working instructions, the child's persona *verbatim*.
- ``tools``: the item's allow-list; the run intersects it with the installed tools and never
  gives a specialist the Writer, the commit, asset or State writes, or another sub-agent.
- ``route``: ``provider/model[/effort]`` (the reasoning effort is part of the route), or null to
  follow the conversation's route. A session's Writer override never changes these.

**Seeds.** ``initialSubagents`` (规划 before the Writer, producing the brief; 润色 after the
Writer, before the commit) are written once, when the catalog is first created, i.e. the first
time it is read while its key was never written; in the user's language (the ``language``
setting, else the locale), like the other built-in defaults. Deleting or disabling them later
sticks: nothing re-seeds a catalog that exists. ``rp settings reset subagents.catalog`` leaves an
existing but empty catalog (its revision is above 0).

**Next run, not this one.** ``prepare_run`` reads the catalog once and freezes the enabled items
for the whole run (:func:`enabled_items`); a change applies from the next run. A disabled item
stays in the catalog but is not in the next run's ``<specialist_catalog>`` nor callable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, StrictBool, StringConstraints

from roleplay.assets.validation import AssetModel, NameRule, TextRule
from roleplay.errors import ConflictError, NotFoundError, ValidationError
from roleplay.names import SUBAGENT_MANAGER_FEATURE

if TYPE_CHECKING:
    from .settings import SettingsStore

CATALOG_KEY = "subagents.catalog"
SUBAGENT_MANAGER = SUBAGENT_MANAGER_FEATURE  # the feature that owns the catalog (off: no specialists)
MAX_ITEMS = 32
MAX_TOOLS = 32
CONTRACT_MAX = 4_000
INSTRUCTIONS_MAX = 20_000
SEED_ATTEMPTS = 3

ToolName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9_-]{1,64}$")]
RouteText = Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1, max_length=200)]


class SubagentItem(AssetModel):
    name: Annotated[str, NameRule(40)]
    usage_contract: Annotated[str, TextRule(CONTRACT_MAX), StringConstraints(min_length=1)]
    instructions: Annotated[str, TextRule(INSTRUCTIONS_MAX), StringConstraints(min_length=1)]
    enabled: StrictBool = True
    tools: Annotated[tuple[ToolName, ...], Field(max_length=MAX_TOOLS)] = ()
    route: RouteText | None = None  # provider/model[/effort]; null follows the conversation's route

    def contract(self) -> dict[str, Any]:
        """What the Agent parent sees of the item: its name and its usage contract."""
        return {"name": self.name, "usageContract": self.usage_contract}


# The settings value: the ordered item list (names unique, checked by ``check_catalog``).
CatalogValue = Annotated[list[SubagentItem], Field(max_length=MAX_ITEMS)]


def check_catalog(value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The settings normaliser: names are unique (case-insensitively, after trimming)."""
    seen: dict[str, int] = {}
    for index, item in enumerate(value or []):
        key = item["name"].casefold()
        if key in seen:
            raise ValidationError(
                "subagents.duplicate_name",
                f"two sub-agents are named {item['name']!r} (items {seen[key]} and {index})",
                pointer=f"/{index}/name",
            )
        seen[key] = index
    return value


# -- the seeds (initialSubagents), per language -----------------------------------------------------

_SEEDS: dict[str, tuple[dict[str, Any], ...]] = {
    "zh": (
        {
            "name": "规划",
            "usageContract": (
                "适用：本轮需要叙事续写时必需。顺序：在调用 rp_write_turn 之前调用。输入："
                '{"request": 用户本轮请求原文, "notes": 与本轮相关的设定、状态和近期剧情要点}。'
                "结果：一份简短大纲；把你采用的要点整理进 rp_write_turn 的 brief。讨论、澄清或纯资料操作的轮次不调用。"
            ),
            "instructions": (
                "你是互动小说的剧情规划师。根据任务和输入，为下一段正文列出三到五个要点：场景如何推进、"
                "其他角色如何反应、需要延续的伏笔。不写正文，不替用户控制的角色做决定、说话或思考。只输出要点。"
            ),
        },
        {
            "name": "润色",
            "usageContract": (
                "适用：本轮有 Writer 初稿时必需。顺序：在 Writer 成稿之后、写出最终正文和调用 rp_commit_turn 之前调用。"
                '输入：{"draft": Writer 初稿全文, "brief": 本轮采用的 brief}。'
                "结果：修订后的完整候选稿；由你审阅后决定是否采用为最终正文。"
            ),
            "instructions": (
                "你是互动小说的文字编辑。审阅给定的候选正文：修正错别字、病句、前后矛盾和不必要的重复，"
                "保持原有情节、视角、语气和篇幅，不添加新情节，也不替用户控制的角色行动。只输出修订后的完整正文；无需修改时原样输出。"
            ),
        },
    ),
    "en": (
        {
            "name": "Planning",
            "usageContract": (
                "Applies: required whenever this turn continues the story. Order: call it before rp_write_turn. Input: "
                '{"request": the user\'s message of this turn, "notes": the setting, state and recent story points that matter now}. '
                "Result: a short outline; put the points you adopt into the brief of rp_write_turn. "
                "Not for discussion, clarification or asset-only turns."
            ),
            "instructions": (
                "You plan the next passage of an interactive story. From the task and input, list three to five points: "
                "how the scene moves on, how the other characters react, which threads to carry forward. Write no prose, "
                "and never decide what the user's own character does, says or thinks. Output only the points."
            ),
        },
        {
            "name": "Polishing",
            "usageContract": (
                "Applies: required whenever this turn has a Writer draft. Order: after the Writer's draft, before you write "
                'the final text and call rp_commit_turn. Input: {"draft": the whole Writer draft, "brief": the brief you gave}. '
                "Result: a revised complete candidate; review it and decide whether it becomes the final text."
            ),
            "instructions": (
                "You copy-edit an interactive story. Review the candidate passage: fix typos, awkward sentences, "
                "contradictions and needless repetition; keep its events, point of view, tone and length; add no new events "
                "and never act for the user's own character. Output only the complete revised passage, or the passage "
                "unchanged when it needs nothing."
            ),
        },
    ),
}


def initial_subagents(language: str) -> list[SubagentItem]:
    """The seeds in ``language`` (en or zh; anything else gets English)."""
    return [SubagentItem.model_validate(d) for d in _SEEDS.get(language, _SEEDS["en"])]


def seed_names() -> dict[str, str]:
    """Every seed's name in every language → its role (``plan`` / ``polish``), for the demo model."""
    return {items[i]["name"]: role for items in _SEEDS.values() for i, role in enumerate(("plan", "polish"))}


def seed_instructions() -> dict[str, str]:
    """Every seed's instructions in every language → its role."""
    return {items[i]["instructions"]: role for items in _SEEDS.values() for i, role in enumerate(("plan", "polish"))}


# -- reading and changing the catalog ------------------------------------------------------------------


@dataclass(frozen=True)
class Catalog:
    items: tuple[SubagentItem, ...]
    revision: int

    def enabled(self) -> tuple[SubagentItem, ...]:
        return tuple(i for i in self.items if i.enabled)

    def find(self, name: str) -> int:
        key = name.strip().casefold()
        for index, item in enumerate(self.items):
            if item.name.casefold() == key:
                return index
        known = ", ".join(i.name for i in self.items) or "none"
        raise NotFoundError("subagents.unknown", f"no sub-agent named {name!r} in the catalog (known: {known})", pointer="/name")

    def to_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "items": [i.to_json_dict() for i in self.items]}


async def load_catalog(settings: SettingsStore, language: str) -> Catalog:
    """The catalog; created with the seeds in ``language`` if it was never written."""
    for _ in range(SEED_ATTEMPTS):
        record = await settings.get(CATALOG_KEY)
        if record.revision > 0:
            return Catalog(tuple(SubagentItem.model_validate(d) for d in record.value or []), record.revision)
        seeds = [i.to_json_dict() for i in initial_subagents(language)]
        try:
            written = await settings.set(CATALOG_KEY, seeds, expected_revision=0)
        except ConflictError:
            continue  # another process created it first: read theirs
        return Catalog(tuple(SubagentItem.model_validate(d) for d in written.value), written.revision)
    raise ConflictError("subagents.conflict", "the sub-agent catalog kept changing while it was being created; try again")


async def save_catalog(settings: SettingsStore, items: list[SubagentItem], expected_revision: int) -> Catalog:
    """Write the whole catalog as a CAS on the revision it was read at."""
    record = await settings.set(CATALOG_KEY, [i.to_json_dict() for i in items], expected_revision=expected_revision)
    return Catalog(tuple(SubagentItem.model_validate(d) for d in record.value), record.revision)


def add_item(catalog: Catalog, item: SubagentItem) -> list[SubagentItem]:
    if any(i.name.casefold() == item.name.casefold() for i in catalog.items):
        raise ConflictError("subagents.duplicate_name", f"a sub-agent named {item.name!r} already exists", pointer="/name")
    if len(catalog.items) >= MAX_ITEMS:
        raise ValidationError("subagents.too_many", f"the catalog holds at most {MAX_ITEMS} sub-agents", pointer="/items")
    return [*catalog.items, item]


def edit_item(catalog: Catalog, name: str, changes: dict[str, Any]) -> list[SubagentItem]:
    """``changes`` in camelCase (``usageContract``, ``instructions``, ``enabled``, ``tools``,
    ``route``, ``name``); validated as a whole item."""
    index = catalog.find(name)
    data = {**catalog.items[index].to_json_dict(), **changes}
    new = SubagentItem.model_validate(data)
    if any(j != index and i.name.casefold() == new.name.casefold() for j, i in enumerate(catalog.items)):
        raise ConflictError("subagents.duplicate_name", f"a sub-agent named {new.name!r} already exists", pointer="/name")
    return [new if j == index else i for j, i in enumerate(catalog.items)]


def delete_item(catalog: Catalog, name: str) -> list[SubagentItem]:
    index = catalog.find(name)
    return [i for j, i in enumerate(catalog.items) if j != index]


__all__ = [
    "CATALOG_KEY",
    "SUBAGENT_MANAGER",
    "Catalog",
    "CatalogValue",
    "SubagentItem",
    "add_item",
    "check_catalog",
    "delete_item",
    "edit_item",
    "initial_subagents",
    "load_catalog",
    "save_catalog",
    "seed_instructions",
    "seed_names",
]
