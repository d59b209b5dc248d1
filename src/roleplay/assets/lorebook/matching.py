"""Key matching with SillyTavern's ``matchKeys`` semantics, precompiled and indexed.

ST's rule for one key against the scan text (``WorldInfoBuffer.matchKeys``):

1. a ``/pattern/flags`` key that compiles is a regex, tested on the *raw* text; case and
   whole-word settings do not apply (see :mod:`.jsregex`);
2. otherwise text and key are lower-cased unless the entry is case sensitive;
3. without whole-words the key matches as a substring;
4. with whole-words a key containing whitespace still matches as a substring, and a single-word
   key must be surrounded by ``(?:^|\\W)`` and ``(?:$|\\W)``. JavaScript's ``\\W`` (no ``u`` flag) is
   ASCII-only: every character outside ``[A-Za-z0-9_]`` counts as a separator. Consequences that
   we reproduce exactly: a CJK key inside CJK text matches (CJK characters are separators), a CJK
   key glued to an ASCII letter (``a国王``) does not, and ``café`` does not match ``cafés``. This
   is not quite ``\\b``: a key that starts with punctuation (``#tag``) matches after a space.

Indexing: keys are deduplicated into :class:`Matcher` objects once per compiled lore set. For one
scan text, single-word keys made only of ASCII word characters are answered by set membership
in the text's maximal ``[A-Za-z0-9_]+`` runs (exactly the whole-word rule for such keys); every
other plain key is found in one Aho-Corasick pass (``pyahocorasick`` when installed, otherwise a
direct ``str.find`` scan with the same results); regex keys run once per text under a
:class:`RegexGuard`, and so does their literal prefilter: it is a search over the same text, so it
obeys the same text-length limit and time budget. It has its own automaton, run on the first regex
key's behalf inside the guard; the literals it has not answered when the budget ends let their
regexes through to the guard, which cuts them.

Both automata run in slices (:func:`_automaton_pass`) so that they can stop: a long repetitive key
or literal (``abab…``) makes ``pyahocorasick`` walk a long chain of partial matches at every
position of a text that repeats it (seconds for 2 MB, with or without a match). When the measured
pace says one linear ``in``/``find`` per key would finish sooner, the pass stops and the keys it has
not found are looked for that way; the answers are the same either way.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from roleplay.errors import Problem

from .jsregex import JsRegex, parse_regex_key

try:  # optional accelerator; results are identical without it (tests compare both paths)
    import ahocorasick as _ahocorasick
except ImportError:  # pragma: no cover - exercised by forcing the fallback in tests
    _ahocorasick = None

_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
_JS_WS = "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_WS_RE = re.compile(f"[{re.escape(_JS_WS)}]")
_BLANK_WW = re.compile(r"(?:\A|[^A-Za-z0-9_])(?:\Z|[^A-Za-z0-9_])")

REGEX, WORD, LITERAL, LITERAL_WW, BLANK_WW = "regex", "word", "literal", "literal-ww", "blank-ww"
SLICE_CHARS = 8_192  # automata run in slices this long, checking their pace in between
IN_SECONDS_PER_CHAR = 1e-9  # rough cost of one linear ``in`` per text character (C, two-way search)


def js_trim(text: str) -> str:
    """``String.prototype.trim``: JavaScript whitespace and line terminators only."""
    return text.strip(_JS_WS)


def js_lower(text: str) -> str:
    """``toLowerCase``; Python's full mapping (incl. final sigma, ``İ``) agrees with JavaScript."""
    return text.lower()


@dataclass(frozen=True)
class Matcher:
    id: int
    kind: str
    text: str  # transformed key (lower-cased when case-insensitive); regex source for REGEX
    case_sensitive: bool
    regex: JsRegex | None = None


def classify_key(key: str, case_sensitive: bool, whole_words: bool) -> tuple[str, str, JsRegex | None]:
    """(kind, transformed text, regex) for one key, following ``matchKeys`` step by step."""
    rx = parse_regex_key(key)
    if rx is not None:
        return REGEX, key, rx
    text = key if case_sensitive else js_lower(key)
    if not whole_words or _JS_WS_RE.search(text):
        return LITERAL, text, None
    if text == "":
        return BLANK_WW, text, None
    if all(c in _WORD_CHARS for c in text):
        return WORD, text, None
    return LITERAL_WW, text, None


class MatcherTable:
    """Deduplicated matchers plus the per-text indexes built from them. Immutable after
    :meth:`freeze`; matchers added later (macro-substituted keys) are evaluated directly."""

    def __init__(self) -> None:
        self.matchers: list[Matcher] = []
        self._by_key: dict[tuple[str, str, bool], int] = {}
        self._frozen = 0
        self.word_index: dict[bool, dict[str, list[int]]] = {True: {}, False: {}}
        self.literal_ids: dict[bool, list[int]] = {True: [], False: []}
        self.spanning_ids: dict[bool, list[int]] = {True: [], False: []}
        self.automata: dict[bool, Any] = {}
        self.literal_max: dict[bool, int] = {True: 0, False: 0}  # longest key: slice overlap
        self.required_ids: dict[bool, list[int]] = {True: [], False: []}  # regex keys with a literal
        self.required_automata: dict[bool, Any] = {}
        self.required_max: dict[bool, int] = {True: 0, False: 0}  # longest literal: slice overlap

    def matcher_for(self, key: str, case_sensitive: bool, whole_words: bool) -> int:
        kind, text, rx = classify_key(key, case_sensitive, whole_words)
        # A regex ignores case/whole-word settings, so one matcher serves every entry using it.
        dedupe = (kind, text, case_sensitive if kind != REGEX else True)
        found = self._by_key.get(dedupe)
        if found is not None:
            return found
        mid = len(self.matchers)
        self.matchers.append(Matcher(mid, kind, text, dedupe[2], rx))
        self._by_key[dedupe] = mid
        return mid

    def freeze(self) -> None:
        """Build the word index and the Aho-Corasick automata for every matcher added so far.
        Regex keys' required literals get automata of their own, run under the :class:`RegexGuard`."""
        for m in self.matchers[self._frozen :]:
            if m.kind == WORD:
                self.word_index[m.case_sensitive].setdefault(m.text, []).append(m.id)
            elif literal_text(m):
                self.literal_ids[literal_cs(m)].append(m.id)
                self.literal_max[literal_cs(m)] = max(self.literal_max[literal_cs(m)], len(literal_text(m)))
                if is_spanning(literal_text(m)):
                    self.spanning_ids[literal_cs(m)].append(m.id)
            elif required_text(m):
                self.required_ids[literal_cs(m)].append(m.id)
                self.required_max[literal_cs(m)] = max(self.required_max[literal_cs(m)], len(required_text(m)))
        self._frozen = len(self.matchers)
        self.automata, self.required_automata = {}, {}
        if _ahocorasick is None:
            return
        for cs, ids in self.literal_ids.items():
            if ids:
                self.automata[cs] = self._automaton(ids, literal_text)
        for cs, ids in self.required_ids.items():
            if ids:
                self.required_automata[cs] = self._automaton(ids, required_text)

    def _automaton(self, ids: list[int], text_of: Callable[[Matcher], str]) -> Any:
        automaton = _ahocorasick.Automaton()
        grouped: dict[str, list[int]] = {}
        for mid in ids:
            grouped.setdefault(text_of(self.matchers[mid]), []).append(mid)
        for text, mids in grouped.items():
            automaton.add_word(text, (len(text), tuple(mids)))
        automaton.make_automaton()
        return automaton

    def is_indexed(self, mid: int) -> bool:
        return mid < self._frozen


@dataclass
class RegexGuard:
    """Bounds regex work for one activation. Each search gets at most ``per_search_seconds``
    (the ``regex`` engine aborts it), all searches together ``total_seconds``, and texts longer
    than ``max_text_chars`` are not searched. A key that is cut off counts as *not matching* and
    leaves a diagnostic; this is the only timing-dependent outcome in activation, and it only
    affects keys that were already pathological."""

    per_search_seconds: float = 0.05
    total_seconds: float = 0.5
    max_text_chars: int = 2_000_000
    spent: float = 0.0
    diagnostics: list[Problem] = field(default_factory=list)
    cut: dict[int, str] = field(default_factory=dict)  # matcher id -> diagnostic code
    _exhausted: bool = False

    def search(self, m: Matcher, text: str, has_literal: Callable[[Matcher], bool] | None = None) -> bool:
        """Whether regex matcher ``m`` matches ``text``. With ``has_literal`` (whether ``text``
        contains the regex's required literal), the literal is looked for first and an absent
        literal answers "no" without running the regex; that look counts as regex work."""
        if m.id in self.cut:
            return False
        assert m.regex is not None
        if len(text) > self.max_text_chars:
            return self._cut(
                m,
                "lore.regex.text_too_long",
                f"regex key {m.text!r} skipped: scan text of {len(text)} characters exceeds {self.max_text_chars}",
            )
        if self.total_seconds - self.spent <= 0:
            return self._exhaust(m)
        started = time.perf_counter()
        try:
            if has_literal is not None and m.regex.required is not None and not has_literal(m):
                return False
            timeout = min(self.per_search_seconds, self.total_seconds - self.spent - (time.perf_counter() - started))
            if timeout <= 0:
                return self._exhaust(m)
            pattern = m.regex.compiled
            found = pattern.match(text, timeout=timeout) if m.regex.sticky else pattern.search(text, timeout=timeout)
        except TimeoutError:
            return self._cut(
                m,
                "lore.regex.timeout",
                f"regex key {m.text!r} was stopped after {timeout:.3f}s (catastrophic backtracking?); it counts as not matching",
            )
        finally:
            self.spent += time.perf_counter() - started
        return found is not None

    def _exhaust(self, m: Matcher) -> bool:
        if not self._exhausted:
            self._exhausted = True
            self.diagnostics.append(
                Problem(
                    "lore.regex.budget_exhausted",
                    f"regex time budget of {self.total_seconds}s used up; remaining regex keys count as not matching",
                )
            )
        self.cut[m.id] = "lore.regex.budget_exhausted"
        return False

    def _cut(self, m: Matcher, code: str, message: str) -> bool:
        self.cut[m.id] = code
        self.diagnostics.append(Problem(code, message, details={"key": m.text}))
        return False


class TextIndex:
    """Answers "does matcher X match this scan text?" with memoisation; built lazily per text.

    With ``parts`` the text is ``"\n\x01".join`` of the parts' texts (the scan text plus
    recursion chunks). Word runs and plain keys cannot cross that separator (it is made of
    non-word characters and trimmed keys only contain it if they contain a newline or ``\x01``),
    so their results are the union of the parts' results, which are cached across sweeps; regex
    keys, blank keys and keys containing a newline or ``\x01`` are evaluated on the whole text."""

    def __init__(
        self, table: MatcherTable, text: str, guard: RegexGuard, *, use_automaton: bool = True, parts: list[TextIndex] | None = None
    ) -> None:
        self.table, self.guard, self.use_automaton = table, guard, use_automaton
        self.parts = parts or []
        self.variants = {True: text}
        self._words: dict[bool, set[str]] = {}
        self._literal_hits: dict[bool, set[int]] = {}
        self._memo: dict[int, bool] = {}
        self._required_hits: dict[bool, set[int]] = {}

    def _variant(self, cs: bool) -> str:
        if cs not in self.variants:
            self.variants[cs] = js_lower(self.variants[True])
        return self.variants[cs]

    def words(self, cs: bool) -> set[str]:
        if cs not in self._words:
            if self.parts:
                self._words[cs] = set().union(*(p.words(cs) for p in self.parts))
            else:
                self._words[cs] = set(_WORD_RUN.findall(self._variant(cs)))
        return self._words[cs]

    def literal_hits(self, cs: bool) -> set[int]:
        hits: set[int]
        if cs not in self._literal_hits and self.parts:
            hits = set().union(*(p.literal_hits(cs) for p in self.parts))
            text = self._variant(cs) if self.table.spanning_ids[cs] else ""
            for mid in self.table.spanning_ids[cs]:
                hits.discard(mid)
                if _direct(self.table.matchers[mid], text):
                    hits.add(mid)
            self._literal_hits[cs] = hits
        if cs not in self._literal_hits:
            ids = self.table.literal_ids[cs]
            text = self._variant(cs)
            automaton = self.table.automata.get(cs) if self.use_automaton else None
            if not ids:
                hits = set()
            elif automaton is not None:
                hits = _automaton_hits(automaton, self.table, ids, text)
            else:
                hits = {mid for mid in ids if _direct(self.table.matchers[mid], text)}
            self._literal_hits[cs] = hits
        return self._literal_hits[cs]

    def matches(self, mid: int) -> bool:
        found = self._memo.get(mid)
        if found is None:
            found = self._evaluate(self.table.matchers[mid])
            self._memo[mid] = found
        return found

    def _evaluate(self, m: Matcher) -> bool:
        if m.kind == REGEX:
            return self.guard.search(m, self.variants[True], self.has_required_literal)
        if m.kind == WORD:
            return m.text in self.words(m.case_sensitive)
        if m.kind == BLANK_WW:
            return _BLANK_WW.search(self._variant(m.case_sensitive)) is not None
        if not m.text:
            return True  # ``"".includes`` is true in JavaScript
        if self.table.is_indexed(m.id):
            return m.id in self.literal_hits(m.case_sensitive)
        return _direct(m, self._variant(m.case_sensitive))

    def has_required_literal(self, m: Matcher) -> bool:
        """Whether the text contains regex ``m``'s required literal. Only called by the guard, so
        the pass that answers it for every regex key at once is regex work. A key added after
        :meth:`MatcherTable.freeze` is looked for directly."""
        if not self.table.is_indexed(m.id):
            return required_text(m) in self._variant(literal_cs(m))
        return m.id in self.required_hits(literal_cs(m))

    def required_hits(self, cs: bool) -> set[int]:
        """Indexed regex keys whose required literal occurs in the text (variant ``cs``), or could
        not be looked for within the guard's budget. Like plain keys: the union of the parts'
        answers (cached across sweeps) plus literals that can span parts, looked for in the whole
        text."""
        if cs not in self._required_hits:
            ids = self.table.required_ids[cs]
            if self.parts:
                hits = set().union(*(p.required_hits(cs) for p in self.parts))
                spanning = [mid for mid in ids if is_spanning(required_text(self.table.matchers[mid]))]
                hits |= self._scan_required(cs, spanning, use_automaton=False) if spanning else set()
            else:
                hits = self._scan_required(cs, ids, use_automaton=self.use_automaton) if ids else set()
            self._required_hits[cs] = hits
        return self._required_hits[cs]

    def _scan_required(self, cs: bool, ids: list[int], *, use_automaton: bool) -> set[int]:
        text = self._variant(cs)
        started = time.perf_counter()
        deadline = started + max(self.guard.total_seconds - self.guard.spent, 0.0)
        automaton = self.table.required_automata.get(cs) if use_automaton else None
        hits: set[int] = set()
        if automaton is not None and _automaton_pass(
            automaton, text, self.table.required_max[cs] - 1, len(ids), lambda _end, value: hits.update(value[1])
        ):
            return hits
        for i, mid in enumerate(ids):
            if mid in hits:
                continue
            if time.perf_counter() > deadline:
                return hits | set(ids[i:])  # unknown: the guard cuts these keys, with a diagnostic
            if required_text(self.table.matchers[mid]) in text:
                hits.add(mid)
        return hits

    def indexed_hits(self, regex_ids: list[int], special_ids: list[int]) -> set[int]:
        """Every indexed word/literal matcher that matches, plus the given regex and special
        (blank) matchers that match. Used to find candidate entries without visiting the rest."""
        hits: set[int] = set()
        for cs in (False, True):
            index = self.table.word_index[cs]
            if index:
                words = self.words(cs)
                small, big = (words, index) if len(words) < len(index) else (index, words)
                for w in small:
                    if w in big:
                        hits.update(index[w])
            if self.table.literal_ids[cs]:
                hits |= self.literal_hits(cs)
        for mid in regex_ids:
            if self.matches(mid):
                hits.add(mid)
        for mid in special_ids:
            if self.matches(mid):
                hits.add(mid)
        return hits


def _automaton_pass(automaton: Any, text: str, overlap: int, keys: int, hit: Callable[[int, Any], None]) -> bool:
    """Feed ``hit(end, value)`` every occurrence, slice by slice (slices overlap by ``overlap`` so
    none is missed; one seen twice must be harmless). False when it stopped early because at its
    measured pace the rest would take longer than one linear search per key (``keys``) of the text."""
    n = len(text)
    linear = 2 * keys * n * IN_SECONDS_PER_CHAR + 0.005
    started = time.perf_counter()
    for start in range(0, n, SLICE_CHARS):
        for end, value in automaton.iter(text, start, min(n, start + SLICE_CHARS + overlap)):
            hit(end, value)
        done = start + SLICE_CHARS
        if done < n and (time.perf_counter() - started) / done * (n - done) > linear:
            return False
    return True


def _automaton_hits(automaton: Any, table: MatcherTable, ids: list[int], text: str) -> set[int]:
    hits: set[int] = set()
    n = len(text)

    def hit(end: int, value: tuple[int, tuple[int, ...]]) -> None:
        length, mids = value
        start = end - length + 1
        for mid in mids:
            if mid not in hits and (table.matchers[mid].kind != LITERAL_WW or _bounded(text, start, end + 1, n)):
                hits.add(mid)

    if _automaton_pass(automaton, text, table.literal_max[literal_cs(table.matchers[ids[0]])] - 1, len(ids), hit):
        return hits
    return hits | {mid for mid in ids if mid not in hits and _direct(table.matchers[mid], text)}


def required_text(m: Matcher) -> str:
    """A regex key's required literal ("" for other kinds)."""
    return (m.regex.required if m.kind == REGEX and m.regex is not None else None) or ""


def literal_text(m: Matcher) -> str:
    """Text the automaton looks for: a plain key itself ("" for other kinds)."""
    return m.text if m.kind in (LITERAL, LITERAL_WW) else ""


def literal_cs(m: Matcher) -> bool:
    """Which text variant a plain key or a regex's required literal is searched in (True =
    original case)."""
    if m.kind == REGEX:
        return m.regex is None or "i" not in m.regex.flags
    return m.case_sensitive


def is_spanning(text: str) -> bool:
    return "\n" in text or "\x01" in text


def _direct(m: Matcher, text: str) -> bool:
    if m.kind != LITERAL_WW:
        return literal_text(m) in text
    start = text.find(m.text)
    n, size = len(text), len(m.text)
    while start >= 0:
        if _bounded(text, start, start + size, n):
            return True
        start = text.find(m.text, start + 1)
    return False


def _bounded(text: str, start: int, end: int, n: int) -> bool:
    return (start == 0 or text[start - 1] not in _WORD_CHARS) and (end == n or text[end] not in _WORD_CHARS)
