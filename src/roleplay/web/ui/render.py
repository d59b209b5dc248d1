"""Message text to safe HTML: markdown-it-py renders, nh3 sanitises.

Story text is a stranger's text (cards, models), so it is rendered with raw HTML *off* (a
``<script>`` in a card becomes visible text) and the result is cleaned again by nh3 with a short
allow-list: no attributes but ``href``/``title`` on links and ``alt`` on images, links only to
http(s) and mailto, and every link opens with ``rel="noopener noreferrer nofollow"``. Two layers,
so a markdown-it plugin or option change cannot open a hole on its own; the page's
Content-Security-Policy (no inline script) is the third.

Roleplay convention: single line breaks are kept (``breaks``), and ``*action*`` is emphasis as in
CommonMark.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

_MD = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False}).enable("strikethrough").enable("table")
# Only for text a card's display script produced (status panels): its HTML goes through nh3 too.
_MD_HTML = MarkdownIt("commonmark", {"html": True, "breaks": True, "linkify": False}).enable("strikethrough").enable("table")

ALLOWED_TAGS = frozenset(
    {"p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li", "hr", "a", "img",
     "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
     "div", "span", "details", "summary", "b", "i", "u", "small", "sub", "sup"}
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "img": {"src", "alt", "title"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def sanitize(html: str) -> str:
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags={"script", "style"},
        attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: str, *, html: bool = False) -> Markup:
    """Markdown to sanitised HTML, safe to put in a page as is. ``html`` lets raw HTML through
    markdown (for a card display script's output); the sanitiser still decides what stays."""
    return Markup(sanitize((_MD_HTML if html else _MD).render(text or "")))


__all__ = ["render_markdown", "sanitize"]
