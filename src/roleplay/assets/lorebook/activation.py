"""Deterministic lorebook activation following SillyTavern's ``checkWorldInfo``.

:class:`LoreEngine` precompiles bound books once (keys deduplicated and indexed, see
:mod:`.matching`) and :meth:`LoreEngine.activate` runs one scan as a pure function of a
:class:`TurnInput`: no global RNG, no wall clock, no mutation. The algorithm, in ST's order:

1. **Scan order.** ``strategy="book_order"`` (default) takes books in binding order, each sorted by
   ``order`` descending — ST's shipped ``character_first`` when the character's book is bound
   first; ``"evenly"`` merges all books by ``order``. Ties follow ascending uid, as JavaScript
   iterates an object keyed by integer uids.
2. **Scan text** per entry: the newest ``scanDepth ?? depth (+ min-activation skew)`` messages,
   newest first, ``"\\x01" + msgs.join("\\n\\x01")`` (``"Name: text"`` lines when
   ``include_names``), then the entry's ``match*`` texts, caller injections (e.g. an Author's Note
   with scan enabled) and the recursion buffer. A depth ≤ 0 scans nothing (ST code, not ST docs).
3. **Per entry** in a sweep: skip if disabled, trigger/character filter, ``delay``, cooldown (not
   sticky), delay-until-recursion (level), exclude-recursion (recursion sweeps); ``@@activate`` /
   ``@@dont_activate``; forced; constant or active sticky fire; otherwise the first primary key
   that matches, then secondary keys by ``selectiveLogic`` (only when ``selective``), then our
   ``stateCondition`` gate (fail closed when the state is unavailable).
4. **Per sweep**: candidates sorted sticky first, then scan order; inclusion groups (sticky
   members win, cooldown/delay members dropped, optional scoring keeps the best-scoring members, a
   group already fired in an earlier sweep fires no more, ``groupOverride`` → highest ``order``,
   else a weighted roll); then the probability roll and the optional budget per candidate.
5. **Next sweep**: recursion when enabled and some activated entry lacks ``preventRecursion``
   (its content joins the recursion buffer); min-activations widens the depth; open
   delay-until-recursion levels run in turn (ST does this even with recursion off);
   ``max_recursion_steps`` caps the number of sweeps.

Randomness is replaced by sha256 rolls: the probability roll of an entry is derived from
``runId + bookId + entryId`` (one roll per run — ST never re-rolls a failed entry within a scan),
the inclusion-group roll from ``runId + group name + sweep``. Replaying a run gives the same result.

Budget: ST caps world info at a share of the context measured in tokens. Our spec has the Core
leave trimming to the model provider, so ``ScanSettings.budget`` defaults to ``None`` (no budget).
When set, it follows ST (``measure(previous recursion text) + measure(new contents) >= budget`` →
overflow, which also stops recursion) with the newer ``ignoreBudget`` rule: entries with it still
fire after an overflow, the others are skipped. ``measure`` defaults to ``len`` (characters).

Deliberate deviations from ST (all bugs or non-determinism there): the "group already activated"
check looks at group membership (ST compares the whole comma-separated ``group`` string); removing
an entry twice from the candidates is a no-op (ST's ``splice(indexOf(e), 1)`` would drop the last
candidate); only entries that really fired feed recursion after a budget overflow.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from roleplay.canonical import canonical_json
from roleplay.errors import Problem, ValidationError

from .matching import BLANK_WW, LITERAL, REGEX, MatcherTable, RegexGuard, TextIndex, js_trim
from .model import DEFAULT_WEIGHT, MATCH_SOURCES, LoreBook, LoreEntry, SelectiveLogic
from .report import ActivatedEntry, ActivationResult, EntryDecision
from .timed import EntryKey, TimedState, TimedView, check_timed_effects, record_activations

MAX_SCAN_DEPTH = 1000
_JOINER = "\n\x01"
NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3
_KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
_GROUP_SPLIT = re.compile(r",[\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*")


@dataclass(frozen=True)
class ScanSettings:
    """Global world-info settings. Defaults are ST's shipped ``settings.json`` values."""

    scan_depth: int = 2
    recursive: bool = True
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    max_recursion_steps: int = 0  # 0 = unlimited
    min_activations: int = 0
    min_activations_depth_max: int = 0
    include_names: bool = True
    strategy: str = "book_order"  # or "evenly"
    budget: int | None = None
    regex_timeout_seconds: float = 0.05
    regex_total_seconds: float = 0.5

    def __post_init__(self) -> None:
        if self.strategy not in ("book_order", "evenly"):
            raise ValidationError("lore.settings.invalid", f"unknown strategy {self.strategy!r}", pointer="/strategy")
        for name in ("scan_depth", "max_recursion_steps", "min_activations", "min_activations_depth_max"):
            if getattr(self, name) < 0:
                raise ValidationError("lore.settings.invalid", f"{name} must be >= 0", pointer=f"/{name}")


@dataclass(frozen=True)
class ChatMessage:
    text: str
    name: str | None = None


@dataclass(frozen=True)
class GlobalScanData:
    """Texts an entry may also scan through its ``match*`` flags."""

    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""


@dataclass(frozen=True)
class TurnInput:
    run_id: str
    messages: Sequence[ChatMessage | str] = ()  # chronological: oldest first
    chat_length: int | None = None  # messages in the whole chat (timed effects); default len(messages)
    timed_state: TimedState = field(default_factory=TimedState)
    state_condition: Callable[[str], bool | None] | None = None
    global_scan_data: GlobalScanData = field(default_factory=GlobalScanData)
    injections: Sequence[str] = ()
    generation_type: str = "normal"
    character_name: str | None = None
    character_tags: Sequence[str] | None = None
    forced: frozenset[EntryKey] = frozenset()
    substitute: Callable[[str], str] | None = None  # macro expansion for keys and contents
    dry_run: bool = False


def unit_roll(*parts: str | int) -> float:
    """Uniform number in [0, 1) derived from ``parts`` with sha256 (no global RNG)."""
    digest = hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """ST ``parseDecorators``: leading ``@@`` lines; ``@@@`` lines are fallbacks used only right
    after an unknown decorator. Returns (decorators, content without them)."""
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    found: list[str] = []
    fallback = False
    body = content
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            body = "\n".join(lines[i:])
            break
        if line.startswith("@@@") and not fallback:
            continue
        name = line[1:] if line.startswith("@@@") else line
        if any(name.startswith(k) for k in _KNOWN_DECORATORS):
            found.append(name)
            fallback = False
        else:
            fallback = True
    return tuple(found), body


@dataclass(frozen=True)
class _Compiled:
    index: int
    book_index: int
    key: EntryKey
    entry: LoreEntry
    decorators: tuple[str, ...]
    body: str
    primary: tuple[tuple[str, int | None], ...]  # (raw key, matcher of the trimmed key)
    secondary: tuple[tuple[str, int | None], ...]
    score_primary: tuple[int, ...]  # matchers of the raw (untrimmed) keys, for group scoring
    score_secondary: tuple[int, ...]
    groups: tuple[str, ...]
    hay: int  # index of the scan-text group (depth override + match sources)
    dynamic: bool  # some key contains a macro, so it must be substituted per turn


@dataclass
class _HayGroup:
    scan_depth: int | None
    sources: tuple[str, ...]
    by_matcher: dict[int, list[int]] = field(default_factory=dict)
    regex_ids: list[int] = field(default_factory=list)
    special_ids: list[int] = field(default_factory=list)


class LoreEngine:
    """Compiled, immutable view of the bound books; call :meth:`activate` once per turn."""

    def __init__(self, books: Sequence[LoreBook], settings: ScanSettings | None = None, *, measure: Callable[[str], int] = len) -> None:
        self.settings = settings or ScanSettings()
        self.measure = measure
        self.books = tuple(books)
        ids = [b.id for b in self.books]
        if len(set(ids)) != len(ids):
            raise ValidationError("lore.books.duplicate", "the same book id is bound twice", pointer="")
        self.table = MatcherTable()
        self.entries = self._compile()
        self.table.freeze()
        self.by_key = {c.key: c for c in self.entries}
        self.entry_map = {c.key: c.entry for c in self.entries}
        levels = {c.entry.delay_until_recursion for c in self.entries if c.entry.delay_until_recursion}
        self.delay_levels = tuple(sorted(levels))
        self.always = tuple(c.index for c in self.entries if c.entry.constant or c.decorators)
        self.dynamic = tuple(c.index for c in self.entries if c.dynamic)
        self.scan_order = tuple(c.key for c in self.entries)
        self.delay_keys = tuple(c.key for c in self.entries if c.entry.delay)

    # ------------------------------------------------------------------ compilation

    def _compile(self) -> tuple[_Compiled, ...]:
        s = self.settings
        per_book = []
        for bi, book in enumerate(self.books):
            ordered = sorted(book.entries, key=lambda e: (-e.order, e.uid_sort_key()))
            per_book.append([(bi, book, e) for e in ordered])
        if s.strategy == "evenly":
            flat = sorted((x for b in per_book for x in b), key=lambda x: (-x[2].order, x[0], x[2].uid_sort_key()))
        else:
            flat = [x for b in per_book for x in b]
        self.hays: list[_HayGroup] = []
        hay_ids: dict[tuple[int | None, tuple[str, ...]], int] = {}
        out = []
        for index, (bi, book, e) in enumerate(flat):
            cs = s.case_sensitive if e.case_sensitive is None else e.case_sensitive
            ww = s.match_whole_words if e.match_whole_words is None else e.match_whole_words

            def trimmed(keys: tuple[str, ...]) -> tuple[tuple[str, int | None], ...]:
                return tuple((k, self.table.matcher_for(js_trim(k), cs, ww) if k else None) for k in keys)

            sources = tuple(name for name in MATCH_SOURCES if name in e.match_sources)
            hay_key = (e.scan_depth, sources)
            if hay_key not in hay_ids:
                hay_ids[hay_key] = len(self.hays)
                self.hays.append(_HayGroup(e.scan_depth, sources))
            decorators, body = parse_decorators(e.content)
            primary = trimmed(e.keys)
            c = _Compiled(
                index=index,
                book_index=bi,
                key=(book.id, e.id),
                entry=e,
                decorators=decorators,
                body=body,
                primary=primary,
                secondary=trimmed(e.secondary_keys),
                score_primary=tuple(self.table.matcher_for(k, cs, ww) for k in e.keys),
                score_secondary=tuple(self.table.matcher_for(k, cs, ww) for k in e.secondary_keys),
                groups=tuple(g for g in _GROUP_SPLIT.split(e.group) if g) if e.group else (),
                hay=hay_ids[hay_key],
                dynamic=any("{{" in k for k in (*e.keys, *e.secondary_keys)),
            )
            group = self.hays[c.hay]
            for _raw, mid in primary:
                if mid is None:
                    continue
                group.by_matcher.setdefault(mid, []).append(index)
                kind = self.table.matchers[mid].kind
                if kind == REGEX and mid not in group.regex_ids:
                    group.regex_ids.append(mid)
                elif (kind == BLANK_WW or (kind == LITERAL and not self.table.matchers[mid].text)) and mid not in group.special_ids:
                    group.special_ids.append(mid)
            out.append(c)
        return tuple(out)

    # ------------------------------------------------------------------ activation

    def activate(self, turn: TurnInput, *, use_automaton: bool = True) -> ActivationResult:
        return _Scan(self, turn, use_automaton).run()


class _Scan:
    """State of one ``activate`` call (never shared between calls)."""

    def __init__(self, engine: LoreEngine, turn: TurnInput, use_automaton: bool) -> None:
        self.e, self.turn, self.s = engine, turn, engine.settings
        self.use_automaton = use_automaton
        self.guard = RegexGuard(per_search_seconds=self.s.regex_timeout_seconds, total_seconds=self.s.regex_total_seconds)
        # ST's depth buffer: the newest MAX_SCAN_DEPTH messages, newest first. Read by index from
        # the end of the chat as a scan first needs them (``_depth_texts``), usually a few: a long
        # chat is neither copied nor trimmed message by message at every turn.
        self._messages = turn.messages
        self.message_count = len(turn.messages)
        self._trimmed: list[str] = []
        # ST keeps holes for empty messages but drops trailing ones (array length semantics).
        kept = min(self.message_count, MAX_SCAN_DEPTH)
        while kept and self._text(kept - 1) == "":
            kept -= 1
        self._buffer_length = kept
        self.chat_length = turn.chat_length if turn.chat_length is not None else len(turn.messages)
        self.view: TimedView = check_timed_effects(
            turn.timed_state, engine.entry_map, self.chat_length, dry_run=turn.dry_run, delay_keys=engine.delay_keys
        )
        self.skew = 0
        self.recurse: list[str] = []
        self.state = INITIAL
        self.indexes: dict[tuple[Any, ...], TextIndex] = {}
        self.decisions: dict[EntryKey, EntryDecision] = {}
        self.activated: dict[EntryKey, ActivatedEntry] = {}
        self.failed_probability: set[int] = set()
        self.state_cache: dict[str, bool | None] = {}
        self.dynamic_matchers: dict[tuple[str, bool, bool], int] = {}
        self.diagnostics: list[Problem] = []

    # --- scan text -------------------------------------------------------------------------

    def text_index(self, c: _Compiled) -> TextIndex:
        return self.hay_index(c.hay)

    def hay_index(self, hay_id: int) -> TextIndex:
        """Index of the scan text for a hay group in the current sweep. The part without
        recursion is cached per (depth, sources) and each recursion chunk once, so a recursion
        sweep only scans the new chunk (see :class:`TextIndex` for why that is exact)."""
        hay = self.e.hays[hay_id]
        depth = hay.scan_depth if hay.scan_depth is not None else self.s.scan_depth + self.skew
        depth = min(depth, MAX_SCAN_DEPTH) if depth > 0 else 0
        chunks = len(self.recurse) if self.state != MIN_ACTIVATIONS and depth > 0 else 0
        key = (depth, hay.sources, chunks)
        found = self.indexes.get(key)
        if found is not None:
            return found
        if chunks == 0:
            found = self._index(self._base_text(depth, hay.sources))
        else:
            parts = [self.hay_base(depth, hay.sources)] + [self._chunk(i) for i in range(chunks)]
            text = _JOINER.join(p.variants[True] for p in parts)
            found = TextIndex(self.e.table, text, self.guard, use_automaton=self.use_automaton, parts=parts)
        self.indexes[key] = found
        return found

    def hay_base(self, depth: int, sources: tuple[str, ...]) -> TextIndex:
        key = (depth, sources, 0)
        if key not in self.indexes:
            self.indexes[key] = self._index(self._base_text(depth, sources))
        return self.indexes[key]

    def _chunk(self, i: int) -> TextIndex:
        key = ("chunk", i)
        if key not in self.indexes:
            self.indexes[key] = self._index(self.recurse[i])
        return self.indexes[key]

    def _text(self, index: int) -> str:
        """The text of the ``index``-th newest message (0: the newest)."""
        return _message_text(self._messages[self.message_count - 1 - index], self.s.include_names)

    def _depth_texts(self, depth: int) -> list[str]:
        """The trimmed texts of the newest ``depth`` messages (fewer when the buffer is shorter),
        newest first: ST's ``depthBuffer.slice(0, depth)``."""
        depth = min(depth, self._buffer_length)
        trimmed = self._trimmed
        while len(trimmed) < depth:
            trimmed.append(js_trim(self._text(len(trimmed))))
        return trimmed[:depth]

    def _index(self, text: str) -> TextIndex:
        return TextIndex(self.e.table, text, self.guard, use_automaton=self.use_automaton)

    def _base_text(self, depth: int, sources: tuple[str, ...]) -> str:
        """Messages, ``match*`` texts and injections; ST returns '' for depth <= 0."""
        if depth <= 0:
            return ""
        parts = ["\x01" + _JOINER.join(self._depth_texts(depth))]
        data = self.turn.global_scan_data
        parts.extend(getattr(data, name) for name in sources if getattr(data, name))
        if self.turn.injections:
            parts.append(_JOINER.join(self.turn.injections))
        return _JOINER.join(parts)

    # --- main loop -------------------------------------------------------------------------

    def run(self) -> ActivationResult:
        levels = list(self.e.delay_levels)
        self.level = levels.pop(0) if levels else 0
        all_text = ""
        overflowed = False
        sweeps = 0
        while self.state:
            if self.s.max_recursion_steps and self.s.max_recursion_steps <= sweeps:
                break
            sweeps += 1
            candidates = []
            for index in self._candidate_indexes():
                c = self.e.entries[index]
                found = self._consider(c, sweeps)
                if found is not None:
                    candidates.append((c, *found))
            candidates.sort(key=lambda x: (x[0].key not in self.view.sticky, x[0].index))
            candidates = self._inclusion_groups(candidates, sweeps)
            fired, overflowed = self._roll_and_budget(candidates, sweeps, all_text, overflowed)
            for_recursion = [a for c, a in fired if not c.entry.prevent_recursion]
            nxt = NONE
            if self.s.recursive and not overflowed and for_recursion:
                nxt = RECURSION
            if self.s.recursive and not overflowed and self.state == MIN_ACTIVATIONS and self.recurse:
                nxt = RECURSION
            if not nxt and not overflowed and self.s.min_activations > 0 and len(self.activated) < self.s.min_activations:
                depth = self.s.scan_depth + self.skew
                over = (self.s.min_activations_depth_max > 0 and depth > self.s.min_activations_depth_max) or depth > self.message_count
                if not over:
                    nxt = MIN_ACTIVATIONS
                    self.skew += 1
            if nxt == NONE and levels:
                nxt = RECURSION
                self.level = levels.pop(0)
            self.state = nxt
            if self.state:
                text = "\n".join(a.content for a in for_recursion)
                if text:
                    self.recurse.append(text)
                    all_text = text + "\n" + all_text
        activated = list(self.activated.values())
        new_state = record_activations(
            self.view, [(a_key, self.e.entry_map[a_key]) for a_key in self.activated], self.chat_length, dry_run=self.turn.dry_run
        )
        return ActivationResult(
            activated=tuple(activated),
            timed_state=new_state,
            diagnostics=tuple(self.diagnostics + self.guard.diagnostics),
            sweeps=sweeps,
            budget_overflowed=overflowed,
            decisions=dict(self.decisions),
            scan_order=self.e.scan_order,
            fallback=self._explain_untouched,
        )

    def _candidate_indexes(self) -> list[int]:
        """Entries worth a full look this sweep: those with a primary-key hit in their scan text,
        plus entries that can fire without keys. Everything else would end in ``no_match``."""
        found: set[int] = set(self.e.always)
        if self.turn.substitute is not None:
            found.update(self.e.dynamic)
        found.update(self.e.by_key[k].index for k in self.turn.forced if k in self.e.by_key)
        found.update(self.e.by_key[k].index for k in self.view.sticky if k in self.e.by_key)
        for hay_id, hay in enumerate(self.e.hays):
            if not hay.by_matcher:
                continue
            hits = self.hay_index(hay_id).indexed_hits(hay.regex_ids, hay.special_ids)
            for mid in hits:
                found.update(hay.by_matcher.get(mid, ()))
        return sorted(i for i in found if i not in self.failed_probability and self.e.entries[i].key not in self.activated)

    # --- one entry ---------------------------------------------------------------------------

    def _decide(self, c: _Compiled, reason: str, sweep: int, *, activated: bool = False, **details: Any) -> None:
        self.decisions[c.key] = EntryDecision(c.key[0], c.key[1], activated, reason, sweep, details)

    def _gate(self, c: _Compiled, state: int) -> str | None:
        """Checks that come before any key; returns a skip reason."""
        e, key = c.entry, c.key
        sticky = key in self.view.sticky
        if e.disabled:
            return "disabled"
        if e.triggers and self.turn.generation_type not in e.triggers:
            return "trigger"
        f = e.character_filter
        if f is not None:
            if f.names and (self.turn.character_name in f.names) == f.is_exclude:
                return "character_filter"
            if f.tags and self.turn.character_tags is not None:
                if any(t in f.tags for t in self.turn.character_tags) == f.is_exclude:
                    return "character_filter"
        if key in self.view.delay:
            return "delay"
        if key in self.view.cooldown and not sticky:
            return "cooldown"
        if e.delay_until_recursion and not sticky:
            if state != RECURSION or e.delay_until_recursion > self.level:
                return "delay_until_recursion"
        if state == RECURSION and self.s.recursive and e.exclude_recursion and not sticky:
            return "exclude_recursion"
        return None

    def _consider(self, c: _Compiled, sweep: int) -> tuple[str, dict[str, Any]] | None:
        skip = self._gate(c, self.state)
        if skip is not None:
            gate_details: dict[str, Any] = {"level": self.level} if skip == "delay_until_recursion" else {}
            self._decide(c, skip, sweep, **gate_details)
            return None
        how: str | None = None
        details: dict[str, Any] = {}
        if "@@activate" in c.decorators:
            how = "decorator"
        elif "@@dont_activate" in c.decorators:
            self._decide(c, "dont_activate", sweep)
            return None
        elif c.key in self.turn.forced:
            how = "forced"
        elif c.entry.constant:
            how = "constant"
        elif c.key in self.view.sticky:
            how = "sticky"
        elif not c.entry.keys:
            self._decide(c, "no_keys", sweep)
            return None
        else:
            index = self.text_index(c)
            matched = next((raw for raw, mid in self._keys(c, c.primary) if index.matches(mid)), None)
            if matched is None:
                self._decide(c, "no_match", sweep, **self._guard_details(c))
                return None
            how, details = "key", {"key": matched}
            if c.entry.selective and c.secondary:
                ok, sec = self._secondary(c, index)
                details["secondary"] = sec
                if not ok:
                    self._decide(c, "secondary", sweep, **details)
                    return None
        if c.entry.state_condition is not None:
            verdict = self._state(c.entry.state_condition)
            details["stateCondition"] = c.entry.state_condition
            if verdict is not True:
                self._decide(c, "state_unavailable" if verdict is None else "state_condition", sweep, **details)
                return None
        return how, details

    def _keys(self, c: _Compiled, keys: tuple[tuple[str, int | None], ...]) -> list[tuple[str, int]]:
        sub = self.turn.substitute
        if sub is None or not c.dynamic:
            return [(raw, mid) for raw, mid in keys if mid is not None]
        out = []
        for raw, _mid in keys:
            text = sub(raw) if "{{" in raw else raw
            if text:
                out.append((raw, self._dynamic_matcher(c, js_trim(text))))
        return out

    def _dynamic_matcher(self, c: _Compiled, text: str) -> int:
        cs = self.s.case_sensitive if c.entry.case_sensitive is None else c.entry.case_sensitive
        ww = self.s.match_whole_words if c.entry.match_whole_words is None else c.entry.match_whole_words
        key = (text, cs, ww)
        if key not in self.dynamic_matchers:
            self.dynamic_matchers[key] = self.e.table.matcher_for(text, cs, ww)
        return self.dynamic_matchers[key]

    def _secondary(self, c: _Compiled, index: TextIndex) -> tuple[bool, dict[str, Any]]:
        logic = c.entry.selective_logic
        matched: list[str] = []
        missed: list[str] = []
        result = False
        for raw, mid in self._keys(c, c.secondary):
            hit = index.matches(mid)
            (matched if hit else missed).append(raw)
            if (logic == SelectiveLogic.AND_ANY and hit) or (logic == SelectiveLogic.NOT_ALL and not hit):
                result = True
                break
        else:
            if logic == SelectiveLogic.NOT_ANY:
                result = not matched
            elif logic == SelectiveLogic.AND_ALL:
                result = not missed
        name = SelectiveLogic(logic).name if logic in SelectiveLogic._value2member_map_ else str(logic)
        return result, {"logic": name, "matched": matched, "missed": missed, "passed": result}

    def _state(self, expr: str) -> bool | None:
        if expr not in self.state_cache:
            fn = self.turn.state_condition
            self.state_cache[expr] = None if fn is None else fn(expr)
        return self.state_cache[expr]

    def _guard_details(self, c: _Compiled) -> dict[str, Any]:
        """Regex keys of this entry that the guard cut off (they counted as not matching)."""
        cut = [{"key": raw, "code": self.guard.cut[mid]} for raw, mid in c.primary if mid is not None and mid in self.guard.cut]
        return {"regexGuard": cut} if cut else {}

    # --- groups, probability, budget -----------------------------------------------------------

    def _inclusion_groups(
        self, cands: list[tuple[_Compiled, str, dict[str, Any]]], sweep: int
    ) -> list[tuple[_Compiled, str, dict[str, Any]]]:
        groups: dict[str, list[_Compiled]] = {}
        for c, _how, _d in cands:
            for g in c.groups:
                groups.setdefault(g, []).append(c)
        if not groups:
            return cands
        removed: dict[int, tuple[str, dict[str, Any]]] = {}

        def remove(c: _Compiled, reason: str, **details: Any) -> None:
            removed.setdefault(c.index, (reason, details))

        has_sticky: dict[str, bool] = {}
        for name, members in groups.items():
            sticky = [c for c in members if c.key in self.view.sticky]
            has_sticky[name] = bool(sticky)
            for c in members:
                if sticky and c not in sticky:
                    remove(c, "group_sticky", group=name)
                if c.key in self.view.cooldown or c.key in self.view.delay:
                    remove(c, "group_cooldown", group=name)
        for name, members in groups.items():
            scored = [
                c for c in members if (c.entry.use_group_scoring if c.entry.use_group_scoring is not None else self.s.use_group_scoring)
            ]
            if (not self.s.use_group_scoring and not any(c.entry.use_group_scoring for c in members)) or has_sticky[name]:
                continue
            scores = {c.index: self._score(c) for c in members}
            best = max(scores.values())
            for c in scored:
                if scores[c.index] < best:
                    remove(c, "group_score", group=name, score=scores[c.index], best=best)
            groups[name] = [c for c in members if c not in scored or scores[c.index] >= best]
        for name, members in groups.items():
            if has_sticky[name]:
                continue
            if any(name in self.e.by_key[k].groups for k in self.activated):
                for c in members:
                    remove(c, "group_already_active", group=name)
                continue
            if len(members) <= 1:
                continue
            prio = sorted((c for c in members if c.entry.group_override), key=lambda c: -c.entry.order)
            if prio:
                for c in members:
                    if c is not prio[0]:
                        remove(c, "group_priority", group=name, winner=prio[0].key[1])
                continue
            weights = [DEFAULT_WEIGHT if c.entry.group_weight is None else c.entry.group_weight for c in members]
            total = sum(weights)
            roll = unit_roll("group", self.turn.run_id, name, sweep) * total
            acc, winner = 0.0, None
            for c, w in zip(members, weights):
                acc += w
                if roll <= acc:
                    winner = c
                    break
            if winner is None:
                continue
            for c in members:
                if c is not winner:
                    remove(c, "group_roll", group=name, winner=winner.key[1], roll=roll, totalWeight=total)
        for c, _how, _d in cands:
            if c.index in removed:
                reason, details = removed[c.index]
                self._decide(c, reason, sweep, **details)
        return [x for x in cands if x[0].index not in removed]

    def _score(self, c: _Compiled) -> int:
        """ST ``getScore``: primary hits, plus secondary hits for AND_ANY (all or nothing for
        AND_ALL). Raw keys, no macro substitution, as in ST."""
        if not c.score_primary:
            return 0
        index = self.text_index(c)
        primary = sum(1 for mid in c.score_primary if index.matches(mid))
        secondary = sum(1 for mid in c.score_secondary if index.matches(mid))
        if c.score_secondary:
            if c.entry.selective_logic == SelectiveLogic.AND_ANY:
                return primary + secondary
            if c.entry.selective_logic == SelectiveLogic.AND_ALL:
                return primary + secondary if secondary == len(c.score_secondary) else primary
        return primary

    def _roll_and_budget(
        self, cands: list[tuple[_Compiled, str, dict[str, Any]]], sweep: int, all_text: str, overflowed: bool
    ) -> tuple[list[tuple[_Compiled, ActivatedEntry]], bool]:
        fired = []
        new_content = ""
        for c, how, details in cands:
            e = c.entry
            if e.use_probability and e.probability != 100 and c.key not in self.view.sticky:
                roll = unit_roll("probability", self.turn.run_id, c.key[0], c.key[1]) * 100
                details = {**details, "roll": roll, "probability": e.probability}
                if not roll <= e.probability:
                    self.failed_probability.add(c.index)
                    self._decide(c, "probability", sweep, **details)
                    continue
            content = self.turn.substitute(c.body) if self.turn.substitute else c.body
            if self.s.budget is not None:
                new_content += content + "\n"
                if overflowed or self.e.measure(all_text) + self.e.measure(new_content) >= self.s.budget:
                    overflowed = True
                    if not e.ignore_budget:
                        self._decide(c, "budget", sweep, budget=self.s.budget, **details)
                        continue
                    details = {**details, "ignoredBudget": True}
            a = ActivatedEntry(c.key[0], c.key[1], c.book_index, e, content, how, sweep, details)
            self.activated[c.key] = a
            self._decide(c, how, sweep, activated=True, **details)
            fired.append((c, a))
        return fired, overflowed

    def _explain_untouched(self, key: EntryKey) -> EntryDecision:
        c = self.e.by_key[key]  # KeyError for unknown entries, as documented on explain()
        reason = self._gate(c, INITIAL) or ("no_keys" if not c.entry.keys else "no_match")
        return EntryDecision(key[0], key[1], False, reason, 0, self._guard_details(c) if reason == "no_match" else {})


def _message_text(m: ChatMessage | str, include_names: bool) -> str:
    if isinstance(m, str):
        return m
    return f"{m.name}: {m.text}" if include_names and m.name else m.text
