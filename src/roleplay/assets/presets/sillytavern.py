"""Migrate a SillyTavern chat-completion preset into our assets, and say what did not survive.

A SillyTavern preset is a flat list of ``prompts`` plus per-character ``prompt_order`` lists, wrapped
in model, sampler and UI settings. Our model splits responsibilities instead: a preset holds the
narrative instructions in ordered ``top``/``bottom`` fields around the conversation history, writing
styles hold the expressive ones, and the context layer (card, persona, lorebooks, history) supplies
what SillyTavern's markers stood for. So the migration is semantic, not a byte copy:

1. Pick the live order list: ``character_id`` 100001 (what chat completion actually uses), else
   100000 (the prompt manager's legacy default), else the first list. With no usable
   ``prompt_order`` at all, walk ``prompts`` in file order and read each prompt's own ``enabled``.
2. Walk the list in order. Markers are never copied (our context sources replace them); the
   ``chatHistory`` marker is the pivot: non-marker prompts before it become ``top`` fields, after it
   ``bottom`` fields. In-chat (absolute) injections go ``bottom`` because SillyTavern puts them
   inside the recent history. Disabled and blank prompts are skipped.
3. Each remaining prompt is classified (see ``st_classify``): narrative -> one preset field,
   expressive -> one writing style. Texts are copied verbatim, macros included.
4. Everything that cannot migrate is listed in the report as ``Problem`` items with stable codes
   (``REPORT_CODES``) and a JSON Pointer into the *source* file.

**Legacy flat presets** (SillyTavern 2023, before the prompt manager) have no ``prompts`` array: the
prompt texts sit at the root. They migrate through the same per-prompt path, with the order and
switches that version used when it built a request (see ``LEGACY_PROMPTS``): ``main_prompt`` →
``main`` and ``nsfw_prompt`` → ``nsfw`` before the history (``nsfw_first`` swaps them; with
``nsfw_toggle`` off ``nsfw_avoidance_prompt`` was sent in the NSFW prompt's place), then
``jailbreak_prompt`` → ``jailbreak`` after the history, sent only when ``jailbreak_system`` was on.
Pointers then name the root keys. Everything else at the root (``impersonation_prompt``,
``new_chat_prompt``, samplers, limits…) is reported exactly as for the modern form.

Samplers and limits the Writer request can use are carried into the preset's ``sampling``
(``CARRIED_SETTINGS``): temperature, top_p, frequency/presence penalty, ``openai_max_tokens`` and
``openai_max_context``. A value outside what a request accepts is reported instead, like every
other sampler (top_k, min_p, seed …), which no route here sends.

Settings with empty values (``""``, ``null``, ``[]``, ``{}``) carry nothing and are not reported.
Values of settings whose key looks secret (a ``password``, ``key``, ``token``, ``proxy``, ``header``…
word) are redacted in the report: reports get shown to models and pasted into bug trackers.

Pure: no I/O, no ids from the outside; field ids derive from SillyTavern identifiers so that
migrating the same file twice gives the same result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from roleplay.canonical import sha256_hex
from roleplay.errors import Problem, ValidationError, pointer_from_parts

from ..styles.model import WritingStyle, parse_writing_style
import pydantic

from .model import MAX_FIELDS, MAX_TOTAL_CONTENT, Preset, Sampling, parse_field, parse_preset
from .st_classify import Classification, classify_prompt, find_macros, macro_handling
from roleplay.assets.validation import LONG_TEXT_MAX, NAME_MAX, NOTE_MAX

ORDER_PREFERENCE = (100001, 100000)

# Legacy flat presets: root key -> (prompt identifier, name). The identifiers and names are the
# prompt manager's, so a legacy file and its modern re-export migrate to the same fields.
LEGACY_PROMPTS: dict[str, tuple[str, str]] = {
    "main_prompt": ("main", "Main Prompt"),
    "nsfw_prompt": ("nsfw", "Auxiliary Prompt"),
    "nsfw_avoidance_prompt": ("nsfwAvoidance", "NSFW Avoidance Prompt"),
    "jailbreak_prompt": ("jailbreak", "Post-History Instructions"),
}
# Switches the legacy request builder read; applied by the migration, so not reported as settings.
LEGACY_SWITCHES = ("nsfw_toggle", "nsfw_first", "jailbreak_system")
STYLE_REQUIREMENTS_MAX = LONG_TEXT_MAX // 2  # the writing-style requirements bound

# What replaces each SillyTavern marker here. Unknown markers are reported with no replacement.
MARKER_REPLACEMENTS: dict[str, str] = {
    "chatHistory": "rp.conversation (对话历史，由引擎提供；其位置决定迁移栏位的 top/bottom)",
    "worldInfoBefore": "世界书 (lorebook) sources",
    "worldInfoAfter": "世界书 (lorebook) sources",
    "charDescription": "rp.card (角色卡)",
    "charPersonality": "rp.card (角色卡)",
    "scenario": "rp.card (角色卡)",
    "dialogueExamples": "rp.card (角色卡示例对话)",
    "personaDescription": "rp.persona (用户人设)",
}

SAMPLER_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "top_a",
        "min_p",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "seed",
        "n",
        "reasoning_effort",
        "verbosity",
        "bias_preset_selected",
        "logit_bias",
    }
)
# SillyTavern key -> ``Sampling`` field: the settings that reach the Writer request.
CARRIED_SETTINGS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "openai_max_tokens": "max_tokens",
    "openai_max_context": "context_size",
}
LIMIT_KEYS = frozenset({"openai_max_context", "openai_max_tokens", "max_context_unlocked"})
TEMPLATE_KEYS = frozenset(
    {
        "impersonation_prompt",
        "new_chat_prompt",
        "new_group_chat_prompt",
        "new_example_chat_prompt",
        "continue_nudge_prompt",
        "group_nudge_prompt",
        "wi_format",
        "scenario_format",
        "personality_format",
        "assistant_prefill",
        "assistant_impersonation",
        "human_sysprompt_message",
        "send_if_empty",
        "continue_postfix",
    }
)
CONNECTION_KEYS = frozenset(
    {
        "chat_completion_source",
        "custom_url",
        "reverse_proxy",
        "proxy_password",
        "api_url_scale",
        "custom_include_body",
        "custom_exclude_body",
        "custom_include_headers",
        "bypass_status_check",
        "show_external_models",
        "use_alt_scale",
    }
)
_CONNECTION_PREFIXES = ("openrouter_", "custom_")
# Whole "_"-separated words, so ``openai_max_tokens`` is not mistaken for a ``token`` secret.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SECRET_RE = re.compile(r"(?:^|_)(?:password|secret|token|key|apikey|proxy|headers?|auth)(?:_|$)", re.IGNORECASE)

REPORT_CODES = (
    "sillytavern.legacy",
    "sillytavern.order.ignored_list",
    "sillytavern.order.missing",
    "sillytavern.order.dangling",
    "sillytavern.order.duplicate",
    "sillytavern.order.no_chat_history",
    "sillytavern.prompt.malformed",
    "sillytavern.prompt.invalid",
    "sillytavern.prompt.unordered",
    "sillytavern.prompt.disabled",
    "sillytavern.prompt.empty",
    "sillytavern.prompt.too_long",
    "sillytavern.prompt.too_many",
    "sillytavern.prompt.title_truncated",
    "sillytavern.marker",
    "sillytavern.macro",
    "sillytavern.injection.absolute",
    "sillytavern.injection.role",
    "sillytavern.injection.trigger",
    "sillytavern.injection.forbid_overrides",
    "sillytavern.setting.sampler",
    "sillytavern.setting.limit",
    "sillytavern.setting.connection",
    "sillytavern.setting.template",
    "sillytavern.setting.behavior",
    "sillytavern.extension",
)


@dataclass(frozen=True)
class MigratedPrompt:
    """Where one SillyTavern prompt went. ``target`` is ``/fields/<id>`` or ``/writingStyles/<n>``."""

    identifier: str
    name: str
    source: str
    target_kind: str  # "preset-field" | "writing-style"
    target: str
    position: str | None
    classification: Classification

    def to_dict(self) -> dict[str, Any]:
        return {
            "identifier": self.identifier,
            "name": self.name,
            "source": self.source,
            "targetKind": self.target_kind,
            "target": self.target,
            "position": self.position,
            "classification": self.classification.to_dict(),
        }


@dataclass(frozen=True)
class MigrationReport:
    order_character_id: int | None
    migrated: tuple[MigratedPrompt, ...]
    not_migrated: tuple[Problem, ...]

    def codes(self) -> list[str]:
        return [p.code for p in self.not_migrated]

    def items(self, code: str) -> list[Problem]:
        return [p for p in self.not_migrated if p.code == code]

    def to_dict(self) -> dict[str, Any]:
        return {
            "orderCharacterId": self.order_character_id,
            "migrated": [m.to_dict() for m in self.migrated],
            "notMigrated": [p.to_dict() for p in self.not_migrated],
        }


@dataclass(frozen=True)
class SillyTavernMigration:
    preset: Preset
    writing_styles: tuple[WritingStyle, ...]
    report: MigrationReport

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset.to_json_dict(),
            "writingStyles": [s.to_json_dict() for s in self.writing_styles],
            "report": self.report.to_dict(),
        }


def looks_like_sillytavern_preset(data: Any) -> bool:
    """The trigger the preset guide uses: both ``prompts`` and ``prompt_order`` arrays present."""
    return isinstance(data, Mapping) and isinstance(data.get("prompts"), list) and isinstance(data.get("prompt_order"), list)


def parse_sillytavern_json(raw: bytes | str) -> Any:
    """Strict JSON (UTF-8, BOM tolerated). Raises ``sillytavern.not_json`` with line/column."""
    try:
        text = raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw.lstrip("\ufeff")
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise ValidationError("sillytavern.not_json", f"not UTF-8: {exc.reason}", details={"offset": exc.start}) from None
    except json.JSONDecodeError as exc:
        raise ValidationError("sillytavern.not_json", exc.msg, details={"line": exc.lineno, "column": exc.colno}) from None


# --- the migration -----------------------------------------------------------------------------


@dataclass
class _Walk:
    problems: list[Problem] = field(default_factory=list)
    migrated: list[MigratedPrompt] = field(default_factory=list)
    fields: list[dict[str, Any]] = field(default_factory=list)
    styles: list[dict[str, Any]] = field(default_factory=list)
    used_ids: set[str] = field(default_factory=set)
    total_content: int = 0
    sampling: dict[str, Any] = field(default_factory=dict)

    def report(self, code: str, message: str, pointer: str | None, **details: Any) -> None:
        self.problems.append(Problem(code, message, pointer, {k: v for k, v in details.items() if v is not None}))


def is_legacy_sillytavern_preset(data: Any) -> bool:
    """A flat 2023 chat-completion preset: no ``prompts`` array, prompt texts at the root."""
    return (
        isinstance(data, Mapping)
        and not isinstance(data.get("prompts"), list)
        and any(isinstance(data.get(key), str) for key in LEGACY_PROMPTS)
    )


def migrate_sillytavern_preset(data: Any, *, name: str) -> SillyTavernMigration:
    """Convert a parsed SillyTavern chat-completion preset, modern or legacy flat. ``name`` names
    the new preset (usually the file name without extension). Raises ``sillytavern.invalid`` only
    when there is neither a ``prompts`` array nor a legacy prompt text to work from; every other
    oddity is reported and skipped."""
    if not isinstance(data, Mapping):
        raise ValidationError("sillytavern.invalid", "a SillyTavern preset is a JSON object", pointer="")
    walk = _Walk()
    if is_legacy_sillytavern_preset(data):
        _migrate_legacy(data, walk, name)
        applied = tuple(k for k in LEGACY_SWITCHES if isinstance(data.get(k), bool))
        _report_settings(data, walk, skip=(*LEGACY_PROMPTS, *applied))
        _report_extensions(data.get("extensions"), walk)
        return _finish(walk, name, None)
    prompts = data.get("prompts")
    if not isinstance(prompts, list):
        raise ValidationError(
            "sillytavern.invalid",
            "no `prompts` array (and no legacy `main_prompt`, `nsfw_prompt` or `jailbreak_prompt`): not a chat-completion preset",
            pointer="/prompts",
        )
    by_id = _index_prompts(prompts, walk)
    used_order, character_id, entries = _choose_order(data, prompts, walk)

    seen: set[str] = set()
    after_history = False
    saw_history = False
    for pointer, identifier, enabled in entries:
        if identifier not in by_id:
            walk.report(
                "sillytavern.order.dangling",
                f"order names unknown prompt {identifier!r}; SillyTavern ignores it too",
                pointer,
                identifier=identifier,
            )
            continue
        if identifier in seen:
            walk.report(
                "sillytavern.order.duplicate",
                f"prompt {identifier!r} is listed twice; only the first occurrence was migrated",
                pointer,
                identifier=identifier,
            )
            continue
        seen.add(identifier)
        index, prompt = by_id[identifier]
        source = pointer_from_parts(["prompts", index])
        if _is_marker(identifier, prompt):
            if identifier == "chatHistory":
                after_history = saw_history = True
            walk.report(
                "sillytavern.marker",
                f"marker {identifier!r} is not copied; replaced by {MARKER_REPLACEMENTS.get(identifier, 'nothing (unknown marker)')}",
                source,
                identifier=identifier,
                enabled=enabled,
                replacement=MARKER_REPLACEMENTS.get(identifier),
            )
            continue
        _migrate_prompt(walk, prompt, identifier, source, enabled, "bottom" if after_history else "top", name)

    if entries and not saw_history:
        walk.report(
            "sillytavern.order.no_chat_history",
            "the order has no chatHistory marker; every migrated field except in-chat injections was placed at top",
            None,
        )
    if used_order:
        _report_unordered(prompts, seen, walk)
    _report_settings(data, walk)
    _report_extensions(data.get("extensions"), walk)
    return _finish(walk, name, character_id)


def _migrate_legacy(data: Mapping[str, Any], walk: _Walk, name: str) -> None:
    walk.report(
        "sillytavern.legacy",
        "legacy flat preset (no `prompts` array): its root prompt texts were "
        "migrated in the order and with the switches SillyTavern used for them",
        "",
    )
    for key in ("prompts", "prompt_order"):
        if not _is_empty(data.get(key)):
            walk.report(
                "sillytavern.order.ignored_list" if key == "prompt_order" else "sillytavern.prompt.malformed",
                f"`{key}` is not usable without a `prompts` array; it was not migrated",
                pointer_from_parts([key]),
            )
    for key in LEGACY_PROMPTS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            walk.report(
                "sillytavern.prompt.malformed",
                f"`{key}` is not text; it was not migrated",
                pointer_from_parts([key]),
                identifier=LEGACY_PROMPTS[key][0],
            )
    nsfw_key = "nsfw_prompt" if data.get("nsfw_toggle", True) is not False else "nsfw_avoidance_prompt"
    top = ["main_prompt", nsfw_key]
    if data.get("nsfw_first") is True:
        top.reverse()
    sent = {*top, "jailbreak_prompt"} if data.get("jailbreak_system") is True else set(top)
    order = [(key, "top") for key in top] + [("jailbreak_prompt", "bottom")]
    order += [(key, "top") for key in LEGACY_PROMPTS if key not in top and key != "jailbreak_prompt"]
    for key, position in order:
        content = data.get(key)
        if not isinstance(content, str):
            continue
        identifier, pname = LEGACY_PROMPTS[key]
        prompt = {"identifier": identifier, "name": pname, "content": content}
        _migrate_prompt(
            walk, prompt, identifier, pointer_from_parts([key]), key in sent, position, name, content_pointer=pointer_from_parts([key])
        )


def _finish(walk: _Walk, name: str, character_id: int | None) -> SillyTavernMigration:
    title = _CONTROL_RE.sub("", name if isinstance(name, str) else "").strip() or "SillyTavern 预设"
    preset = parse_preset(
        {
            "name": _clip(title, NAME_MAX),
            "description": _clip(
                f"从 SillyTavern 预设「{title}」迁移。未能迁移的采样参数、marker、宏、扩展与注入语义见迁移报告。", NOTE_MAX
            ),
            "fields": walk.fields,
            **({"sampling": walk.sampling} if walk.sampling else {}),
        }
    )
    styles = tuple(parse_writing_style(s) for s in walk.styles)
    report = MigrationReport(character_id, tuple(walk.migrated), tuple(walk.problems))
    return SillyTavernMigration(preset, styles, report)


def _index_prompts(prompts: list[Any], walk: _Walk) -> dict[str, tuple[int, Mapping[str, Any]]]:
    by_id: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for index, prompt in enumerate(prompts):
        pointer = pointer_from_parts(["prompts", index])
        identifier = prompt.get("identifier") if isinstance(prompt, Mapping) else None
        if not isinstance(identifier, str) or not identifier:
            walk.report("sillytavern.prompt.malformed", "prompt is not an object with a text identifier", pointer)
            continue
        by_id.setdefault(identifier, (index, prompt))  # SillyTavern's lookup also finds the first
    return by_id


def _choose_order(data: Mapping[str, Any], prompts: list[Any], walk: _Walk) -> tuple[bool, int | None, list[tuple[str, str, bool]]]:
    """(an order list was used, its character_id, [(pointer, identifier, enabled)])."""
    lists = data.get("prompt_order")
    candidates: list[tuple[int, Any, list[Any]]] = []
    if isinstance(lists, list):
        for k, item in enumerate(lists):
            if isinstance(item, Mapping) and isinstance(item.get("order"), list):
                candidates.append((k, item.get("character_id"), item["order"]))
    if not candidates:
        walk.report(
            "sillytavern.order.missing",
            "no usable prompt_order; prompts were walked in file order using each prompt's own `enabled`",
            "/prompt_order",
        )
        entries = [
            (pointer_from_parts(["prompts", i]), p["identifier"], p.get("enabled", True) is not False)
            for i, p in enumerate(prompts)
            if isinstance(p, Mapping) and isinstance(p.get("identifier"), str) and p["identifier"]
        ]
        return False, None, entries
    chosen = next(
        (c for pref in ORDER_PREFERENCE for c in candidates if c[1] == pref),
        candidates[0],
    )
    k, character_id, order = chosen
    for other_k, other_id, _ in candidates:
        if other_k != k:
            walk.report(
                "sillytavern.order.ignored_list",
                f"order list for character_id {other_id} was not used",
                pointer_from_parts(["prompt_order", other_k]),
                characterId=other_id,
            )
    entries = []
    for i, entry in enumerate(order):
        pointer = pointer_from_parts(["prompt_order", k, "order", i])
        identifier = entry.get("identifier") if isinstance(entry, Mapping) else None
        if not isinstance(identifier, str) or not identifier:
            walk.report("sillytavern.order.dangling", "order entry has no identifier", pointer)
            continue
        entries.append((pointer, identifier, entry.get("enabled", True) is not False))
    return True, character_id if isinstance(character_id, int) else None, entries


def _is_marker(identifier: str, prompt: Mapping[str, Any]) -> bool:
    # Explicit flag first; a known marker id without a `marker` key and without content is a
    # marker too (hand-edited files drop the flag).
    if "marker" in prompt:
        return prompt.get("marker") is True
    return identifier in MARKER_REPLACEMENTS and not prompt.get("content")


def _migrate_prompt(
    walk: _Walk,
    prompt: Mapping[str, Any],
    identifier: str,
    source: str,
    enabled: bool,
    position: str,
    preset_name: str,
    *,
    content_pointer: str | None = None,
) -> None:
    raw_name = prompt.get("name")
    pname = raw_name.strip() if isinstance(raw_name, str) and raw_name.strip() else identifier
    content = prompt.get("content")
    content = content if isinstance(content, str) else ""
    if not enabled:
        walk.report(
            "sillytavern.prompt.disabled",
            f"prompt {pname!r} is disabled in the order and was not migrated",
            source,
            identifier=identifier,
            name=pname,
            hasContent=bool(content.strip()),
        )
        return
    if not content.strip():
        walk.report("sillytavern.prompt.empty", f"prompt {pname!r} is empty", source, identifier=identifier, name=pname)
        return

    if prompt.get("injection_position") == 1:
        position = "bottom"
        walk.report(
            "sillytavern.injection.absolute",
            f"{pname!r} was injected in-chat at depth {prompt.get('injection_depth', 4)}; it became a bottom field, exact depth is lost",
            source,
            identifier=identifier,
            depth=prompt.get("injection_depth"),
            order=prompt.get("injection_order"),
        )
    role = prompt.get("role")
    if role not in (None, "system"):
        walk.report(
            "sillytavern.injection.role",
            f"{pname!r} was sent as a {role!r} message; fields are plain prompt text",
            source,
            identifier=identifier,
            role=role,
        )
    trigger = prompt.get("injection_trigger")
    if isinstance(trigger, list) and trigger:
        walk.report(
            "sillytavern.injection.trigger",
            f"{pname!r} only ran for generation types {trigger}; it now applies to every turn",
            source,
            identifier=identifier,
            trigger=",".join(map(str, trigger)),
        )
    if prompt.get("forbid_overrides") is True:
        walk.report(
            "sillytavern.injection.forbid_overrides",
            f"{pname!r} forbade card overrides; cards never override preset fields here",
            source,
            identifier=identifier,
        )

    cls = classify_prompt(identifier, pname, content)
    title = _clip(pname, NAME_MAX)
    if title != pname:
        walk.report(
            "sillytavern.prompt.title_truncated", f"name longer than {NAME_MAX} characters was shortened", source, identifier=identifier
        )
    if cls.responsibility == "expressive":
        if len(content) > STYLE_REQUIREMENTS_MAX:
            walk.report(
                "sillytavern.prompt.too_long",
                f"{pname!r} exceeds {STYLE_REQUIREMENTS_MAX} characters",
                source,
                identifier=identifier,
                length=len(content),
            )
            return
        target = f"/writingStyles/{len(walk.styles)}"
        style = {
            "name": title,
            "applicability": _clip(
                f"迁移自 SillyTavern 预设「{preset_name.strip()}」的 Prompt「{pname}」。请补充它适用的题材、场景或基调。", NOTE_MAX
            ),
            "requirements": content,
        }
        if not _acceptable(walk, parse_writing_style, style, source, identifier):
            return
        walk.styles.append(style)
        _report_macros(walk, content, content_pointer or f"{source}/content", identifier, f"{target}/requirements")
        walk.migrated.append(MigratedPrompt(identifier, pname, source, "writing-style", target, None, cls))
        return

    if len(content) > LONG_TEXT_MAX or walk.total_content + len(content) > MAX_TOTAL_CONTENT:
        walk.report(
            "sillytavern.prompt.too_long",
            f"{pname!r} does not fit the preset size limits",
            source,
            identifier=identifier,
            length=len(content),
        )
        return
    if len(walk.fields) >= MAX_FIELDS:
        walk.report("sillytavern.prompt.too_many", f"a preset holds at most {MAX_FIELDS} fields", source, identifier=identifier)
        return
    field_id = _field_id(identifier, set(walk.used_ids))
    candidate = {
        "id": field_id,
        "title": title,
        "description": _clip(f"迁移自 SillyTavern Prompt「{pname}」(identifier: {identifier[:100]})", NOTE_MAX),
        "content": content,
        "position": position,
        "enabled": True,
        "sectionTag": True,
    }
    if not _acceptable(walk, parse_field, candidate, source, identifier):
        return
    walk.used_ids.add(field_id)
    walk.fields.append(candidate)
    walk.total_content += len(content)
    target = f"/fields/{field_id}"
    _report_macros(walk, content, content_pointer or f"{source}/content", identifier, f"{target}/content")
    walk.migrated.append(MigratedPrompt(identifier, pname, source, "preset-field", target, position, cls))


def _acceptable(walk: _Walk, parse: Any, candidate: dict[str, Any], source: str, identifier: str) -> bool:
    """Validate one converted item on its own, so a single bad prompt (say, a control character
    pasted into its text) is reported and skipped instead of failing the whole migration."""
    try:
        parse(candidate)
    except ValidationError as exc:
        first = exc.problems[0] if exc.problems else Problem(exc.code, exc.message, exc.pointer)
        walk.report(
            "sillytavern.prompt.invalid",
            f"prompt {identifier!r} cannot be stored: {first.message}",
            source,
            identifier=identifier,
            problem=first.code,
            at=first.pointer,
        )
        return False
    return True


def _field_id(identifier: str, used: set[str]) -> str:
    """``st-`` + a slug of the identifier (``st-main``); non-ASCII ids fall back to a short hash.
    Deterministic, so re-migrating a file yields the same ids."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", identifier).strip("-_")[:48]
    base = f"st-{slug}" if slug else f"st-{sha256_hex(identifier)[:12]}"
    candidate, n = base, 2
    while candidate in used:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


def _report_macros(walk: _Walk, text: str, pointer: str, identifier: str, target: str) -> None:
    for macro, count in find_macros(text).items():
        handling = macro_handling(macro)
        note = (
            "kept: expanded per run from the bound card/persona"
            if handling == "kept"
            else "unsupported: left verbatim, the model will see it as literal text"
        )
        walk.report(
            "sillytavern.macro",
            f"macro {macro!r} x{count} in {identifier!r}: {note}",
            pointer,
            macro=macro,
            count=count,
            handling=handling,
            identifier=identifier,
            target=target,
        )


def _report_unordered(prompts: list[Any], seen: set[str], walk: _Walk) -> None:
    reported: set[str] = set()
    for index, prompt in enumerate(prompts):
        identifier = prompt.get("identifier") if isinstance(prompt, Mapping) else None
        if not isinstance(identifier, str) or identifier in seen or identifier in reported:
            continue
        reported.add(identifier)
        content = prompt.get("content")
        walk.report(
            "sillytavern.prompt.unordered",
            f"prompt {identifier!r} is not in the used order list, so SillyTavern never sent it; not migrated",
            pointer_from_parts(["prompts", index]),
            identifier=identifier,
            hasContent=isinstance(content, str) and bool(content.strip()),
        )


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list, dict)) and not value)


def _setting_code(key: str) -> str:
    if key in SAMPLER_KEYS:
        return "sillytavern.setting.sampler"
    if key in LIMIT_KEYS:
        return "sillytavern.setting.limit"
    if key in TEMPLATE_KEYS:
        return "sillytavern.setting.template"
    if key in CONNECTION_KEYS or key.endswith("_model") or key.startswith(_CONNECTION_PREFIXES):
        return "sillytavern.setting.connection"
    return "sillytavern.setting.behavior"


def _report_settings(data: Mapping[str, Any], walk: _Walk, *, skip: tuple[str, ...] = ()) -> None:
    for key in data:
        if key in ("prompts", "prompt_order", "extensions") or key in skip:
            continue
        value = data[key]
        if _is_empty(value):
            continue
        if key in CARRIED_SETTINGS and _carry(key, value, walk):
            continue
        code = _setting_code(key)
        if _SECRET_RE.search(key):
            shown: Any = "<redacted>"
        elif isinstance(value, (bool, int, float)):
            shown = value
        elif isinstance(value, str):
            shown = _clip(value, 200)
        else:
            shown = f"<{type(value).__name__}>"
        message = (
            f"setting {key!r} has a value a model request does not accept; not carried over"
            if key in CARRIED_SETTINGS
            else f"setting {key!r} has no equivalent in a preset"
        )
        walk.report(code, message, pointer_from_parts([key]), key=key, value=shown)


def _carry(key: str, value: Any, walk: _Walk) -> bool:
    """Keep one sampler or limit in the preset's ``sampling`` if a request can take its value."""
    target = CARRIED_SETTINGS[key]
    try:
        Sampling.model_validate({target: value})
    except pydantic.ValidationError:
        return False  # out of range or not a number: reported with the others
    walk.sampling[target] = value
    return True


def _report_extensions(extensions: Any, walk: _Walk) -> None:
    if not isinstance(extensions, Mapping):
        return
    for key, value in extensions.items():
        if _is_empty(value):
            continue
        details: dict[str, Any] = {"key": key}
        if isinstance(value, list):
            details["items"] = len(value)
        elif isinstance(value, Mapping):
            for sub, subval in value.items():
                if isinstance(subval, (list, Mapping)):
                    details[f"{sub}Count"] = len(subval)
            scripts = value.get("scripts")
            if isinstance(scripts, list):
                names = [s["name"] for s in scripts if isinstance(s, Mapping) and isinstance(s.get("name"), str)]
                details["scriptNames"] = ", ".join(names)[:500]
        walk.report(
            "sillytavern.extension",
            f"extension data {key!r} is not migrated and never executed",
            pointer_from_parts(["extensions", key]),
            **details,
        )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "CARRIED_SETTINGS",
    "MARKER_REPLACEMENTS",
    "ORDER_PREFERENCE",
    "REPORT_CODES",
    "MigratedPrompt",
    "MigrationReport",
    "SillyTavernMigration",
    "is_legacy_sillytavern_preset",
    "looks_like_sillytavern_preset",
    "migrate_sillytavern_preset",
    "parse_sillytavern_json",
]
