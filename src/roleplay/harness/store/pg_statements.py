"""The statements of the PostgreSQL event store's appends (``postgres.py``), kept apart: each
is one round trip, so what would be several steps is spelled out in SQL here."""

from __future__ import annotations

import functools
from typing import Any

from .base import SESSION_COLUMNS

# Array parameters are ``%b`` (binary) throughout the PostgreSQL store: psycopg writes a text-format
# array element by element through a regular expression (quoting and escaping), about 3.5 times
# the CPU of the binary form, and a turn sends dozens of them (parts of prompts, ids, payloads).

# An append in one statement: move the head (a compare-and-swap, or at whatever the head is), insert
# the rows at seqs counted back from the new head, and notify; nothing is inserted when the head
# did not move. The second column is the head as this statement's snapshot saw it (NULL: no
# session); the last is NULL, or the lock a new session's insert takes (``INSERT_HEAD``, ``LOCK_NEW``).
CAS_HEAD = "UPDATE sessions SET head_seq = head_seq + %s, updated_at = %s WHERE id = %s AND head_seq = %s RETURNING head_seq"
AT_HEAD = "UPDATE sessions SET head_seq = head_seq + %s, updated_at = %s WHERE id = %s RETURNING head_seq"
APPEND = (
    "WITH head AS ({head}), "
    "ins AS (INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) "
    "SELECT %s, head.head_seq + u.o, u.t, u.v, u.p::json, u.x, %s, u.z FROM head, "
    "(VALUES {rows}) AS u(o, t, v, p, x, z) RETURNING 1), "
    "note AS (SELECT pg_notify(%s, coalesce(%s, json_build_object("
    "'o', %s::text, 'k', 'e', 's', %s::text, 'f', head.head_seq - %s + 1, 'l', head.head_seq)::text)) FROM head) "
    "SELECT (SELECT head_seq FROM head), (SELECT head_seq FROM sessions WHERE id = %s), "
    "(SELECT count(*) FROM ins), (SELECT count(*) FROM note), {lock}"
)
APPEND_ROW = "(%s::bigint, %s::text, %s::int, %s::text, %s::text, %s::bytea)"
APPEND_ROWS_MAX = 32  # more events than this go as arrays (one statement text for any number)
APPEND_ARRAYS = "SELECT * FROM unnest(%b::bigint[], %b::text[], %b::int[], %b::text[], %b::text[], %b::bytea[])"


@functools.lru_cache(maxsize=4 * (APPEND_ROWS_MAX + 1))
def append_sql(head_sql: str, n: int, lock: str = "NULL") -> str:
    """``APPEND`` for ``n`` events, a row of scalar parameters each: psycopg dumps scalars in C,
    arrays of them in Python at several times the cost (most appends are of 1 to 4 events, so
    few statements are prepared). A long batch goes as six arrays."""
    rows = ", ".join([APPEND_ROW] * n) if n <= APPEND_ROWS_MAX else None
    return (
        APPEND.format(head=head_sql, rows=rows, lock=lock)
        if rows
        else APPEND.replace("(VALUES {rows})", f"({APPEND_ARRAYS})").format(head=head_sql, lock=lock)
    )


def append_params(rows: list[tuple[Any, ...]]) -> list[Any]:
    """The events' parameters in ``append_sql``'s order: row by row, or column by column."""
    if len(rows) <= APPEND_ROWS_MAX:
        return [value for row in rows for value in row]
    return [list(column) for column in zip(*rows, strict=True)]


# The same with new text parts: they are inserted (in hash order, like ``pg_parts.store_parts``) and the
# ids they get, with those of the ones already stored, fill the events' ``texts`` columns: the
# literal pieces and part references (``p``) of each event (``ev``, its offset) are joined in order.
# The head moves only when every new part has an id (another writer's part, committed while the
# insert waited on it, is not in this statement's snapshot); when it does not move, the statement
# fails on purpose so the parts it inserted go with it, and the caller takes the slower path.
APPEND_PARTS = (
    "WITH input AS (SELECT * FROM unnest(%b::bytea[], %b::bigint[], %b::bytea[]) AS u(sha256, size, data)), "
    "made AS (INSERT INTO text_parts(sha256, size, data) SELECT sha256, size, data FROM input ORDER BY sha256 "
    "ON CONFLICT (sha256) DO NOTHING RETURNING sha256, id), "
    "ids AS (SELECT sha256, id FROM made UNION ALL SELECT sha256, id FROM text_parts WHERE sha256 = ANY(%b)), "
    "head AS ({head} AND (SELECT count(*) FROM ids) = %s RETURNING head_seq), "
    "tx AS (SELECT p.ev, string_agg(coalesce(p.lit, ids.id::text), '' ORDER BY p.ord) AS x "
    "FROM unnest(%b::bigint[], %b::text[], %b::bytea[]) WITH ORDINALITY AS p(ev, lit, ref, ord) "
    "LEFT JOIN ids ON ids.sha256 = p.ref GROUP BY p.ev), "
    "ins AS (INSERT INTO events(session_id, seq, type, v, payload, texts, created_at, payload_z) "
    "SELECT %s, head.head_seq + u.o, u.t, u.v, u.p::json, coalesce(u.x, tx.x), %s, u.z FROM head "
    "CROSS JOIN unnest(%b::bigint[], %b::text[], %b::int[], %b::text[], %b::text[], %b::bytea[]) AS u(o, t, v, p, x, z) "
    "LEFT JOIN tx ON tx.ev = u.o RETURNING 1), "
    "note AS (SELECT pg_notify(%s, coalesce(%s, json_build_object("
    "'o', %s::text, 'k', 'e', 's', %s::text, 'f', head.head_seq - %s + 1, 'l', head.head_seq)::text)) FROM head) "
    "SELECT (SELECT head_seq FROM head), (SELECT count(*) FROM ins), (SELECT count(*) FROM note), "
    "(SELECT array_agg(sha256) FROM ids), (SELECT array_agg(id) FROM ids), "
    "(CASE WHEN (SELECT count(*) FROM head) = 0 THEN %s::text || (SELECT count(*) FROM ids) END)::int, {lock}"
)
NOT_APPENDED_MARK = "rp:not-appended"
INSERT_SESSION = f"INSERT INTO sessions({SESSION_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
# A new session with its first events, as an append whose "head" is the session's insert (seqs 1…n).
INSERT_HEAD = f"INSERT INTO sessions({SESSION_COLUMNS}) SELECT %s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s WHERE true RETURNING head_seq"
# Its run lease, taken by the same statement (on the lease connection) once the session is in and
# its parent's foreign key will hold: a session-level lock outlives a failed statement.
LOCK_NEW = (
    "(SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':run:' || %s, 0)) FROM head "
    "WHERE %s::text IS NULL OR EXISTS (SELECT 1 FROM sessions p WHERE p.id = %s))"
)
