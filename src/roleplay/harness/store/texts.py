"""Large event text, stored once: content-addressed, deduplicated, compressed parts.

A Writer child session's one user message is the whole story so far, so storing it verbatim at
every turn makes a story's log grow with the square of its length (issue 12). The same reply text
also travels in several events of a turn (the Writer's answer, the tool result, the commit). So
every string of at least ``MIN_EXTERNAL_BYTES`` in an event payload is cut into parts at
content-defined line boundaries; each distinct part is stored once (``text_parts``: sha256,
zlib-compressed bytes, an integer id), and the event row keeps, beside a payload whose large
strings are blanked, an ordered list of ``[path, sha256 of the whole string, [part ids]]``. A
reader reassembles each string and checks its sha256, so any past payload is reproduced exactly.

Why cut at lines chosen by their own content: the next turn's prompt is this turn's prompt with
some lines changed or inserted (the state section, one more exchange in the conversation, the new
input). A cut decided by the content of the line before it (not by an offset) falls at the same
places in both prompts, so only the parts around a change are new. Messages of the conversation
are whole lines, so a message never straddles two versions of a part.

Parts are referenced by integer id rather than by hash because a long prompt has a hundred of them
and their list is stored again at every turn; the hash stays on the part row (unique) and the
whole string's hash on the event.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from roleplay.errors import RpError

from ..events import Event

# Below this a string stays inline: a reference costs about as much as the text.
MIN_EXTERNAL_BYTES = 1024
# A line whose crc32 has these low bits clear ends a part (expected part: ~8 lines).
_CUT_MASK = 7
# Bounds on a part, in characters: no tiny parts, and a text without line breaks is still cut.
# Measured on the Writer prompts of a 1,000-turn demo story (bench/long_story.py): 4 KiB parts
# of ~8 lines store 2.2 MB of parts where 8 KiB parts of ~16 lines stored 3.7 MB, since each
# turn's changes (the state section, the newest exchange, the input) then renew less text.
# Texts stored before keep their parts: a reader follows the ids, whatever the cut.
MIN_PART_CHARS = 512
MAX_PART_CHARS = 4096
# Ids of parts a store keeps in memory, by sha256 (about 200 bytes each): a 1,000-turn story
# uses a few thousand parts; past this the map starts again, which costs lookups, never ids.
PART_IDS_KEPT = 200_000


@dataclass(frozen=True)
class ExternalText:
    """One large string of a payload: where it sits, its hash, and its parts' hashes in order."""

    path: tuple[str | int, ...]
    sha256: str
    parts: tuple[str, ...]


@dataclass(frozen=True)
class Externalised:
    """A payload ready to store: the JSON with large strings blanked, the strings' references,
    and the text of every part by hash."""

    stored_json: str
    texts: tuple[ExternalText, ...]
    parts: dict[str, str]


def split_parts(text: str) -> list[str]:
    """Cut ``text`` into parts whose concatenation is ``text``, at content-defined line ends."""
    return list(_hashed_split(text)[0])


def hashed_parts(text: str) -> list[tuple[str, str]]:
    """``split_parts`` with each part's sha256, reusing a recent text's parts wherever they recur."""
    parts, digests = _hashed_split(text)
    return list(zip(parts, digests))


def _hashed_split(text: str) -> tuple[list[str], list[str]]:
    """The parts of ``text`` and their sha256s (two lists), reusing a recent text's parts.

    The next turn's prompt is mostly this turn's: everything up to the state section, then (after
    a few changed lines) the same conversation with one exchange more, and maybe some older ones
    less. A cut depends only on the lines since the previous cut, so wherever ``text`` reaches a
    cut and goes on with a part a recent text had (one that also ended at a cut there), its own
    split goes on with that same part, and with the parts that followed it there for as long as
    ``text`` goes on with them. So ``text`` is cut afresh (and hashed) only around its changes:
    its leading parts are matched as one run, and after each fresh part the recent texts' parts
    are looked up by their first characters; a part found there starts a run of the parts that
    followed it in the newest text that has it. A run costs a comparison a part, not a lookup and
    a slice of the text (issue 12: a long story's Writer prompt is a thousand parts at every
    turn). A part ending in ``\r`` is not reused (a ``\n`` after it would make ``\r\n`` one
    line), nor a text's last part (it ended with that text, not at a cut). Property-tested
    against the full split."""
    global _recent_splits
    recent = _recent_splits
    parts: list[str] = []
    digests: list[str] = []
    pos, end = 0, len(text)
    for candidate in recent:
        n, at = candidate.run(text, 0, 0)
        if at > pos:
            parts, digests, pos = candidate.parts[:n], candidate.digests[:n], at
    known = _known
    while pos < end:
        found = known.get(text[pos : pos + _KEY_CHARS])
        if found is not None and text.startswith(found[0], pos):
            for candidate in reversed(recent):  # the newest text first: the likeliest to go on alike
                k = candidate.index().get(found[1])
                if k is not None:
                    n, at = candidate.run(text, pos, k)
                    if n:
                        parts += candidate.parts[k : k + n]
                        digests += candidate.digests[k : k + n]
                        pos = at
                        break
            else:
                parts.append(found[0])
                digests.append(found[1])
                pos += len(found[0])
            continue
        part = _next_part(text, pos)
        digest = sha256_text(part)
        parts.append(part)
        digests.append(digest)
        pos += len(part)
        if pos < end:  # ended at a cut, not with the text: reusable
            _know(part, digest)
    if end >= _RECENT_MIN_CHARS:
        _recent_splits = [*recent[-(_RECENT_SPLITS - 1) :], _Split(parts, digests, "\r" in text)]  # rebound whole: no reader sees it change
    return parts, digests


class _Split:
    """A recent long text's split, kept for the next texts: its parts and their digests, and
    (worked out when first needed) where a run of reused parts must stop: before a part ending in
    ``\r`` and before the text's last part, and where each part is, by its digest."""

    __slots__ = ("parts", "digests", "_carriage_returns", "_stops", "_index")

    def __init__(self, parts: list[str], digests: list[str], carriage_returns: bool) -> None:
        self.parts, self.digests = parts, digests
        # One search of the text for ``\r`` (a prompt has none), not a test of every part.
        self._carriage_returns = carriage_returns
        self._stops: list[int] | None = None
        self._index: dict[str, int] | None = None

    def index(self) -> dict[str, int]:
        """Where each part is, by its digest (any one place of a part that occurs twice)."""
        if self._index is None:
            self._index = dict(zip(self.digests, range(len(self.digests))))
        return self._index

    def run(self, text: str, pos: int, k: int) -> tuple[int, int]:
        """How many of the parts from the ``k``-th on ``text`` goes on with at ``pos`` (a cut),
        up to the first that may not be reused, and where they end in ``text``."""
        stops = self._stops
        if stops is None:
            stops = [i for i, part in enumerate(self.parts) if part.endswith("\r")] if self._carriage_returns else []
            self._stops = stops = [*stops, max(len(self.parts) - 1, 0)]
        stop = stops[bisect_left(stops, k)]
        at, startswith, parts = pos, text.startswith, self.parts
        for n in range(k, stop):
            part = parts[n]
            if not startswith(part, at):
                return n - k, at
            at += len(part)
        return stop - k, at


def _know(part: str, digest: str) -> None:
    """Offer ``part`` (which ended at a cut) for reuse, by its first characters. Any part that
    ended at a cut is right wherever a text at a cut goes on with it, so parts are never taken
    back; the newest of two with the same first characters is kept. Bounded by the text it holds:
    then it starts again, which costs cutting and hashing, never a different split."""
    global _known_chars
    if part.endswith("\r") or len(part) < _KEY_CHARS:
        return
    if _known_chars >= _KNOWN_MAX_CHARS:
        _known.clear()
        _known_chars = 0
    key = part[:_KEY_CHARS]
    old = _known.get(key)
    _known[key] = (part, digest)
    _known_chars += len(part) - (len(old[0]) if old is not None else 0)


# Parts a recent text ended at a cut, by their first characters (parts are at least
# ``MIN_PART_CHARS`` long, a text's last part aside, which is not offered).
_KEY_CHARS = 64
_KNOWN_MAX_CHARS = 8_000_000
_known: dict[str, tuple[str, str]] = {}
_known_chars = 0


# The splits of the last few long texts (newest last), for ``_hashed_split``. A text shorter than
# this is cheap to cut again and would only push a prompt out.
_RECENT_SPLITS = 4
_RECENT_MIN_CHARS = 64 * 1024
_recent_splits: list[_Split] = []


def _split(text: str) -> list[str]:
    # Starting at a cut, the cuts that follow depend only on the text from there: a mid-line cut
    # (a long line's slice) falls at a multiple of MAX_PART_CHARS from the line's start, so the
    # rest of that line is sliced at the same places when cut on its own.
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for line in _units(text):
        current.append(line)
        size += len(line)
        if size >= MAX_PART_CHARS or (size >= MIN_PART_CHARS and line.strip() and zlib.crc32(line.encode("utf-8")) & _CUT_MASK == 0):
            parts.append("".join(current))
            current, size = [], 0
    if current:
        parts.append("".join(current))
    return parts


def _units(text: str) -> Iterable[str]:
    for line in text.splitlines(keepends=True):
        if len(line) <= MAX_PART_CHARS:
            yield line
        else:  # a very long line: fixed slices, which resynchronise at its end
            for i in range(0, len(line), MAX_PART_CHARS):
                yield line[i : i + MAX_PART_CHARS]


# ``str.splitlines``' line boundaries, to read the lines of a text from a position on.
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _next_part(text: str, pos: int) -> str:
    """``_split(text[pos:])[0]`` without reading further than that part (``pos`` is at a cut).
    A part's size at the end of a unit is where that unit ends less ``pos``, so a line that ends
    before ``MIN_PART_CHARS`` (most lines of a part) is passed over without being sliced: no unit
    of it can end a part."""
    start = pos
    for match in _LINE_BREAK.finditer(text, pos):
        end = match.end()
        if end - pos >= MIN_PART_CHARS:
            cut = _cut_in_line(text, pos, start, end)
            if cut:
                return text[pos:cut]
        start = end
    if start < len(text):
        cut = _cut_in_line(text, pos, start, len(text))
        if cut:
            return text[pos:cut]
    return text[pos:]  # no cut before the end: the rest is the text's last part


def _cut_in_line(text: str, pos: int, start: int, end: int) -> int:
    """Where the part that starts at ``pos`` ends inside the line ``text[start:end]`` (the end of
    one of its units: the line, or a very long line's fixed slices), or 0 when it goes on."""
    for unit_start in range(start, end, MAX_PART_CHARS):
        unit_end = min(unit_start + MAX_PART_CHARS, end)
        size = unit_end - pos
        if size >= MAX_PART_CHARS:
            return unit_end
        if size >= MIN_PART_CHARS:
            unit = text[unit_start:unit_end]
            if not unit.isspace() and zlib.crc32(unit.encode("utf-8")) & _CUT_MASK == 0:
                return unit_end
    return 0


def sha256_text(text: str) -> str:
    """The sha256 (hex) of ``text``'s UTF-8 bytes. The last few long texts' are kept by identity:
    a turn's Writer prompt is hashed where its build is frozen and again where the Writer's
    message is stored, the same string object both times."""
    global _recent_digests
    if len(text) < _DIGEST_KEPT_FROM:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    for known, digest in _recent_digests:
        if known is text:
            return digest
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    _recent_digests = [*_recent_digests[-(_DIGESTS_KEPT - 1) :], (text, digest)]  # rebound whole
    return digest


def remember_digest(text: str, digest: str) -> None:
    """Record ``digest`` as ``sha256_text(text)`` for a caller that hashed ``text``'s UTF-8 bytes
    itself (``context_epoch`` hashes a Writer prompt from the encoding it slices the prompt's
    conversation from): the prompt's storage then finds it."""
    global _recent_digests
    if len(text) >= _DIGEST_KEPT_FROM and not any(known is text for known, _ in _recent_digests):
        _recent_digests = [*_recent_digests[-(_DIGESTS_KEPT - 1) :], (text, digest)]


_DIGEST_KEPT_FROM = 64 * 1024
_DIGESTS_KEPT = 4
_recent_digests: list[tuple[str, str]] = []


def externalise(payload: Any) -> Externalised | None:
    """The storable form of a JSON value (an event payload, a projection snapshot), or ``None``
    when it holds no large string."""
    found = large_strings(payload)
    return externalise_strings(found, blanked_json(payload, found)) if found else None


LargeStrings = list[tuple[tuple[str | int, ...], str]]


def large_strings(payload: Any) -> LargeStrings:
    """The strings of ``payload`` that ``externalise`` stores as parts, with their paths."""
    found: LargeStrings = []
    _find_large(payload, (), found)
    return found


def blanked_json(payload: Any, found: LargeStrings) -> str:
    """``payload``'s JSON with the ``found`` strings blanked: what its row keeps inline."""
    return _ENCODE(_blank(payload, {path for path, _ in found}) if found else payload)


# ``json.dumps(…, ensure_ascii=False, allow_nan=False, separators=(",", ":"))`` without making an
# encoder for every payload.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def externalise_strings(found: LargeStrings, stored_json: str) -> Externalised:
    """``externalise`` from its two first steps (``large_strings``, ``blanked_json``), for a
    caller that looked at them first (``base.prepare_drafts`` sizes the payload with them)."""
    return Externalised(stored_json, *_split_texts(found))


def _split_texts(found: LargeStrings) -> tuple[tuple[ExternalText, ...], dict[str, str]]:
    """Each text's reference, and the text of every part they use by sha256 (in the order first
    used: a store inserts new parts in that order)."""
    texts = []
    parts: dict[str, str] = {}
    for path, text in found:
        pieces, digests = _hashed_split(text)
        parts.update(zip(digests, pieces))  # one C call, not a Python step per part (issue 12)
        texts.append(ExternalText(path, sha256_text(text), tuple(digests)))
    return tuple(texts), parts


# No character takes more bytes than this in JSON text written with ``ensure_ascii=False``: a
# control character escaped as ``\u00XX`` (any other is at most 4 bytes of UTF-8, or 2 escaped).
MAX_JSON_BYTES_PER_CHAR = 6


def json_bytes_at_most(stored_json: str, found: LargeStrings) -> int:
    """A bound on the UTF-8 size of the whole payload's JSON from its ``blanked_json`` and the
    lengths of its large strings, neither encoded nor escaped: each blank ``""`` becomes the
    string, quotes included, at most ``MAX_JSON_BYTES_PER_CHAR`` bytes a character inside them."""
    return len(stored_json.encode("utf-8")) + MAX_JSON_BYTES_PER_CHAR * sum(len(text) for _, text in found)


def _find_large(value: Any, path: tuple[str | int, ...], out: LargeStrings) -> None:
    if isinstance(value, str):
        if _large(value):
            out.append((path, value))
        return
    if isinstance(value, dict):
        items: Iterable[tuple[str | int, Any]] = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    # Every payload of every append is searched (issue 16): a plain string or number in a
    # container is looked at here, without a call and a path of its own.
    for key, item in items:
        kind = type(item)
        if kind is str:
            if len(item) * 4 >= MIN_EXTERNAL_BYTES and _large(item):
                out.append(((*path, key), item))
        elif kind not in _SCALARS:
            _find_large(item, (*path, key), out)


_SCALARS = frozenset({int, float, bool, type(None)})


def _large(text: str) -> bool:
    # len() first: a string of fewer characters than the threshold's quarter cannot reach it.
    # Then as many characters as the threshold's bytes (none is less than a byte) need no
    # encoding to be counted: a long story's Writer prompt is a megabyte.
    return len(text) >= MIN_EXTERNAL_BYTES or (len(text) * 4 >= MIN_EXTERNAL_BYTES and len(text.encode("utf-8")) >= MIN_EXTERNAL_BYTES)


def _blank(value: Any, paths: set[tuple[str | int, ...]]) -> Any:
    """``value`` with the strings at ``paths`` blanked, for serialising only: what holds no such
    string is the original object, not a copy (a long story's surface snapshot blanks a few
    strings among tens of thousands of nodes)."""
    return _blank_at(value, paths, {p[:i] for p in paths for i in range(len(p))}, ())


def _blank_at(value: Any, paths: set[tuple[str | int, ...]], through: set[tuple[str | int, ...]], path: tuple[str | int, ...]) -> Any:
    if path in paths:
        return ""
    if path not in through:
        return value
    if isinstance(value, dict):
        return {k: _blank_at(v, paths, through, (*path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_blank_at(v, paths, through, (*path, i)) for i, v in enumerate(value)]
    return value


# A projection snapshot is stored as its JSON text, whole, in parts (``snapshot_text``); the row's
# ``state`` then holds this marker instead of the state.
SNAPSHOT_TEXT_MARKER = {"$rpSnapshotText": 1}


def externalise_snapshot(state: Any) -> Externalised:
    """A snapshot to store: its large strings as parts (a long story's surface repeats the texts
    its events already store, so these parts are shared with them), then the rest of the state as
    one text (``snapshot_text``) in parts of its own, listed first at the root path.

    Run on a thread (``base.prepare_snapshot``), so no single C call here may hold the GIL for
    long (issue 16): the root text is joined once, and hashed a slice at a time."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if not isinstance(state, str):  # a state that is one string is all root text
        _find_large(state, (), found)
    rest = _blank(state, {path for path, _ in found}) if found else state
    text = snapshot_text(rest)
    pieces, digests = _hashed_split(text)
    parts = dict(zip(digests, pieces))
    texts, strings = _split_texts(found)
    parts.update(strings)  # after the root's: in the order first used, as ``_split_texts`` lists them
    root = ExternalText((), _sha256_in_slices(text), tuple(digests))
    return Externalised(json.dumps(SNAPSHOT_TEXT_MARKER), (root, *texts), parts)


# Characters of a long text encoded at a time to hash it: a long story's surface is megabytes, and
# encoding it in one call held the GIL for milliseconds.
_HASH_SLICE_CHARS = 1 << 16


def _sha256_in_slices(text: str) -> str:
    """``sha256_text(text)`` (the same digest: slicing a ``str`` never splits a character)."""
    digest = hashlib.sha256()
    for start in range(0, len(text), _HASH_SLICE_CHARS):
        digest.update(text[start : start + _HASH_SLICE_CHARS].encode("utf-8"))
    return digest.hexdigest()


def reassemble_snapshot(column: str, parts: dict[int, bytes], *, where: str) -> Any:
    """The state stored by ``externalise_snapshot``: the root text parsed, then its large strings
    put back, each checked against its sha256."""
    entries = json.loads(column)
    root = [e for e in entries if not e[0]]
    state = parse_snapshot_text(reassemble("", json.dumps(root), parts, where=where))
    rest = [e for e in entries if e[0]]
    return reassemble(state, json.dumps(rest), parts, where=where) if rest else state


def snapshot_text(state: Any) -> str:
    """A snapshot's JSON with one element per line down to the second level (the surface: one node
    per line), so that the parts of the next snapshot, which mostly appends nodes, are the same
    parts except at the end: a snapshot adds storage for what changed, not for the whole state.
    Its pieces are joined once, not each level's text into the next (copies of megabytes)."""
    out: list[str] = []
    _lines(state, 0, out)
    return "".join(out)


def _lines(value: Any, depth: int, out: list[str]) -> None:
    dumps = json.dumps
    if depth < 2 and isinstance(value, dict) and value:
        out.append("{\n")
        for i, (k, v) in enumerate(value.items()):
            out.append(f",\n{dumps(k, ensure_ascii=False)}:" if i else f"{dumps(k, ensure_ascii=False)}:")
            _lines(v, depth + 1, out)
        out.append("\n}")
    elif depth < 2 and isinstance(value, list) and value:
        out.append("[\n")
        for i, v in enumerate(value):
            if i:
                out.append(",\n")
            _lines(v, depth + 1, out)
        out.append("\n]")
    else:
        out.append(dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


def parse_snapshot_text(text: str) -> Any:
    """``json.loads(text)`` for a ``snapshot_text``, an element at a time: a long story's surface
    parsed in one call held the GIL for 40 ms, even on a reader thread (issue 16). A text not in
    that shape (any JSON a snapshot row might hold) is left to ``json.loads``, which then parses
    it, or says why not, as it always did."""
    try:
        value, end = _parse_lines(text, 0, 0)
    except (ValueError, IndexError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


_SCAN = json.JSONDecoder().raw_decode


def _parse_lines(text: str, pos: int, depth: int) -> tuple[Any, int]:
    """The value ``_lines`` wrote at ``pos`` and where it ends: a non-empty container down to the
    second level opens with a line break (compact JSON never holds one), anything else is one
    compact value. Only what is valid JSON is accepted, so the value is what ``json.loads`` gives."""
    if depth < 2 and text.startswith("{\n", pos):
        pos += 2
        obj: dict[str, Any] = {}
        while True:
            key, pos = _SCAN(text, pos)
            if not isinstance(key, str) or text[pos] != ":":
                raise ValueError("not a snapshot text")
            obj[key], pos = _parse_lines(text, pos + 1, depth + 1)
            if text.startswith(",\n", pos):
                pos += 2
            elif text.startswith("\n}", pos):
                return obj, pos + 2
            else:
                raise ValueError("not a snapshot text")
    if depth < 2 and text.startswith("[\n", pos):
        pos += 2
        items: list[Any] = []
        while True:
            item, pos = _parse_lines(text, pos, depth + 1)
            items.append(item)
            if text.startswith(",\n", pos):
                pos += 2
            elif text.startswith("\n]", pos):
                return items, pos + 2
            else:
                raise ValueError("not a snapshot text")
    return _SCAN(text, pos)


def compress(text: str) -> bytes:
    """A part's stored bytes: zlib (a part is read by ``zlib.decompress``, whose 32 KiB window
    takes any smaller one), with a window no larger than the part, whose setup otherwise costs a
    third of compressing a 4 KiB part; the compressed size is the same."""
    raw = text.encode("utf-8")
    return zlib.compress(raw, 6, wbits=min(15, max(9, len(raw).bit_length())))


def texts_column(texts: Iterable[ExternalText], ids: dict[str, int]) -> str:
    """The event row's ``texts`` value: ``[[path, sha256, [part id, …]], …]``."""
    return json.dumps([[list(t.path), t.sha256, list(map(ids.__getitem__, t.parts))] for t in texts], separators=(",", ":"))


def texts_column_pieces(texts: Iterable[ExternalText], ids: Mapping[str, int]) -> list[tuple[str | None, str | None]]:
    """``texts_column`` as (literal, None) and (None, part sha256) pieces, for a store that learns
    the ids of some parts only while it writes the row: the known ids are written in, and joining
    the pieces with each reference's id gives exactly ``texts_column``."""
    pieces: list[tuple[str | None, str | None]] = []
    lit = ["["]
    for i, t in enumerate(texts):
        lit.append(("," if i else "") + "[" + json.dumps(list(t.path), separators=(",", ":")) + "," + json.dumps(t.sha256) + ",[")
        if all(map(ids.__contains__, t.parts)):  # the usual case: written in one go, not part by part
            lit.append(",".join(map(str, map(ids.__getitem__, t.parts))))
            lit.append("]]")
            continue
        for j, h in enumerate(t.parts):
            if j:
                lit.append(",")
            if h in ids:
                lit.append(str(ids[h]))
            else:
                pieces.append(("".join(lit), None))
                pieces.append((None, h))
                lit = []
        lit.append("]]")
    lit.append("]")
    pieces.append(("".join(lit), None))
    return pieces


def part_ids(column: str | None) -> set[int]:
    if not column:
        return set()
    return {i for entry in json.loads(column) for i in entry[2]}


def reassemble(payload: Any, column: str, parts: dict[int, bytes], *, where: str) -> Any:
    """Put the stored strings back into ``payload`` (in place), each checked against its sha256.

    ``parts`` maps part id to compressed bytes. A missing part or a hash mismatch is
    ``store.corrupt``: never hand back text that is not what was appended."""
    for path, digest, ids in json.loads(column):
        try:
            text = "".join(zlib.decompress(parts[i]).decode("utf-8") for i in ids)
        except (KeyError, zlib.error, UnicodeDecodeError) as exc:
            raise _corrupt(where, path, f"a stored part is missing or unreadable ({exc.__class__.__name__})") from None
        if sha256_text(text) != digest:
            raise _corrupt(where, path, "the reassembled text does not match its stored sha256")
        if not path:
            return text
        target: Any = payload
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = text
    return payload


def _corrupt(where: str, path: list[Any], why: str) -> RpError:
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
    return RpError(
        "store.corrupt",
        f"the stored text of {where} cannot be read back exactly: {why}; the database is damaged",
        pointer=pointer,
        details={"event": where},
    )


def event_rows(session_id: str, rows: Iterable[tuple[Any, ...]], parts: dict[int, bytes]) -> list[Any]:
    """Events from ``(seq, type, v, payload JSON text, created_at, texts, payload_z)`` rows, the
    column order both backends select, decompressed and with any stored text parts put back (and
    verified)."""
    loads = json.loads
    out = []
    for r in rows:
        payload = loads(decompress_payload(r[6], where=f"{session_id}#{r[0]}") if r[6] is not None else r[3])
        if r[5]:
            payload = reassemble(payload, r[5], parts, where=f"{session_id}#{r[0]}")
        out.append(Event(session_id, r[0], r[1], payload, r[4], r[2]))
    return out


# -- compressed payloads -------------------------------------------------------------------------

# A payload is compressed with raw deflate and a preset dictionary of the harness's own event
# vocabulary, behind a one-byte format version. The dictionary of a version can never change (rows
# written with it must decompress); a better one is a new version.
_PAYLOAD_V1 = 1
_PAYLOAD_DICT_V1 = (
    '{"turnId":"turn_","stepId":"step_","messageId":"msg_","inputMessageId":"msg_","index":0,'
    '"content":[{"type":"text","text":""}],"content":[{"type":"reasoning","text":""},'
    '"toolCalls":[{"id":"","name":"","arguments":"{\\"action\\": \\"write\\"}"}],'
    '"callId":"","name":"","ok":true,"ok":false,"content":"","meta":{"kind":"","error":{"code":"","message":"","pointer":"","details":{}},'
    '"model":{"provider":"","model":""},"finishReason":"stop","finishReason":"tool_calls",'
    '"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0},'
    '"route":{"provider":"","model":"","label":""},"sections":["harness:identity","tool:"],"hash":"","tools":[],'
    '"history":{"window":128000,"replyReserve":16384,"fixedTokens":0,"messages":0,"omitted":0},'
    '"outcome":"completed","mode":"chat","source":{},"surfaceOp":{"op":"replace","range":"node","targetMessageId":"","sourceEventSeqs":[]},'
    '"commandId":"cmd_","args":{},"result":{},"kind":"success","sha256":"","epoch":"","childSessionId":"ses_","text":""}'
).encode("utf-8")
# Below this a payload stays plain text: a row's own overhead dwarfs what compression could save.
MIN_COMPRESSED_BYTES = 128


def compress_payload(text: str) -> bytes | None:
    """The stored bytes of a payload's JSON text, or None when compressing does not pay."""
    raw = text.encode("utf-8")
    if len(raw) < MIN_COMPRESSED_BYTES:
        return None
    # The window need only reach back over the dictionary and the payload: a typical payload is a
    # few hundred bytes, and setting up deflate's full 32 KiB window and hash tables for it cost
    # three times its compression (issue 16). No match reaches further back than the text, so the
    # bytes decode the same with the reader's 32 KiB window (and on a demo story's payloads they
    # were the very same bytes).
    bits = min(15, max(9, (len(raw) + len(_PAYLOAD_DICT_V1)).bit_length()))
    deflate = zlib.compressobj(6, zlib.DEFLATED, -bits, bits - 6, zlib.Z_DEFAULT_STRATEGY, _PAYLOAD_DICT_V1)
    # Raw deflate has no checksum of its own: the text's crc32 follows, so damage is detected.
    data = bytes([_PAYLOAD_V1]) + deflate.compress(raw) + deflate.flush() + zlib.crc32(raw).to_bytes(4, "little")
    return data if len(data) < len(raw) * 0.9 else None


def decompress_payload(data: bytes, *, where: str) -> str:
    data = bytes(data)
    try:
        if not data or data[0] != _PAYLOAD_V1:
            raise ValueError(f"unknown payload format {data[:1]!r}")
        inflate = zlib.decompressobj(-15, _PAYLOAD_DICT_V1)
        raw = inflate.decompress(data[1:-4]) + inflate.flush()
        if not inflate.eof or zlib.crc32(raw).to_bytes(4, "little") != data[-4:]:
            raise ValueError("its checksum does not match")
        return raw.decode("utf-8")
    except (ValueError, zlib.error, UnicodeDecodeError) as exc:
        raise RpError(
            "store.corrupt",
            f"the stored payload of {where} cannot be read back: {exc}; the database is damaged",
            details={"event": where},
        ) from None
