"""Guide texts the roleplay agent loads on demand (shipped as package data).

Each guide is one Markdown file named ``<name>.md`` with a small front matter block::

    ---
    name: rp-guide-preset
    title: …
    description: …          # when to load it; shown in the guide catalogue
    parent: rp-guide-preset # optional: a helper guide installed and removed with its parent
    ---

The loader is deliberately tiny: no YAML dependency, one ``key: value`` per line, and every guide is
validated the same way the tests validate them, so a broken file fails loudly with ``guide.invalid``.

Each guide exists in Chinese (``<name>.md``) and English (``<name>.en.md``); ``language`` picks one
and defaults to the user's (the system locale; callers that know the ``language`` setting pass it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from roleplay.assets.language import LANGUAGES, language_from_locale
from roleplay.errors import NotFoundError, ValidationError

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_REQUIRED = ("name", "title", "description")
_ALLOWED = frozenset(_REQUIRED + ("parent",))


@dataclass(frozen=True)
class Guide:
    name: str
    title: str
    description: str
    body: str
    parent: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "parent": self.parent,
            "body": self.body,
        }


def _parse(name: str, text: str) -> Guide:
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        raise ValidationError("guide.invalid", f"guide {name!r} has no front matter block", details={"guide": name})
    end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    meta: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in _ALLOWED or key in meta:
            raise ValidationError("guide.invalid", f"guide {name!r} line {number}: bad front matter {line!r}", details={"guide": name})
        meta[key] = value.strip()
    missing = [k for k in _REQUIRED if not meta.get(k)]
    if missing:
        raise ValidationError("guide.invalid", f"guide {name!r} lacks {', '.join(missing)}", details={"guide": name})
    if meta["name"] != name:
        raise ValidationError("guide.invalid", f"guide file {name!r} declares name {meta['name']!r}", details={"guide": name})
    body = "\n".join(lines[end + 1 :]).strip() + "\n"
    return Guide(meta["name"], meta["title"], meta["description"], body, meta.get("parent") or None)


# language -> how a guide's file name ends
_SUFFIX = {"zh": ".md", "en": ".en.md"}
assert set(_SUFFIX) == set(LANGUAGES)


def list_guides() -> list[str]:
    """Names of all shipped guides, sorted."""
    root = resources.files(__package__)
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".md") and _NAME_RE.match(p.name[:-3]))


def load_guide(name: str, language: str | None = None) -> Guide:
    """One guide by name, in ``language`` (default: the system locale's). Unknown or malformed
    names raise ``guide.not_found``; an unknown language ``guide.unknown_language``."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise NotFoundError("guide.not_found", f"no guide named {name!r}", details={"guide": str(name)})
    language = language or language_from_locale()
    if language not in _SUFFIX:
        raise ValidationError("guide.unknown_language", f"no guides in {language!r}; known: {', '.join(_SUFFIX)}", pointer="/language")
    resource = resources.files(__package__).joinpath(f"{name}{_SUFFIX[language]}")
    if not resource.is_file():
        raise NotFoundError("guide.not_found", f"no guide named {name!r}", details={"guide": name})
    return _parse(name, resource.read_text(encoding="utf-8"))


def helpers_of(name: str) -> list[str]:
    """Helper guides that ship with ``name`` (their ``parent``), e.g. the SillyTavern migration
    procedure for ``rp-guide-preset``."""
    load_guide(name)
    return [g for g in list_guides() if load_guide(g).parent == name]


__all__ = ["Guide", "helpers_of", "list_guides", "load_guide"]
