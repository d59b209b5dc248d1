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


class GuideRegistry:
    """The guide skills a runtime's features contributed (hook ``register_guides``), in
    registration order. ``register(name)`` takes a guide shipped here (both languages are checked
    now, so a typo fails when the runtime is built); ``register(guide)`` a :class:`Guide` of a
    plugin's own, served as given in every language. A guide with a ``parent`` is a helper: it is
    offered only with its parent, and only when the parent is registered too."""

    def __init__(self) -> None:
        self._guides: dict[str, Guide | None] = {}  # None: shipped here, read per language

    def register(self, guide: str | Guide) -> None:
        name = guide if isinstance(guide, str) else guide.name
        if isinstance(guide, str):
            for language in _SUFFIX:
                load_guide(guide, language)
        elif not isinstance(guide, Guide) or not _NAME_RE.match(guide.name):
            raise ValidationError("guide.invalid", f"not a guide: {guide!r}", pointer="/name")
        if name in self._guides:
            raise ValidationError("guide.duplicate", f"guide {name!r} is registered twice", pointer="/name", details={"guide": name})
        self._guides[name] = None if isinstance(guide, str) else guide

    def load(self, name: str, language: str | None = None) -> Guide:
        if name not in self._guides:
            raise NotFoundError("guide.not_found", f"no guide named {name!r} is registered", details={"guide": str(name)})
        own = self._guides[name]
        return own if own is not None else load_guide(name, language)

    def names(self) -> list[str]:
        return list(self._guides)

    def offered(self) -> list[str]:
        """The guides a parent may load by name from the start: every registered one that is no
        helper, sorted."""
        return sorted(n for n in self._guides if self.load(n, "en").parent is None)

    def helpers(self) -> dict[str, str]:
        """helper → its parent, for the helpers whose parent is registered."""
        out: dict[str, str] = {}
        for name in sorted(self._guides):
            parent = self.load(name, "en").parent
            if parent is not None and parent in self._guides:
                out[name] = parent
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._guides


__all__ = ["Guide", "GuideRegistry", "helpers_of", "list_guides", "load_guide"]
