"""Lorebook activation benchmark (run by hand: ``.venv/bin/python bench/lorebook.py``).

Builds a synthetic 5,000-entry book (ASCII names, multi-word keys, CJK keys, a few regex keys,
secondary keys, inclusion groups, constants) and a 200-message chat, then times
:meth:`LoreEngine.activate` against a naive baseline that scans the whole buffer once per key
with a precompiled whole-word regex (what a direct port of ST's ``matchKeys`` does). Both scan
all 200 messages (``scan_depth=200``). The data come from a seeded ``random.Random`` so every run
measures the same work. Prints a table of medians in milliseconds.

Then the hostile-prefilter cases (issue 18 item 7): a 2,000-character regex key whose required
literal is a long repetitive run, against a message of about 2 MB that repeats it. The regex guard
gives all regex work of one activation 0.5 s (``ScanSettings.regex_total_seconds``); the literal
prefilter is regex work, so the whole activation must stay within that budget, both when the text
is over the guard's length limit (the key is cut as ``text_too_long``) and just under it. The same
long repetitive text as a *plain* key (not whole-word, so it goes through the Aho-Corasick pass) is
held to the same target. Prints figure, target and verdict per case. ``--hostile`` runs only these
cases.
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from roleplay.assets.lorebook import ChatMessage, LoreEngine, ScanSettings, TurnInput, parse_lorebook  # noqa: E402
from roleplay.assets.lorebook.jsregex import parse_regex_key  # noqa: E402

N_ENTRIES = 5_000
N_MESSAGES = 200
REPEATS = 7
SYLLABLES = ["ka", "ri", "lo", "men", "tha", "dor", "vel", "sa", "qui", "zor", "an", "el", "is", "ur"]
CJK = "山川风雪国王城剑龙月星火花海林石云雷神魔灵"
FILLER = (
    "the a of and to in was he she it that with for on as at by from his her they we you "
    "said went looked under over through before after again then quickly slowly"
).split()


def make_name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()


def make_book(rng: random.Random) -> tuple[dict, list[str]]:
    names = sorted({make_name(rng) for _ in range(N_ENTRIES * 2)})[:N_ENTRIES]
    rng.shuffle(names)
    entries = {}
    for uid, name in enumerate(names):
        r = rng.random()
        if r < 0.70:
            keys = [name, name.lower() + "s"]
        elif r < 0.82:
            keys = [f"{name} {make_name(rng)}"]
        elif r < 0.94:
            keys = ["".join(rng.choice(CJK) for _ in range(rng.randint(2, 3)))]
        elif r < 0.99:
            keys = [f"/\\b{name}(?:ian|ite)?\\b/i"]
        else:
            keys = [name]
        entry = {
            "uid": uid,
            "key": keys,
            "keysecondary": [],
            "comment": name,
            "content": f"[{name}: allied with {rng.choice(names)}; rival of {rng.choice(names)}]",
            "constant": uid % 997 == 0,
            "selective": True,
            "selectiveLogic": 0,
            "order": rng.randint(1, 200),
            "position": rng.choice([0, 1, 4]),
            "disable": False,
            "probability": 100,
            "useProbability": True,
            "group": "",
            "excludeRecursion": False,
        }
        if rng.random() < 0.2:
            entry["keysecondary"] = [rng.choice(FILLER), make_name(rng)]
            entry["selectiveLogic"] = rng.choice([0, 1, 2, 3])
        if rng.random() < 0.05:
            entry["group"] = f"faction{rng.randint(1, 20)}"
        entries[str(uid)] = entry
    return {"entries": entries}, names


def make_chat(rng: random.Random, names: list[str]) -> list[ChatMessage]:
    msgs = []
    for i in range(N_MESSAGES):
        words = [rng.choice(FILLER) for _ in range(rng.randint(25, 45))]
        for _ in range(rng.randint(0, 2)):
            words.insert(rng.randrange(len(words)), rng.choice(names))
        if i % 9 == 0:
            words.append("".join(rng.choice(CJK) for _ in range(12)))
        msgs.append(ChatMessage(" ".join(words) + ".", "User" if i % 2 else "Narrator"))
    return msgs


def naive_baseline(book: dict, messages: list[ChatMessage]) -> set[str]:
    """One sweep, ST semantics for plain keys (lower-cased, whole words), every key scanned
    separately with its own regex over the full buffer."""
    buffer = "\x01" + "\n\x01".join(f"{m.name}: {m.text}".strip() for m in reversed(messages))
    lowered = buffer.lower()
    compiled = []
    for uid, e in book["entries"].items():

        def plain(k: str):
            rx = parse_regex_key(k)
            if rx is not None:
                return lambda text, rx=rx: rx.compiled.search(buffer) is not None
            k = k.lower()
            if re.search(r"\s", k):
                return lambda text, k=k: k in text
            pat = re.compile(r"(?:^|[^A-Za-z0-9_])" + re.escape(k) + r"(?:$|[^A-Za-z0-9_])")
            return lambda text, pat=pat: pat.search(text) is not None

        compiled.append((uid, e, [plain(k) for k in e["key"]], [plain(k) for k in e["keysecondary"]]))
    fired = set()
    for uid, e, prim, sec in compiled:
        if e["constant"]:
            fired.add(uid)
            continue
        if not any(f(lowered) for f in prim):
            continue
        if sec:
            hits = [f(lowered) for f in sec]
            logic = e["selectiveLogic"]
            ok = {0: any(hits), 1: not all(hits), 2: not any(hits), 3: all(hits)}[logic]
            if not ok:
                continue
        fired.add(uid)
    return fired


def timed(fn, repeats: int = REPEATS) -> tuple[float, object]:
    samples, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples), out


HOSTILE_KEY_CHARS = 2_000
HOSTILE_REPEATS = 3


def hostile_prefilter() -> None:
    """Activation time for a hostile regex prefilter literal; target: the regex budget."""
    budget = ScanSettings().regex_total_seconds
    run = "ab" * ((HOSTILE_KEY_CHARS - 2) // 2)  # the key is /<run>/: 2,000 characters
    cases = [
        ("2,000-char regex key, 2 MB message (over the limit)", "/" + run + "/", "ab" * 1_000_001),
        ("2,000-char regex key, 1.9 MB message, literal absent", "/" + run[:-1] + "c/", "ab" * 950_000),
        ("2,000-char /i regex key, 1.9 MB message, literal present", "/" + run[:-2] + "/i", "AB" * 950_000),
        ("2,000-char plain key, 1.9 MB message, key present", "ab" * 1_000, "ab" * 950_000),
        ("2,000-char plain key, 1.9 MB message, key absent", "ab" * 999 + "c", "ab" * 950_000),
    ]
    print(f"\nhostile regex prefilter: median of {HOSTILE_REPEATS} activations, target <= {budget:.2f} s (the regex budget)")
    print(f"{'case':<60} {'s':>8} {'target':>7}  verdict  diagnostics")
    print("-" * 110)
    for label, key, message in cases:
        entry = {"uid": 0, "key": [key], "content": "c", "matchWholeWords": False}
        book = parse_lorebook({"entries": {"0": entry}}, book_id="hostile")
        engine = LoreEngine([book], ScanSettings(scan_depth=1))
        turn = TurnInput(run_id="bench", messages=[ChatMessage(message, "User")])
        ms, result = timed(lambda: engine.activate(turn), HOSTILE_REPEATS)
        seconds = ms / 1000
        codes = ",".join(d.code for d in result.diagnostics) or "-"
        verdict = "PASS" if seconds <= budget else "FAIL"
        print(f"{label:<60} {seconds:>8.3f} {budget:>7.2f}  {verdict:<7}  {codes}")


def main() -> None:
    if "--hostile" in sys.argv[1:]:
        hostile_prefilter()
        return
    rng = random.Random(20261129)
    raw, names = make_book(rng)
    messages = make_chat(rng, names)
    book = parse_lorebook(raw, book_id="bench")
    one_sweep = ScanSettings(scan_depth=N_MESSAGES, recursive=False)
    recursive = ScanSettings(scan_depth=N_MESSAGES, recursive=True, max_recursion_steps=3)
    turn = TurnInput(run_id="bench", messages=messages)

    compile_ms, engine = timed(lambda: LoreEngine([book], one_sweep), 3)
    engine_rec = LoreEngine([book], recursive)
    ours_ms, result = timed(lambda: engine.activate(turn))
    direct_ms, direct = timed(lambda: engine.activate(turn, use_automaton=False))
    rec_ms, rec_result = timed(lambda: engine_rec.activate(turn))
    report_ms, _ = timed(lambda: result.report(), 3)
    base_ms, base = timed(lambda: naive_baseline(raw, messages), 1)

    ours = {a.entry_id for a in result.activated}
    assert ours == {a.entry_id for a in direct.activated}, "automaton and direct scan disagree"
    # The baseline has no inclusion groups: it must equal what fired plus the group losers.
    losers = {d.entry_id for d in result.report() if d.reason.startswith("group_")}
    assert ours | losers == base, f"baseline disagrees: {len((ours | losers) ^ base)} entries differ"

    rows = [
        ("compile 5,000 entries (once per book revision)", compile_ms, ""),
        ("naive baseline: regex per key, 1 sweep (1 run)", base_ms, f"{len(base)} matched"),
        ("LoreEngine.activate, 1 sweep", ours_ms, f"{len(ours)} fired, {base_ms / ours_ms:.0f}x baseline"),
        ("LoreEngine.activate, 1 sweep, no Aho-Corasick", direct_ms, f"{base_ms / direct_ms:.0f}x baseline"),
        ("LoreEngine.activate, recursion (<=3 sweeps)", rec_ms, f"{len(rec_result.activated)} fired in {rec_result.sweeps} sweeps"),
        ("ActivationResult.report() for all 5,000", report_ms, ""),
    ]
    print(f"{N_ENTRIES} entries, {N_MESSAGES} messages, buffer {sum(len(m.text) for m in messages):,} chars, median of {REPEATS} runs")
    print(f"{'case':<52} {'ms':>9}  note")
    print("-" * 96)
    for label, ms, note in rows:
        print(f"{label:<52} {ms:>9.2f}  {note}")
    hostile_prefilter()


if __name__ == "__main__":
    main()
