"""Global settings: one table beside sessions and assets (``core/settings_migrations.py``), one row per key.

DESIGN.md §3.4 puts the enabled features, the Writer's default route, quick replies and prompt
overrides in one settings table with revision CAS. Every key has a typed value (a pydantic type
with a default); unknown keys are refused (``settings.unknown_key``) and bad values are refused
with a JSON Pointer into the value (``settings.invalid_value``), so a typo never lands silently.

Revisions count per key and only grow: the first write makes revision 1, every ``set`` or
``reset`` adds one. A key never written is at revision 0. ``set``/``reset`` with
``expected_revision`` refuse a stale write (``settings.conflict``) and write nothing. A reset
stores NULL (the default) and keeps the row, so the revision never goes back and a writer that
read an older revision is still refused.

Writes go through the asset store's transaction runner (``AssetStore.write``): one commit path
for every row outside the event log, one body for both dialects.

Consumers read a :class:`SettingsSnapshot` (one read of the table):
- ``writer.defaultRoute``: ``core.run`` at every prepare (spec: without a session override every
  ``prepareRun`` reads the latest global default). ``RP_WRITER_MODEL`` still wins over it as a
  per-process override; see ``core.run.resolve_writer_route``.
- ``prompt.identity``: replaces the ``harness:identity`` section of the roleplay parent and Writer
  prompts (the only prompt section the spec lets the user edit); ``null`` restores the harness's.
- ``context.windows``: ``provider/model`` → tokens, read through :func:`context_window_for`.
- ``summary.route``: the conversation summariser's route (``core.summary``); null follows the
  conversation's route.
- ``quickReplies.*``: the ``quick_replies`` feature (``rp quick-replies``, ``/qr`` in play).
- ``language``: which built-in defaults are seeded (``assets.seeds``, which reads the row itself
  because it runs below core); while it is ``null`` the next seeding stores the system locale's
  choice there (``assets.language.settle_language``), so the defaults do not flip between locales.
- ``features.enabled``, ``replyOptions.*``: typed and validated now; their consumers (the
  feature manager, reply options) come later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Literal

import pydantic
from pydantic import AfterValidator, Field, Strict, StringConstraints, TypeAdapter, field_validator
from pydantic_core import PydanticCustomError

from roleplay.assets.language import SETTING_KEY as _LANGUAGE_KEY, language_from_locale
from roleplay.assets.store import AssetStore, AssetTx
from roleplay.assets.validation import AssetModel, NameRule, TextRule, problems_from_pydantic
from roleplay.errors import ConflictError, Problem, RpError, ValidationError
from roleplay.harness.models.routes import Route, parse_route_spec
from roleplay.harness.store.base import EventStore

from .settings_migrations import OWNER as SETTINGS_OWNER, SETTINGS_MIGRATIONS
from .workspace_tools import SETTING_KEY as _WORKSPACE_KEY, check_root as _check_workspace_root
from .subagent_catalog import CATALOG_KEY as _CATALOG_KEY, CatalogValue as _CatalogValue, check_catalog as _check_catalog
from roleplay.names import (
    ASSET_TOOLS_FEATURE,
    CHARACTER_CARD_FEATURE,
    COMPACT_ACCESS_MODE_FEATURE,
    COMPAT_MVU_FEATURE,
    CONVERSATION_SUMMARY_FEATURE,
    CORE_FEATURE,
    DIALOGUE_HIGHLIGHT_FEATURE,
    FEATURE_MANAGER_FEATURE,
    LIBRARY_FEATURE,
    LOREBOOK_FEATURE,
    MACRO_FEATURE,
    MESSAGE_ACTIONS_FEATURE,
    MESSAGE_AVATAR_FEATURE,
    PERSONA_FEATURE,
    PRESET_FEATURE,
    QUICK_REPLIES_FEATURE,
    REMOTE_FEATURE,
    REPLY_OPTIONS_FEATURE,
    STANDARD_FEATURE,
    STATE_FEATURE,
    SUBAGENT_MANAGER_FEATURE,
    WRITING_STYLE_FEATURE,
)

# Optional features the feature manager will switch (spec: plugin table). The infrastructure
# (rp-core, rp-feature-manager, rp-remote, rp-standard) is always on and cannot be listed.
FEATURES: tuple[str, ...] = (
    STATE_FEATURE,
    CHARACTER_CARD_FEATURE,
    LOREBOOK_FEATURE,
    PERSONA_FEATURE,
    PRESET_FEATURE,
    WRITING_STYLE_FEATURE,
    MACRO_FEATURE,
    ASSET_TOOLS_FEATURE,
    LIBRARY_FEATURE,
    SUBAGENT_MANAGER_FEATURE,
    CONVERSATION_SUMMARY_FEATURE,
    MESSAGE_ACTIONS_FEATURE,
    MESSAGE_AVATAR_FEATURE,
    REPLY_OPTIONS_FEATURE,
    QUICK_REPLIES_FEATURE,
    DIALOGUE_HIGHLIGHT_FEATURE,
    COMPACT_ACCESS_MODE_FEATURE,
    COMPAT_MVU_FEATURE,
)
ALWAYS_ON = (CORE_FEATURE, FEATURE_MANAGER_FEATURE, REMOTE_FEATURE, STANDARD_FEATURE)

IDENTITY_MAX = 16_000
MIN_CONTEXT_WINDOW = 1_024
MAX_CONTEXT_WINDOW = 100_000_000
MAX_WINDOW_ENTRIES = 200
MAX_QUICK_REPLIES = 100

RouteSpec = Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1, max_length=200)]
Tokens = Annotated[int, Strict(), Field(ge=MIN_CONTEXT_WINDOW, le=MAX_CONTEXT_WINDOW)]
IdentityText = Annotated[str, TextRule(IDENTITY_MAX)]


def _feature(name: str) -> str:
    if name in ALWAYS_ON:
        raise PydanticCustomError("always_on", "{feature} is always on and cannot be switched", {"feature": name})
    if name not in FEATURES:
        raise PydanticCustomError(
            "unknown_feature", "unknown feature {feature}; known: {known}", {"feature": name, "known": ", ".join(FEATURES)}
        )
    return name


Feature = Annotated[str, Strict(), AfterValidator(_feature)]


class QuickReply(AssetModel):
    label: Annotated[str, NameRule(40)]
    text: Annotated[str, TextRule(4_000)]

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise PydanticCustomError("blank", "a quick reply needs some text")
        return value


# -- normalisers: run after the type check; raise ``_Bad`` with a pointer into the value ----------


class _Bad(Exception):
    def __init__(self, code: str, message: str, pointer: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.problem = Problem(code, message, pointer, details or {})


def _route_spec(spec: str, pointer: str) -> Route:
    try:
        return parse_route_spec(spec)
    except RpError as exc:
        raise _Bad("settings.bad_route", f"{exc.message}", pointer, {"cause": exc.code}) from None


def _normal_route(value: str | None) -> str | None:
    # Stored fully qualified, so a bare model name does not change meaning with the environment.
    return None if value is None else _route_spec(value, "/value").spec


def _normal_features(value: list[str]) -> list[str]:
    seen: set[str] = set()
    for i, name in enumerate(value):
        if name in seen:
            raise _Bad("settings.duplicate", f"feature {name!r} is listed twice", f"/value/{i}", {"feature": name})
        seen.add(name)
    return [f for f in FEATURES if f in seen]  # catalogue order: the stored list is canonical


def _normal_identity(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise _Bad("settings.blank", "the identity text is blank; `rp settings reset prompt.identity` restores the default", "/value")
    return value


def _window_key(spec: str, pointer: str) -> str:
    if "?" in spec:
        raise _Bad("settings.bad_route", f"context windows are per model; drop the route options from {spec!r}", pointer)
    route = _route_spec(spec, pointer)
    if route.reasoning_effort is not None:
        raise _Bad(
            "settings.bad_route",
            f"context windows are per model; drop the effort {route.reasoning_effort!r} from {spec!r}",
            pointer,
        )
    return f"{route.provider}/{route.model}"


def _normal_windows(value: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec, tokens in value.items():
        pointer = "/value/" + spec.replace("~", "~0").replace("/", "~1")
        key = _window_key(spec, pointer)
        if key in out:
            raise _Bad("settings.duplicate", f"{spec!r} names the model {key!r} a second time", pointer, {"model": key})
        out[key] = tokens
    return dict(sorted(out.items()))


def _normal_quick_replies(value: list[dict[str, str]]) -> list[dict[str, str]]:
    # ``/qr LABEL`` picks one by its label: a second with the same label could never be chosen.
    seen: set[str] = set()
    for i, item in enumerate(value):
        if item["label"] in seen:
            raise _Bad(
                "settings.duplicate", f"quick reply label {item['label']!r} is used twice", f"/value/{i}/label", {"label": item["label"]}
            )
        seen.add(item["label"])
    return value


# -- the catalogue -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettingDef:
    key: str
    annotation: Any
    default: Any
    description: str
    # A command-line value that is not JSON is taken as this key's text (a route, a prompt).
    text: bool = False
    normalize: Callable[[Any], Any] | None = None
    adapter: TypeAdapter[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "adapter", TypeAdapter(self.annotation))


DEFS: dict[str, SettingDef] = {
    d.key: d
    for d in (
        SettingDef(
            "features.enabled",
            Annotated[list[Feature], Field(max_length=len(FEATURES))],
            list(FEATURES),
            "the optional roleplay features that are on (the feature manager applies them)",
            normalize=_normal_features,
        ),
        SettingDef(
            "writer.defaultRoute",
            RouteSpec | None,
            None,
            "the Writer's global default route provider/model[/effort]; null follows the conversation's route",
            text=True,
            normalize=_normal_route,
        ),
        SettingDef(
            "summary.route",
            RouteSpec | None,
            None,
            "the conversation summariser's route provider/model[/effort]; null follows the conversation's route",
            text=True,
            normalize=_normal_route,
        ),
        SettingDef(
            "prompt.identity",
            IdentityText | None,
            None,
            "replaces the harness:identity prompt section of roleplay parents and the Writer; null keeps the harness's",
            text=True,
            normalize=_normal_identity,
        ),
        SettingDef(
            "context.windows",
            Annotated[dict[RouteSpec, Tokens], Field(max_length=MAX_WINDOW_ENTRIES)],
            {},
            "context window overrides in tokens, by provider/model",
            normalize=_normal_windows,
        ),
        SettingDef(
            "replyOptions.count",
            Annotated[int, Strict(), Field(ge=1, le=8)],
            3,
            "how many reply options to suggest after a committed turn",
        ),
        SettingDef(
            "replyOptions.maxCharacters",
            Annotated[int, Strict(), Field(ge=10, le=500)],
            80,
            "the length guide for one reply option, in characters",
        ),
        SettingDef(
            "replyOptions.keywords",
            Annotated[list[Annotated[str, NameRule(40)]], Field(max_length=20)],
            [],
            "direction keywords that guide the reply options",
        ),
        SettingDef(
            "quickReplies.items",
            Annotated[list[QuickReply], Field(max_length=MAX_QUICK_REPLIES)],
            [],
            "reusable quick replies [{label, text}]; choosing one inserts its text into the draft",
            normalize=_normal_quick_replies,
        ),
        SettingDef(
            "language",
            Literal["en", "zh"] | None,
            None,
            "the language of the built-in defaults (persona, example preset, writing style, guides): en or zh;"
            " null: the next start stores the system locale's. Setting it switches the unedited defaults; edited ones are kept",
            text=True,
        ),
        SettingDef(
            "quickReplies.cursor",
            Literal["end", "start", "select"],
            "end",
            "where the cursor goes after a quick reply is inserted: end or start of the text, or select it",
            text=True,
        ),
        SettingDef(
            _CATALOG_KEY,
            _CatalogValue | None,
            None,
            "the task sub-agent catalog [{name, usageContract, instructions, enabled, tools, route}] of Agent mode;"
            " created with the built-in seeds on first use (rp subagents manages it)",
            normalize=_check_catalog,
        ),
        SettingDef(
            _WORKSPACE_KEY,
            Annotated[str, StringConstraints(strict=True, strip_whitespace=True, min_length=1, max_length=4096)] | None,
            None,
            "Agent mode's sandboxed workspace tools (a shell and a file editor): the folder under which each story gets"
            " its own workspace; null (default) turns them off",
            text=True,
            normalize=_check_workspace_root,
        ),
    )
}


assert _LANGUAGE_KEY in DEFS  # the seeding reads this key's row by name


def setting_def(key: Any) -> SettingDef:
    found = DEFS.get(key) if isinstance(key, str) else None
    if found is None:
        raise ValidationError(
            "settings.unknown_key",
            f"unknown setting {key!r}; known: {', '.join(DEFS)}",
            pointer="/key",
            details={"key": key if isinstance(key, str) else repr(key), "known": list(DEFS)},
        )
    return found


def validate_setting(key: str, value: Any) -> Any:
    """The canonical JSON value for ``key``, or ``settings.invalid_value`` with every problem."""
    d = setting_def(key)
    try:
        typed = d.adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        problems = problems_from_pydantic("settings", exc, ("value",))
        raise _invalid(key, problems) from None
    out = d.adapter.dump_python(typed, mode="json", by_alias=True)
    if d.normalize is not None:
        try:
            out = d.normalize(out)
        except _Bad as bad:
            raise _invalid(key, [bad.problem]) from None
    return out


def _invalid(key: str, problems: list[Problem]) -> ValidationError:
    first = problems[0]
    message = first.message if len(problems) == 1 else f"{len(problems)} problems, first: {first.message}"
    return ValidationError("settings.invalid_value", f"{key}: {message}", pointer=first.pointer, details={"key": key}, problems=problems)


def parse_cli_value(key: str, text: str) -> Any:
    """A value typed on the command line: JSON, or for text keys the text itself when it is not
    JSON (``deepseek/deepseek-flash``, a prompt). Quote a text that is valid JSON: ``'"42"'``."""
    d = setting_def(key)
    try:
        return json.loads(text)
    except ValueError as exc:
        if d.text:
            return text
        raise ValidationError(
            "settings.invalid_json",
            f"{key} takes a JSON value (e.g. {json.dumps(d.default, ensure_ascii=False)}): {exc}",
            pointer="/value",
            details={"key": key},
        ) from None


# -- records and the typed snapshot --------------------------------------------------------------


@dataclass(frozen=True)
class SettingRecord:
    key: str
    value: Any  # the effective value: the stored one, else the default
    revision: int
    is_default: bool
    updated_at: str | None

    def to_dict(self) -> dict[str, Any]:
        d = DEFS[self.key]
        return {
            "key": self.key,
            "value": self.value,
            "revision": self.revision,
            "isDefault": self.is_default,
            "default": d.default,
            "updatedAt": self.updated_at,
            "description": d.description,
        }


@dataclass(frozen=True)
class SettingsSnapshot:
    """Every known key's effective value, from one read of the table. Values are checked when
    read, so one key stored by another version cannot stop the consumers of the others."""

    rows: dict[str, tuple[Any, ...]]

    def record(self, key: str) -> SettingRecord:
        setting_def(key)
        return _record(key, self.rows.get(key))

    def records(self) -> list[SettingRecord]:
        return [self.record(key) for key in DEFS]

    def value(self, key: str) -> Any:
        return self.record(key).value

    def writer_default_route(self) -> Route | None:
        spec = self.value("writer.defaultRoute")
        return None if spec is None else parse_route_spec(spec)

    def summary_route(self) -> Route | None:
        spec = self.value("summary.route")
        return None if spec is None else parse_route_spec(spec)

    def identity(self) -> str | None:
        return self.value("prompt.identity")  # type: ignore[no-any-return]

    def context_windows(self) -> dict[str, int]:
        return dict(self.value("context.windows"))

    def language(self) -> str:
        """The user's language: the setting, else the system locale (``assets.language``)."""
        return self.value("language") or language_from_locale()  # type: ignore[no-any-return]


def context_window_for(windows: dict[str, int], route: Route) -> int | None:
    """The user's context window override for ``route``'s model, or None (use the model's own)."""
    return windows.get(f"{route.provider}/{route.model}")


def conflict(key: str, expected: int, current: int) -> ConflictError:
    return ConflictError(
        "settings.conflict",
        f"setting {key} is at revision {current}, not at the expected revision {expected}; re-read and retry",
        details={"key": key, "expectedRevision": expected, "currentRevision": current},
    )


def _check_expected(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError("settings.invalid_revision", "the expected revision must be an integer ≥ 0", pointer="/expectedRevision")
    return value


def _record(key: str, row: tuple[Any, ...] | None) -> SettingRecord:
    d = DEFS[key]
    if row is None:
        return SettingRecord(key, d.default, 0, True, None)
    stored, revision, updated = row
    if stored is None:
        return SettingRecord(key, d.default, int(revision), True, updated)
    value = json.loads(stored)
    try:
        # A value stored by another version may not fit this one's type: say so, never guess.
        value = validate_setting(key, value)
    except ValidationError as exc:
        raise RpError(
            "settings.stored_invalid",
            f"the stored value of {key} is not valid here ({exc.message}); set a new value or `rp settings reset {key}`",
            pointer=exc.pointer,
            details={"key": key},
            problems=exc.problems,
        ) from None
    return SettingRecord(key, value, int(revision), False, updated)


class SettingsStore:
    """Typed, revision-checked access to the settings table of an opened store. The table is the
    settings' own (``core/settings_migrations.py``), made on first use when missing."""

    def __init__(self, events: EventStore) -> None:
        self._runner = AssetStore(events)

    async def _read(self, body: Any) -> Any:
        await self._runner.ensure(SETTINGS_OWNER, SETTINGS_MIGRATIONS)
        return await self._runner.read(body)

    async def _write_tx(self, body: Any) -> Any:
        await self._runner.ensure(SETTINGS_OWNER, SETTINGS_MIGRATIONS)
        return await self._runner.write(body)

    async def get(self, key: str) -> SettingRecord:
        setting_def(key)
        row = await self._read(lambda tx: tx.conn.fetchone("SELECT value, revision, updated_at FROM settings WHERE key=?", (key,)))
        return _record(key, row)

    async def snapshot(self) -> SettingsSnapshot:
        async def body(tx: AssetTx) -> list[tuple[Any, ...]]:
            return await tx.conn.fetchall("SELECT key, value, revision, updated_at FROM settings")

        return SettingsSnapshot({r[0]: tuple(r[1:]) for r in await self._read(body)})

    async def set(self, key: str, value: Any, *, expected_revision: int | None = None) -> SettingRecord:
        """Store ``value`` (validated first; nothing is written on any error). ``None`` on a key
        whose default is None is a reset."""
        expected = _check_expected(expected_revision)
        canonical = validate_setting(key, value)
        text = None if canonical is None else json.dumps(canonical, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return await self._write(key, text, expected)

    async def reset(self, key: str, *, expected_revision: int | None = None) -> SettingRecord:
        """Back to the default; the revision still grows."""
        expected = _check_expected(expected_revision)
        setting_def(key)
        return await self._write(key, None, expected)

    async def _write(self, key: str, text: str | None, expected: int | None) -> SettingRecord:
        async def body(tx: AssetTx) -> tuple[Any, ...]:
            # Make the row exist first, so both backends can lock it: PostgreSQL's FOR UPDATE
            # serialises racing writers of one key; SQLite's BEGIN IMMEDIATE already has.
            await tx.conn.execute(
                "INSERT INTO settings(key, value, revision, updated_at) VALUES (?, NULL, 0, ?) ON CONFLICT (key) DO NOTHING",
                (key, tx.now),
            )
            lock = " FOR UPDATE" if tx.dialect == "postgresql" else ""
            row = await tx.conn.fetchone(f"SELECT revision FROM settings WHERE key=?{lock}", (key,))
            assert row is not None
            current = int(row[0])
            if expected is not None and current != expected:
                raise conflict(key, expected, current)
            await tx.conn.execute(
                "UPDATE settings SET value=?, revision=?, updated_at=? WHERE key=? AND revision=?",
                (text, current + 1, tx.now, key, current),
            )
            return (text, current + 1, tx.now)

        return _record(key, await self._write_tx(body))

    async def dump(self) -> list[tuple[Any, ...]]:
        """Every row, raw and in key order (byte-identity tests)."""
        return [
            tuple(r)
            for r in await self._read(lambda tx: tx.conn.fetchall("SELECT key, value, revision, updated_at FROM settings ORDER BY key"))
        ]


async def read_settings(events: EventStore) -> SettingsSnapshot:
    return await SettingsStore(events).snapshot()


async def context_windows(events: EventStore) -> dict[str, int]:
    """The user's context window overrides, ``provider/model`` → tokens (empty: none)."""
    return (await read_settings(events)).context_windows()


__all__ = [
    "ALWAYS_ON",
    "DEFS",
    "FEATURES",
    "SettingDef",
    "SettingRecord",
    "SettingsSnapshot",
    "SettingsStore",
    "context_window_for",
    "context_windows",
    "parse_cli_value",
    "read_settings",
    "setting_def",
    "validate_setting",
]
