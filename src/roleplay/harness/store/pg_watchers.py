"""Which sessions another process streams, so that chunk deltas cross by NOTIFY only to those (issue 16).

Every streamed reply delta went out as a NOTIFY (a statement each: about 30 a turn, the largest
share of a PostgreSQL turn's statements) and came back to this same process's listener, to be
decoded and dropped, although in one process, or with the stream and the turn in the same one,
nobody else wants it. Now:

- A process holds a *watch lock* (a shared session-level advisory lock, on its lease connection,
  so it goes with the process) on the bucket of every session it has a subscriber on, and when a
  session gains its first subscriber it sends a ``w`` notification naming it, with the lock. Both
  follow the subscribers :data:`WATCH_DELAY` later, so a subscriber that comes and goes at once
  costs nothing, and many changes cost one statement. Buckets (:data:`BUCKETS`) bound the locks
  a process holds, whatever its number of streams: the lock table is shared by the whole server.
  A bucket that another session holds only makes chunks cross for nothing, as they all did before.
- A run's lease statement also reads whether another backend holds the session's bucket
  (``pg_leases.LOCK_SQL``), and the listener hears the ``w`` notifications: :class:`Watchers`
  keeps what they say. Chunks are sent across unless the session is known to have no watcher
  elsewhere.

The lease statement's "no" is kept only when no ``w`` for that session was heard since the
statement was sent (its read of ``pg_locks`` may have come before that watcher's lock; the ``w``,
sent with the lock, arrives after it), and only while the listener runs (else a ``w`` could be
missed; it runs from the store's first subscriber on, in ``rp serve`` from the first turn's
start). An unknown session counts as watched, and one whose watcher left stays watched until its
next lease: both only cost a notification. A watcher that appears during a turn gets the chunks
from its ``w`` on, as if it had subscribed a moment later; the events, durable, always cross.
"""

from __future__ import annotations

import zlib

BUCKETS = 64
WATCH_DELAY = 0.1  # seconds from a change in the sessions subscribed here to the watch locks' update
KEPT = 100_000  # sessions remembered, each way; past that the memory starts again (as unknown)

_KEY = "hashtextextended(current_schema() || ':watch:' || {bucket}, 0)"
# Whether a backend other than the one running the statement holds this bucket's watch lock.
WATCHED_SQL = (
    "EXISTS (SELECT 1 FROM pg_locks l, (SELECT " + _KEY.format(bucket="%s::text") + " AS k) h"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid <> pg_backend_pid()"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid::bigint = ((h.k >> 32) & 4294967295) AND l.objid::bigint = (h.k & 4294967295))"
)
# Unlock the buckets left, lock the new ones, announce the newly watched sessions, in one statement.
# ``pg_try_advisory_lock_shared`` never waits (no one takes these locks exclusively). The
# notifications go out at the statement's commit, after the locks are taken; ``pg_notify``
# returns void, so its WHERE only runs it, once a row.
WATCH_SQL = (
    "SELECT (SELECT count(*) FROM unnest(%b::int[]) AS u(b) WHERE pg_advisory_unlock_shared("
    + _KEY.format(bucket="u.b::text")
    + ")), (SELECT count(*) FROM unnest(%b::int[]) AS w(b) WHERE pg_try_advisory_lock_shared("
    + _KEY.format(bucket="w.b::text")
    + ")), (SELECT count(*) FROM unnest(%b::text[]) WITH ORDINALITY AS n(p, i) WHERE pg_notify(%s, n.p) IS NULL)"
)


def bucket(session_id: str) -> int:
    """The session's watch bucket: the same in every process (crc32, not Python's salted hash)."""
    return zlib.crc32(session_id.encode("utf-8")) % BUCKETS


class Watchers:
    """What this process knows of other processes' subscribers, per session (module docstring)."""

    def __init__(self) -> None:
        self.listening = False
        self._heard = 0  # ``w`` notifications heard (and restarts of what is known), a clock
        self._floor = 0  # a check sent before this is not trusted
        self._last_heard: dict[str, int] = {}
        self._unwatched: set[str] = set()

    def watched(self, session_id: str) -> bool:
        """Whether chunks of this session should be sent across."""
        return session_id not in self._unwatched

    def stamp(self) -> int | None:
        """Taken before a check is sent; None when the listener does not run (nothing is kept)."""
        return self._heard if self.listening else None

    def checked(self, session_id: str, watched: bool, stamp: int | None) -> None:
        """A check's answer: whether another process watched the session when it was read."""
        if watched:
            self._unwatched.discard(session_id)
            return
        if stamp is None or not self.listening or stamp < self._floor or self._last_heard.get(session_id, -1) > stamp:
            return
        if len(self._unwatched) >= KEPT:
            self._unwatched.clear()
        self._unwatched.add(session_id)

    def heard(self, session_id: str) -> None:
        """Another process announced a subscriber on this session."""
        self._unwatched.discard(session_id)
        if len(self._last_heard) >= KEPT:
            self._restart()
        self._heard += 1
        self._last_heard[session_id] = self._heard

    def started(self) -> None:
        """The listener listens (from now on every ``w`` is heard)."""
        self._restart()
        self.listening = True

    def stopped(self) -> None:
        self.listening = False
        self._unwatched.clear()

    def _restart(self) -> None:
        self._last_heard.clear()
        self._heard += 1
        self._floor = self._heard
