"""JavaScript regex keys (``/pattern/flags``) for lorebook activation.

Key form: exactly SillyTavern's ``parseRegexFromString``: the whole key must match
``^/(.+?)/([gimsuy]*)$``; a pattern containing an unescaped ``/`` is not a regex; only the first
``\\/`` is unescaped (ST uses ``String.replace`` with a string), which is harmless because ``\\/`` is
``/`` in a pattern anyway. A key of that form that does not compile is *not* an error in ST: the
key is then matched as plain text. :func:`parse_regex_key` mirrors that by returning ``None``.

Patterns are JavaScript syntax and run on the third-party ``regex`` engine (chosen because it can
time out a search, see :mod:`.matching`). The translation keeps JavaScript's meaning where the
engines differ in ways a community key can hit:

* ``\\d \\w \\b`` and their negations are ASCII-only in JavaScript (without and with ``u``);
* ``\\s`` is JavaScript's whitespace set; ``.`` excludes all four line terminators unless ``s``;
* ``^``/``$`` are whole-input anchors unless ``m`` (then any of the four line terminators);
  Python's ``$`` would also match before a final newline;
* ``[^]`` matches anything and ``[]`` nothing; ``{,n}`` is a literal (Python reads a quantifier);
* ``\\k<name>``, ``\\cX``, ``\\u{…}`` and identity escapes such as ``\\a`` (a letter in JS);
* decimal escapes (Annex B, without ``u``): ``\\N`` is a backreference only when the pattern has
  ``N`` capturing groups; otherwise it is a legacy octal escape of at most three digits (value up
  to 0o377), and ``\\8``/``\\9`` are the digits themselves; inside a class always octal. With
  ``u`` such an escape is a syntax error, as in JavaScript;
* ``y`` (sticky) anchors the test at index 0; ``g`` has no effect on a fresh ``RegExp.test``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import regex

from roleplay.errors import RpError

_KEY_FORM = re.compile(r"/([\s\S]+?)/([gimsuy]*)", re.DOTALL)
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
_QUANTIFIER = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")

_WORD = "A-Za-z0-9_"
_JS_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_LINE_TERM = "\\n\\r\\u2028\\u2029"
_W = f"(?-i:[{_WORD}])"
_NOT_W = f"(?-i:[^{_WORD}])"
_BOUNDARY = f"(?-i:(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}])))"
_NOT_BOUNDARY = f"(?-i:(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}])))"
_ANY = "(?s:.)"

_OUTSIDE_SHORTHAND = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": _W,
    "W": _NOT_W,
    "s": f"[{_JS_SPACE}]",
    "S": f"[^{_JS_SPACE}]",
    "b": _BOUNDARY,
    "B": _NOT_BOUNDARY,
}
_CLASS_SHORTHAND = {"d": "0-9", "w": _WORD, "s": _JS_SPACE}
_CLASS_NEGATED = {"D": "[^0-9]", "W": _NOT_W, "S": f"[^{_JS_SPACE}]"}
_KEEP_ESCAPES = set("fnrtv")


class JsRegexError(RpError):
    """A ``/pattern/flags`` key that JavaScript or our translation cannot compile."""


@dataclass(frozen=True)
class JsRegex:
    source: str  # the key as written
    pattern: str  # the JavaScript pattern (between the slashes, first ``\/`` unescaped)
    flags: str
    compiled: regex.Pattern[str]
    sticky: bool
    # A literal every match must contain (lower-cased with ``i``), or None: lets the matcher
    # skip the regex on texts that cannot match (looked for under the regex guard).
    required: str | None = None


def parse_regex_key(key: str) -> JsRegex | None:
    """The compiled regex when ``key`` is a valid ``/pattern/flags`` key, else ``None`` (ST then
    matches the key as plain text)."""
    form = split_regex_key(key)
    if form is None:
        return None
    try:
        return compile_js_regex(*form, source=key)
    except JsRegexError:
        return None


def split_regex_key(key: str) -> tuple[str, str] | None:
    """``(pattern, flags)`` if ``key`` has ST's regex form, else ``None``."""
    m = _KEY_FORM.fullmatch(key)
    if m is None:
        return None
    pattern, flags = m.group(1), m.group(2)
    if _UNESCAPED_SLASH.search(pattern):
        return None
    return pattern.replace("\\/", "/", 1), flags


def compile_js_regex(pattern: str, flags: str, *, source: str | None = None) -> JsRegex:
    if len(set(flags)) != len(flags):
        raise JsRegexError("lore.regex.invalid", f"duplicate regex flag in {flags!r}")
    translated = translate_js_pattern(pattern, flags)
    options = regex.VERSION0 | (regex.IGNORECASE if "i" in flags else 0)
    try:
        compiled = regex.compile(translated, options)
    except (regex.error, OverflowError, RecursionError, ValueError, IndexError) as exc:
        raise JsRegexError(
            "lore.regex.invalid", f"regex /{pattern}/{flags} does not compile: {exc}", details={"pattern": pattern, "flags": flags}
        ) from None
    required = required_literal(pattern, flags)
    if required is not None and "i" in flags:
        # Only ASCII literals: JavaScript's non-unicode ``i`` never maps other characters onto
        # ASCII ones, so "lower-cased literal in lower-cased text" is then a necessary condition.
        required = required.lower() if required.isascii() and "u" not in flags else None
    return JsRegex(source if source is not None else f"/{pattern}/{flags}", pattern, flags, compiled, "y" in flags, required)


_META = set("\\^$.|?*+()[]{}")


def required_literal(pattern: str, flags: str = "") -> str | None:
    """Longest run of plain characters at the top level of ``pattern`` that any match must
    contain; ``None`` when there is none or the pattern has a top-level alternation. Groups,
    classes, escapes other than escaped punctuation, and quantified characters end a run.

    An escape ends the run over its whole length as the translator reads it (``\\x01``,
    ``\\u{1F600}``, ``\\cJ``, ``\\k<name>``…): reading its tail as text would demand characters
    the match does not contain, and the prefilter would then skip a regex that matches."""
    unicode, groups = "u" in flags, _count_groups(pattern)
    runs: list[str] = []
    run: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        literal: str | None = None
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            literal = nxt if depth == 0 and not nxt.isalnum() and nxt != "_" else None
            if literal is not None:
                i += 2
            else:
                try:
                    i = _escape(pattern, i + 1, unicode, in_class=False, groups=groups)[1]
                except JsRegexError:
                    return None  # does not compile either: there is no literal to promise
        elif c == "[":
            j = i + 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth = max(0, depth - 1)
            i += 1
        elif c == "|":
            if depth == 0:
                return None
            i += 1
        else:
            literal = c if depth == 0 and c not in _META else None
            i += 1
        if literal is not None and not (i < n and pattern[i] in "?*+{"):
            run.append(literal)
            continue
        if run:
            runs.append("".join(run))
            run = []
    if run:
        runs.append("".join(run))
    best = max(runs, key=len, default="")
    return best or None


def translate_js_pattern(pattern: str, flags: str) -> str:
    """JavaScript pattern → ``regex`` pattern with the same meaning (see module docstring)."""
    multiline, dotall, unicode = "m" in flags, "s" in flags, "u" in flags
    groups = _count_groups(pattern)
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise JsRegexError("lore.regex.invalid", "pattern ends with a lone backslash")
            piece, i = _escape(pattern, i + 1, unicode, in_class=False, groups=groups)
            out.append(piece)
            continue
        if c == "[":
            piece, i = _char_class(pattern, i + 1, unicode)
            out.append(piece)
            continue
        if c == ".":
            out.append(_ANY if dotall else f"[^{_LINE_TERM}]")
        elif c == "^":
            out.append(f"(?:\\A|(?<=[{_LINE_TERM}]))" if multiline else "\\A")
        elif c == "$":
            out.append(f"(?=[{_LINE_TERM}]|\\Z)" if multiline else "\\Z")
        elif c == "{":
            m = _QUANTIFIER.match(pattern, i)
            if m and out:
                out.append(m.group(0))
                i = m.end()
                continue
            out.append("\\{")
        elif c == "}":
            out.append("\\}")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _count_groups(p: str) -> int:
    """Capturing groups of a JavaScript pattern: ``(`` not followed by ``?``, and ``(?<name>``."""
    count, i, n = 0, 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i += 1
            while i < n and p[i] != "]":
                i += 2 if p[i] == "\\" else 1
        elif c == "(" and (p[i + 1 : i + 2] != "?" or (p[i + 2 : i + 3] == "<" and p[i + 3 : i + 4] not in ("=", "!"))):
            count += 1
        i += 1
    return count


def _decimal_escape(p: str, i: int, unicode: bool, *, in_class: bool, groups: int) -> tuple[str, int]:
    j = i
    while j < len(p) and p[j].isdigit():
        j += 1
    if not in_class and p[i] != "0" and int(p[i:j]) <= groups:
        return "(?:\\" + p[i:j] + ")", j
    if unicode:
        raise JsRegexError("lore.regex.invalid", f"\\{p[i:j]} is not a group reference (with the u flag)")
    if p[i] in "89":
        return p[i], i + 1
    end = min(i + (3 if p[i] in "0123" else 2), len(p))
    k = i + 1
    while k < end and p[k] in "01234567":
        k += 1
    return "\\x%02x" % int(p[i:k], 8), k


def _escape(p: str, i: int, unicode: bool, *, in_class: bool, groups: int = 0) -> tuple[str, int]:
    """Translate the escape whose letter is at ``p[i]``; returns (piece, next index). ``groups``:
    the pattern's capturing groups, which decide what a decimal escape is."""
    c = p[i]
    if in_class:
        if c in _CLASS_SHORTHAND:
            return _CLASS_SHORTHAND[c], i + 1
        if c == "b":
            return "\\x08", i + 1
        if c == "-":
            return "\\-", i + 1
    elif c in _OUTSIDE_SHORTHAND:
        return _OUTSIDE_SHORTHAND[c], i + 1
    if c in _KEEP_ESCAPES:
        return "\\" + c, i + 1
    if c == "0" and not (i + 1 < len(p) and p[i + 1].isdigit()):
        return "\\x00", i + 1
    if c.isdigit():
        return _decimal_escape(p, i, unicode, in_class=in_class, groups=groups)
    if c == "c" and i + 1 < len(p) and p[i + 1].isascii() and p[i + 1].isalpha():
        return "\\x%02x" % (ord(p[i + 1]) % 32), i + 2
    if c == "x" and re.match(r"[0-9A-Fa-f]{2}", p[i + 1 : i + 3]):
        return "\\x" + p[i + 1 : i + 3], i + 3
    if c == "u":
        if unicode and p[i + 1 : i + 2] == "{":
            m = re.match(r"\{([0-9A-Fa-f]{1,6})\}", p[i + 1 :])
            if m and int(m.group(1), 16) <= 0x10FFFF:
                return "\\U%08x" % int(m.group(1), 16), i + 1 + m.end()
            raise JsRegexError("lore.regex.invalid", "bad \\u{…} escape")
        if re.match(r"[0-9A-Fa-f]{4}", p[i + 1 : i + 5]):
            return "\\u" + p[i + 1 : i + 5], i + 5
    if c == "k" and not in_class and p[i + 1 : i + 2] == "<":
        end = p.find(">", i + 2)
        if end > i + 2:
            return f"(?P={p[i + 2 : end]})", end + 1
    if c in "pP" and unicode and p[i + 1 : i + 2] == "{":
        end = p.find("}", i + 2)
        if end > 0:
            return "\\" + c + p[i + 1 : end + 1], end + 1
    if c.isascii() and c.isalnum():
        return c, i + 1  # identity escape: ``\a`` is just "a" in JavaScript
    return regex.escape(c), i + 1


def _char_class(p: str, i: int, unicode: bool) -> tuple[str, int]:
    """Translate a class whose body starts at ``p[i]`` (after ``[``)."""
    negated = p[i : i + 1] == "^"
    if negated:
        i += 1
    items: list[str] = []
    extra: list[str] = []  # negated shorthands (\W \D \S) cannot live inside a Python class
    n = len(p)
    while True:
        if i >= n:
            raise JsRegexError("lore.regex.invalid", "unterminated character class")
        c = p[i]
        if c == "]":
            i += 1
            break
        if c == "\\":
            if i + 1 >= n:
                raise JsRegexError("lore.regex.invalid", "pattern ends with a lone backslash")
            if p[i + 1] in _CLASS_NEGATED:
                extra.append(_CLASS_NEGATED[p[i + 1]])
                i += 2
                continue
            piece, i = _escape(p, i + 1, unicode, in_class=True)
            items.append(piece)
            continue
        items.append("\\" + c if c in "[&~|" else c)
        i += 1
    body = "".join(items)
    if not extra:
        if not body:
            return (_ANY if negated else "(?!)"), i
        return f"[{'^' if negated else ''}{body}]", i
    union = "|".join(([f"[{body}]"] if body else []) + extra)
    if negated:
        return f"(?:(?!{union}){_ANY})", i
    return f"(?:{union})", i
