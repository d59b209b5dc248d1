"""Hostile-input fuzzing of character card and lorebook import.

The project's rule for bad input: a clear :class:`~roleplay.errors.RpError` with a stable code,
never a crash and never a hang. This module checks it by mutation. It starts from valid seeds (V1,
V2 and V3 card JSON, PNG cards with ``chara``/``ccv3`` text chunks, SillyTavern world info and a
``character_book``) and applies one or more hostile mutations:

- structural ones on the decoded value (wrong types, deep nesting, huge strings and lists, lone
  surrogates, control characters, numbers JSON or Python cannot hold, non-finite literals);
- byte-level ones on the encoded file (truncation, bit flips, inserted bytes, raw invalid UTF-8,
  a BOM, UTF-16);
- PNG ones (corrupt CRCs, lying chunk lengths, compressed and international text chunks, giant
  image headers, junk after IEND).

Every case runs the real import entry point (``import_card_bytes``, ``parse_lorebook``; with
:func:`run_files`, the user's path ``import_file`` on a real asset store). An
``RpError`` with a non-empty code is the allowed outcome; any other exception, or a case slower
than the per-case bound, is a :class:`Failure` carrying the bytes needed to reproduce it.

Deterministic: cases come from ``random.Random(seed)``; nothing reads the global RNG or clock
except the per-case timing. Used by ``tests/assets/test_fuzz_assets.py`` (small) and
``bench/fuzz.py`` (large).
"""

from __future__ import annotations

import base64
import json
import random
import signal
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from roleplay.assets.cards import import_card_bytes
from roleplay.assets.importing import import_file
from roleplay.assets.lorebook.importer import parse_lorebook
from roleplay.assets.store import AssetStore
from roleplay.errors import RpError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
HUGE = 3_000_000  # characters in a "huge" string: past most field limits, cheap enough for CI
DEEP = 5_000  # nesting levels: far past any parser's sane depth, below C stack trouble


# -- seeds ------------------------------------------------------------------------------------------


def _entries_v2() -> list[dict[str, Any]]:
    return [
        {
            "id": 1,
            "keys": ["sword", "blade"],
            "secondary_keys": ["silver"],
            "content": "{{char}}'s sword hums.",
            "enabled": True,
            "insertion_order": 10,
            "case_sensitive": False,
            "selective": True,
            "constant": False,
            "position": "before_char",
            "extensions": {"position": 1, "depth": 4, "probability": 100, "sticky": 2},
        },
        {
            "id": 2,
            "keys": ["/in+n/i"],
            "content": "At night nobody leaves the inn.",
            "enabled": True,
            "insertion_order": 20,
            "constant": True,
            "extensions": {"position": 2},
        },
    ]


def card_v2() -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Irene", "description": "{{char}} is a swordswoman.", "personality": "Guarded.",
        "scenario": "A rainy inn.", "first_mes": "Hm?", "mes_example": "<START>\n{{user}}: Hi\n{{char}}: ...Hi.",
        "creator_notes": "", "system_prompt": "Speak as {{char}}.", "post_history_instructions": "",
        "alternate_greetings": ["Again?"], "tags": ["fantasy"], "creator": "fuzz", "character_version": "1",
        "extensions": {"talkativeness": "0.5", "depth_prompt": {"prompt": "x", "depth": 4}},
        "character_book": {"name": "Irene lore", "entries": _entries_v2()},
    }}  # fmt: skip


def card_v3() -> dict[str, Any]:
    card = card_v2()
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].update(
        nickname="艾琳",
        group_only_greetings=[],
        creation_date=0,
        modification_date=0,
        assets=[{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
    )
    for entry in card["data"]["character_book"]["entries"]:
        entry["use_regex"] = False
    return card


def card_v1() -> dict[str, Any]:
    return {"name": "Old", "description": "A V1 card.", "personality": "", "scenario": "", "first_mes": "Hello.", "mes_example": ""}


def world_info() -> dict[str, Any]:
    return {"name": "Harbour", "entries": {
        "0": {"uid": 0, "key": ["fog", "雾"], "keysecondary": [], "comment": "fog", "content": "Fog rolls in.",
              "constant": False, "selective": True, "order": 100, "position": 0, "disable": False,
              "probability": 100, "useProbability": True, "depth": 4, "group": "", "scanDepth": None,
              "caseSensitive": None, "matchWholeWords": None, "sticky": 0, "cooldown": 0, "delay": 0},
        "1": {"uid": 1, "key": ["/bell(s)?/i"], "content": "A bell rings.", "constant": True, "position": 4,
              "depth": 2, "role": 0, "order": 5},
    }}  # fmt: skip


def character_book() -> dict[str, Any]:
    return {"name": "Book", "entries": _entries_v2()}


def _tiny_png() -> bytes:
    """A valid 1x1 RGBA PNG, built by hand so the fuzzer needs no image library."""
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    idat = zlib.compress(b"\x00\x00\x00\x00\x00")
    return PNG_SIGNATURE + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def chunk(ctype: bytes, body: bytes, crc: int | None = None) -> bytes:
    value = zlib.crc32(body, zlib.crc32(ctype)) & 0xFFFFFFFF if crc is None else crc
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", value)


def png_card(payload: bytes, keyword: bytes = b"chara", kind: bytes = b"tEXt", extra: bytes = b"") -> bytes:
    """A 1x1 PNG carrying ``payload`` (base64 as the community writes it) before IEND."""
    base = _tiny_png()
    body = base64.b64encode(payload)
    if kind == b"zTXt":
        data = keyword + b"\x00\x00" + zlib.compress(body)
    elif kind == b"iTXt":
        data = keyword + b"\x00\x00\x00\x00\x00" + body
    else:
        data = keyword + b"\x00" + body
    iend = base.rindex(b"IEND") - 4
    return base[:iend] + chunk(kind, data) + extra + base[iend:]


# -- mutations --------------------------------------------------------------------------------------

Value = Any


def _paths(value: Value, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _replace(value: Value, path: tuple[Any, ...], new: Value) -> Value:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _pick_path(rng: random.Random, value: Value, strings_only: bool = False) -> tuple[Any, ...]:
    paths = list(_paths(value))
    if strings_only:
        strings = [p for p in paths if isinstance(_get(value, p), str) and not isinstance(_get(value, p), Raw)]
        paths = strings or paths
    return rng.choice(paths)


def _get(value: Value, path: tuple[Any, ...]) -> Value:
    for part in path:
        value = value[part]
    return value


class Raw(str):
    """A JSON fragment spliced into the encoded text as is (for what ``json.dumps`` cannot write)."""


def _wrong_type(rng: random.Random) -> Value:
    choices: list[Value] = [
        None,
        True,
        False,
        0,
        -1,
        2**63,
        -(2**63) - 1,
        1.5,
        "",
        "x",
        [],
        {},
        [None],
        {"": None},
        [[[]]],
        "🙂",
        "\u202e",
        1e308,
    ]
    return rng.choice(choices)


def _structural(rng: random.Random, value: Value) -> tuple[str, Value]:
    kind = rng.choice(
        [
            "wrong-type",
            "deep-list",
            "deep-object",
            "huge-string",
            "huge-list",
            "surrogate",
            "control",
            "big-int",
            "non-finite",
            "huge-key",
            "drop-key",
            "duplicate-key",
        ]
    )
    if kind in ("huge-string", "surrogate", "control", "huge-key"):
        path = _pick_path(rng, value, strings_only=True)
    else:
        path = _pick_path(rng, value)
    if kind == "wrong-type":
        return kind, _replace(value, path, _wrong_type(rng))
    if kind == "deep-list":
        return kind, _replace(value, path, Raw("[" * DEEP + "]" * DEEP))
    if kind == "deep-object":
        return kind, _replace(value, path, Raw('{"a":' * DEEP + "1" + "}" * DEEP))
    if kind == "huge-string":
        # Raw (already encoded) so later mutations need not walk or copy it.
        return kind, _replace(value, path, Raw(json.dumps(rng.choice(["A", "雾", "{{char}}", "<", "\\"]) * HUGE)))
    if kind == "huge-list":
        item = rng.choice(['"k"', "1", "{}", "null"])
        return kind, _replace(value, path, Raw("[" + ",".join([item] * rng.choice([10_000, 200_000])) + "]"))
    if kind == "surrogate":
        old = _get(value, path)
        text = old if isinstance(old, str) else ""
        return kind, _replace(value, path, text + rng.choice(["\ud800", "\udfff", "\udc00x\ud83d"]))
    if kind == "control":
        old = _get(value, path)
        text = old if isinstance(old, str) else ""
        return kind, _replace(value, path, text + "".join(chr(rng.randrange(0, 32)) for _ in range(8)) + "\x7f\u0085\u2028")
    if kind == "big-int":
        return kind, _replace(value, path, Raw(rng.choice(["1" * 5000, "-" + "9" * 4400, "1e400", "-1e-400", "1" + "0" * 400])))
    if kind == "non-finite":
        return kind, _replace(value, path, Raw(rng.choice(["NaN", "Infinity", "-Infinity"])))
    if kind == "huge-key":
        parent = path[:-1] if path else path
        target = _get(value, parent)
        if isinstance(target, dict):
            return kind, _replace(value, parent, {**target, "K" * 100_000: "v"})
        return kind, _replace(value, path, {"K" * 100_000: "v"})
    if kind == "drop-key":
        for p in reversed(list(_paths(value))):
            if p and isinstance(_get(value, p[:-1]), dict) and rng.random() < 0.3:
                siblings = dict(_get(value, p[:-1]))
                siblings.pop(p[-1])
                return kind, _replace(value, p[:-1], siblings)
        return kind, value
    # duplicate-key: written by hand below (json.dumps cannot repeat a key)
    return kind, _replace(value, path, Raw('{"a": 1, "a": [], "a": null}'))


def encode(value: Value) -> str:
    """``json.dumps`` with :class:`Raw` fragments spliced in. Lone surrogates are written as
    ``\\udXXX`` escapes (valid JSON text, invalid Unicode once decoded)."""
    raws: list[str] = []

    def swap(v: Value) -> Value:
        if isinstance(v, Raw):
            raws.append(str(v))
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    text = json.dumps(swap(value), ensure_ascii=True)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{index}\x00"), raw, 1)
    return text


def _bytes_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    kind = rng.choice(["truncate", "flip", "insert", "raw-bad-utf8", "raw-control", "bom", "utf16", "splice"])
    if not data:
        return kind, data
    at = rng.randrange(len(data))
    if kind == "truncate":
        return kind, data[:at]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(out))
            out[i] ^= 1 << rng.randrange(8)
        return kind, bytes(out)
    if kind == "insert":
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]
    if kind == "raw-bad-utf8":
        return kind, data[:at] + rng.choice([b"\xed\xa0\x80", b"\xff\xfe", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\x80"]) + data[at:]
    if kind == "raw-control":
        return kind, data[:at] + bytes(rng.randrange(32) for _ in range(4)) + data[at:]
    if kind == "bom":
        return kind, b"\xef\xbb\xbf" + data
    if kind == "utf16":
        try:
            return kind, data.decode("utf-8").encode(rng.choice(["utf-16", "utf-16-le", "utf-16-be"]))
        except UnicodeDecodeError:
            return kind, data
    cut = rng.randrange(len(data))
    return kind, data[:at] + data[cut:]


_BOMB: list[bytes] = []


def _bomb() -> bytes:
    """60 MB of "A" deflated to ~60 KB, made once per process (compressing it is the slow part)."""
    if not _BOMB:
        _BOMB.append(zlib.compress(b"A" * 60_000_000, 9))
    return _BOMB[0]


def _png_mutation(rng: random.Random, payload: bytes) -> tuple[str, bytes]:
    kind = rng.choice(
        [
            "ztxt",
            "itxt",
            "ccv3",
            "both",
            "bad-crc",
            "lying-length",
            "giant-ihdr",
            "after-iend",
            "not-base64",
            "raw-json",
            "bomb",
            "truncate",
            "many-chunks",
        ]
    )
    if kind == "ztxt":
        return kind, png_card(payload, kind=b"zTXt")
    if kind == "itxt":
        return kind, png_card(payload, kind=b"iTXt")
    if kind == "ccv3":
        return kind, png_card(payload, keyword=b"ccv3")
    if kind == "both":
        return kind, png_card(payload, extra=chunk(b"tEXt", b"ccv3\x00" + base64.b64encode(payload[: len(payload) // 2])))
    if kind == "bad-crc":
        return kind, png_card(payload, extra=chunk(b"tEXt", b"chara\x00AAAA", crc=rng.randrange(2**32)))
    if kind == "lying-length":
        good = png_card(payload)
        at = good.index(b"tEXt") - 4
        return kind, good[:at] + struct.pack(">I", rng.choice([2**31 - 1, 2**32 - 1, len(good)])) + good[at + 4 :]
    if kind == "giant-ihdr":
        good = png_card(payload)
        ihdr = struct.pack(">IIBBBBB", rng.choice([2**31 - 1, 100_000]), rng.choice([2**31 - 1, 100_000]), 8, 6, 0, 0, 0)
        return kind, PNG_SIGNATURE + chunk(b"IHDR", ihdr) + good[len(PNG_SIGNATURE) + 25 :]
    if kind == "after-iend":
        return kind, png_card(payload) + bytes(rng.randrange(256) for _ in range(64))
    if kind == "not-base64":
        return kind, png_card(b"", extra=chunk(b"tEXt", b"chara\x00" + bytes(rng.randrange(33, 127) for _ in range(200))))
    if kind == "raw-json":
        base = _tiny_png()
        iend = base.rindex(b"IEND") - 4
        return kind, base[:iend] + chunk(b"tEXt", b"chara\x00" + payload.replace(b"\x00", b"")) + base[iend:]
    if kind == "bomb":
        return kind, png_card(b"", extra=chunk(b"zTXt", b"chara\x00\x00" + _bomb()))
    if kind == "many-chunks":
        return kind, png_card(payload, extra=b"".join(chunk(b"tEXt", b"k%d\x00v" % i) for i in range(20_000)))
    good = png_card(payload)
    return kind, good[: rng.randrange(len(PNG_SIGNATURE), len(good))]


# -- cases and running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    index: int
    target: str  # card-json | card-png | lorebook
    mutation: str  # "+"-joined mutation names
    data: bytes


SEEDS: dict[str, list[Callable[[], Value]]] = {
    "card-json": [card_v2, card_v3, card_v1],
    "card-png": [card_v2, card_v3, card_v1],
    "lorebook": [world_info, character_book, card_v2],
}


def generate(seed: int, count: int, targets: tuple[str, ...] = tuple(SEEDS)) -> Iterator[Case]:
    """``count`` cases, round-robin over ``targets``, from ``random.Random(seed)`` alone."""
    rng = random.Random(seed)
    unknown = set(targets) - set(SEEDS)
    if unknown or not targets:
        raise ValueError(f"fuzz targets are {', '.join(SEEDS)}; got {sorted(targets)}")
    for index in range(count):
        target = targets[index % len(targets)]
        value = rng.choice(SEEDS[target])()
        names = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            name, value = _structural(rng, value)
            names.append(name)
        data = encode(value).encode("utf-8", "surrogatepass")
        if target == "card-png":
            if rng.random() < 0.6:
                name, data = _png_mutation(rng, data)
                names.append("png:" + name)
            else:
                data = png_card(data)
        if rng.random() < 0.35:
            name, data = _bytes_mutation(rng, data)
            names.append("bytes:" + name)
        yield Case(index, target, "+".join(names), data)


def run_target(case: Case) -> None:
    if case.target == "lorebook":
        parse_lorebook(case.data, book_id="fuzz")
    else:
        import_card_bytes(case.data, "fuzz.png" if case.target == "card-png" else "fuzz.json")


class CaseTimeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt a case that runs past ``seconds`` (a hang). Only possible on the main thread of a
    POSIX process; elsewhere the case is timed but not interrupted."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"case ran past {seconds:.1f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Failure:
    case: Case
    kind: str  # "crash" (an exception that is not RpError), "no-code", "slow", "timeout"
    error: str
    seconds: float

    def describe(self) -> str:
        return f"#{self.case.index} {self.case.target} [{self.case.mutation}] {self.kind}: {self.error} ({self.seconds:.2f} s, {len(self.case.data)} bytes)"


@dataclass
class Report:
    cases: int = 0
    failures: list[Failure] = field(default_factory=list)
    max_seconds: float = 0.0
    slowest: Case | None = None
    outcomes: Counter[str] = field(default_factory=Counter)  # "ok" or the error code

    def failure_kinds(self) -> Counter[str]:
        return Counter(f"{f.case.target}:{f.kind}:{f.error.split(':')[0]}" for f in self.failures)


def _finish(report: Report, case: Case, failure_kind: str | None, error: str, elapsed: float, slow_seconds: float) -> None:
    if elapsed > report.max_seconds:
        report.max_seconds, report.slowest = elapsed, case
    if failure_kind is None and elapsed > slow_seconds:
        failure_kind, error = "slow", f"took {elapsed:.2f} s (bound {slow_seconds:.2f} s)"
    if failure_kind is not None:
        report.failures.append(Failure(case, failure_kind, error, elapsed))


def _classify(report: Report, exc: BaseException) -> tuple[str | None, str]:
    if isinstance(exc, CaseTimeout):
        return "timeout", str(exc)
    if isinstance(exc, RpError):
        report.outcomes[exc.code or "(none)"] += 1
        return (None, "") if exc.code else ("no-code", str(exc))
    return "crash", f"{type(exc).__name__}: {str(exc)[:200]}"


def run(
    cases: Iterable[Case],
    *,
    slow_seconds: float,
    timeout_seconds: float,
    clock: Callable[[], float] = time.perf_counter,
    target: Callable[[Case], object] | None = None,
    coded_errors_pass: bool = True,
) -> Report:
    """Run every case through ``target`` (default: its pure import entry point); collect failures
    instead of stopping at the first. With ``coded_errors_pass`` off, even an ``RpError`` with a
    code counts as a crash (for code that must report problems as diagnostics, not raise)."""
    report = Report()
    for case in cases:
        report.cases += 1
        start = clock()
        failure_kind, error = None, ""
        try:
            with _deadline(timeout_seconds):
                (target or run_target)(case)
            report.outcomes["ok"] += 1
        except Exception as exc:  # noqa: BLE001 - the point is to catch what escapes
            failure_kind, error = _classify(report, exc)
            if failure_kind is None and not coded_errors_pass:
                failure_kind, error = "crash", f"RpError {exc}"
        _finish(report, case, failure_kind, error, clock() - start, slow_seconds)
    return report


async def run_files(
    cases: Iterable[Case], store: AssetStore, *, slow_seconds: float, clock: Callable[[], float] = time.perf_counter
) -> Report:
    """Every case through the user's path, ``import_file`` on a real store: sniffing, one JSON
    parse, the kind's importer, validation and the write. A case that imports is fine; so is an
    ``RpError`` with a code. (No interrupting alarm here: the event loop must not be torn.)"""
    report = Report()
    for case in cases:
        report.cases += 1
        start = clock()
        failure_kind, error = None, ""
        try:
            await import_file(store, case.data, "fuzz.png" if case.target == "card-png" else "fuzz.json")
            report.outcomes["ok"] += 1
        except Exception as exc:  # noqa: BLE001
            failure_kind, error = _classify(report, exc)
        _finish(report, case, failure_kind, error, clock() - start, slow_seconds)
    return report


def shrink(case: Case, still_fails: Callable[[Case], bool], *, rounds: int = 200) -> Case:
    """A smaller input that still fails the same way (greedy chunk deletion), for a repro."""
    data = case.data
    step = max(len(data) // 2, 1)
    while step >= 1 and rounds > 0:
        changed = False
        at = 0
        while at < len(data) and rounds > 0:
            rounds -= 1
            trial = Case(case.index, case.target, case.mutation, data[:at] + data[at + step :])
            if trial.data and still_fails(trial):
                data, changed = trial.data, True
            else:
                at += step
        if not changed:
            step //= 2
    return Case(case.index, case.target, case.mutation, data)


__all__ = ["Case", "Failure", "Report", "encode", "generate", "png_card", "run", "run_files", "run_target", "shrink"]
