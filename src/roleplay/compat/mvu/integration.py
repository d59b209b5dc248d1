"""How the MVU adapter joins the roleplay runtime, through generic extension points only.

The spec (MVU 适配隔离与覆盖边界): the adapter creates no tables, assets or MVU namespace, and
writes nothing back into cards, lorebooks or profiles. It contributes:

- a **session materializer**: for the selected opening (default, alternate or custom), the
  opening's ``<initvar>`` replaces the card's, its literal commands run against the fixed base
  schema, and the result becomes the generic ``story`` State seed. The cleaned, macro-expanded
  ``openingMessageText`` is returned without being persisted (``scene.openingText`` keeps the
  source, so a reload rebuilds the same state);
- a **lorebook activation adapter**: entries render through the read-only template subset with
  ``stat_data``/``display_data`` aliasing the current ``story`` value, so a ``getvar``-gated
  entry switches with the state. An entry that fails closed renders empty and is not injected;
- a **text transformer** for card text: MVU control blocks never reach the Writer.

The three register through the plugin hooks (``register_materializers``,
``register_lore_templates``, ``register_text_transformers``); the plugin manager loads this module
as the ``rp-compat-mvu`` feature, which needs the card, lorebook and state features. Disabling it
leaves existing namespaces working: they are native State from the first event on.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from roleplay.assets.cards import import_card_bytes
from roleplay.core.macros import expand
from roleplay.errors import RpError
from roleplay.hookspecs import hookimpl

from .adapter import inspect_card, select_opening
from .diagnostics import capped
from .openings import clean_opening_text
from .templates import render_template
from roleplay.names import COMPAT_MVU_FEATURE

FEATURE = COMPAT_MVU_FEATURE
SOURCE_BLOB = "source"
MATERIALIZER_ORDER = 600  # after the native state seed and the macro-expanded opening


async def mvu_materializer(m: Any) -> None:
    """Materializer step (runs after the native ones): only acts on MVU cards."""
    rt = m.runtime
    if m.card is None or rt is None:
        return
    try:
        blob = await rt.assets.get_blob(m.card.id, SOURCE_BLOB)
    except RpError:
        return  # a card without its original file (made in the editor) carries no MVU content
    card_import = import_card_bytes(blob.data, blob.media_type and f"card{_suffix(blob.media_type)}")
    linked = {r.id for r in await rt.assets.read(lambda tx: tx.linked_lorebooks(m.card.id))}
    extra = []
    for book_id in m.lorebook_ids:
        if book_id in linked:
            continue  # the card's own book is read from the card itself, as MVU does
        view = await rt.assets.get(book_id)
        extra.append((view.name or book_id, view.data.get("book")))
    custom = m.opening_text if m.request.opening == "custom" else None
    report = inspect_card(card_import, extra, user=m.macros.user_name or "User", custom_greeting=custom)
    if not report.detected:
        return
    source, index = _opening_key(m.request)
    if source is None:
        chosen = report.namespace
        m.opening_message_text = None
    else:
        opening = select_opening(report, source, index)
        chosen = opening.namespace
        m.opening_message_text = expand(opening.opening_message_text, m.macros) if opening.opening_message_text else None
    m.state_bootstrap = chosen.bootstrap()
    m.diagnostics.extend(p.to_dict() for p in capped(report.diagnostics + chosen.diagnostics))


def lore_template(state: dict[str, Any] | None) -> Callable[[str, Callable[[str], str | None]], str]:
    """The per-run template step for lorebook entries (``SourceInputs.lore_template``)."""
    story = ((state or {}).get("namespaces") or {}).get("story", {}).get("value")

    def render(text: str, lookup: Callable[[str], str | None]) -> str:
        if "<%" not in text and "_variable::" not in text:
            return text
        result = render_template(text, story, lookup=lookup)
        return result.text if result.ok and result.text is not None else ""

    return render


def clean_card_text(text: str) -> str:
    """Card fields without MVU control blocks (``<UpdateVariable>``, status placeholders…)."""
    if "<" not in text and "_." not in text:
        return text
    return clean_opening_text(text, [])


class CardTextCache:
    """``clean_card_text`` remembered per text, for one runtime.

    Every turn re-reads the card and cleans its fields again, though the text changes only with
    a new card revision. The transform is handed the text alone, so the key is the text itself:
    an unchanged revision gives an equal string (a hit costs one hash and one comparison), and a
    new revision can never be answered from a stale entry. Bounded by total characters kept;
    the least recently used entries go first.
    """

    def __init__(self, max_chars: int = 8_000_000) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[str, str] = OrderedDict()
        self._chars = 0

    def __call__(self, text: str) -> str:
        cleaned = self._entries.get(text)
        if cleaned is not None:
            self._entries.move_to_end(text)
            return cleaned
        cleaned = clean_card_text(text)
        size = len(text) + len(cleaned)
        if size <= self.max_chars:
            self._entries[text] = cleaned
            self._chars += size
            while self._chars > self.max_chars:
                old, old_cleaned = self._entries.popitem(last=False)
                self._chars -= len(old) + len(old_cleaned)
        return cleaned


@hookimpl
def register_materializers(register: Any) -> None:
    register(mvu_materializer, order=MATERIALIZER_ORDER)


@hookimpl
def register_lore_templates(register: Any) -> None:
    register(lore_template)


@hookimpl
def register_text_transformers(register: Any) -> None:
    register(CardTextCache())  # one cache per runtime: the hook runs once per runtime


def _opening_key(request: Any) -> tuple[str | None, int | None]:
    if request.opening == "skip":
        return None, None
    if request.opening == "custom":
        return "custom", None
    if request.opening_index == 0:
        return "default", None
    return "alternate", request.opening_index - 1


def _suffix(media_type: str) -> str:
    return {"image/png": ".png", "application/json": ".json", "application/zip": ".charx"}.get(media_type, "")
