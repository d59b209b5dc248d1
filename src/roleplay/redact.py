"""Redacting credentials from URLs before they are stored or shown.

Users paste base and database URLs with credentials in them (``http://user:pass@host/v1?token=…``,
``postgresql://app:pw@db/rp``). Every place that stores or prints a URL (route records, model
labels, error messages, CLI output) passes it through :func:`redact_url`, so the log never holds a
secret that an ``rp sessions events`` would then show to anyone reading it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# A URL inside free text (an SDK or provider message), up to whitespace or a quote.
_URL_IN_TEXT = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``url`` with its userinfo replaced by ``***`` and each query value by ``***``.

    The userinfo goes as a whole: a lone user part is often a token (``https://<token>@host``).
    Query names stay, so ``?token=***`` still says what was configured.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        # Not parseable as a URL (e.g. a broken IPv6 host): show nothing that could be a secret.
        return _fallback(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = "&".join(
        f"{name}={MASK}" if sep else MASK for name, sep, _ in (item.partition("=") for item in parts.query.split("&")) if name or sep
    )
    if netloc == parts.netloc and query == parts.query:
        return url  # nothing to hide; keep the text exactly (urlunsplit would drop an empty ``//``)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_urls(text: str) -> str:
    """Every URL in ``text`` through :func:`redact_url`."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def _fallback(url: str) -> str:
    head, sep, rest = url.partition("://")
    if not sep:
        return MASK
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    return f"{head}://{MASK}@{host}/…" if "@" in rest.split("/", 1)[0] else f"{head}://{host}/…"
