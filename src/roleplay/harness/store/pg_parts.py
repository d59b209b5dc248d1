"""New text parts of the PostgreSQL store (``texts.py``): inserted, compressed, with their ids, in
one statement of the caller's transaction (``postgres.py``; an append that brings new parts
does the same inside its own statement, ``pg_statements.APPEND_PARTS``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from .texts import Externalised, compress


async def store_parts(conn: Any, externals: list[Externalised], known: Mapping[str, int] | None = None) -> dict[str, int]:
    """The id of every part referenced, inserting (compressed) only the new ones, in the caller's
    transaction. One statement: the insert returns the ids it made, and the same statement's
    snapshot gives the ids of the parts already stored (callers pass only parts this store has not
    seen yet, so few are). Two writers inserting the same new part: the second waits on the unique
    index and does nothing; its snapshot is older than the first one's commit, so that id is read
    again afterwards."""
    texts = {h: t for x in externals for h, t in x.parts.items()}
    found = {h: known[h] for h in texts if h in known} if known else {}
    texts = {h: t for h, t in texts.items() if h not in found}
    if not texts:
        return found
    # In hash order: two transactions inserting overlapping new parts then wait on each other in
    # the same order instead of deadlocking.
    order = sorted(texts)
    keys = [bytes.fromhex(h) for h in order]
    sizes, data = await encoded_parts(texts, order)
    cur = await conn.execute(
        "WITH input AS (SELECT * FROM unnest(%b::bytea[], %b::bigint[], %b::bytea[]) AS u(sha256, size, data)), "
        "made AS (INSERT INTO text_parts(sha256, size, data) SELECT sha256, size, data FROM input ORDER BY sha256 "
        "ON CONFLICT (sha256) DO NOTHING RETURNING sha256, id) "
        "SELECT sha256, id FROM made UNION ALL SELECT sha256, id FROM text_parts WHERE sha256 = ANY(%b)",
        (keys, sizes, data, keys),
    )
    ids = {bytes(digest).hex(): pid for digest, pid in await cur.fetchall()}
    missing = [bytes.fromhex(h) for h in order if h not in ids]
    if missing:  # another writer's part, committed while this statement waited for it
        cur = await conn.execute("SELECT sha256, id FROM text_parts WHERE sha256 = ANY(%b)", (missing,))
        ids.update((bytes(digest).hex(), pid) for digest, pid in await cur.fetchall())
    return {**found, **ids}


async def encoded_parts(texts: Mapping[str, str], order: list[str]) -> tuple[list[int], list[bytes]]:
    """The UTF-8 sizes and compressed bytes of these new parts, in this order."""

    def encoded() -> tuple[list[int], list[bytes]]:
        return [len(texts[h].encode("utf-8")) for h in order], [compress(texts[h]) for h in order]

    # Megabytes of new parts (a fresh process's first snapshot of a long story: 130 ms; its first
    # Writer prompt) are compressed on a thread, not on the event loop (issue 16); a turn's few
    # are not worth a hop.
    return await asyncio.to_thread(encoded) if sum(map(len, texts.values())) >= 1 << 18 else encoded()
