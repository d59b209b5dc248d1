"""Injectable time and id sources.

Nothing that ends up in the event log may read the wall clock or a global RNG directly: replay and
tests inject a fixed clock and a counting id generator instead.
"""

from __future__ import annotations

import itertools
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Protocol

from ulid import ULID


class Clock(Protocol):
    def __call__(self) -> datetime: ...


def system_clock() -> datetime:
    return datetime.now(timezone.utc)


class FixedClock:
    """Deterministic clock for tests: starts at ``start`` and advances ``step`` per call."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(milliseconds=1)):
        self._now = start or datetime(2026, 1, 1, tzinfo=timezone.utc)
        self._step = step
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            now = self._now
            self._now = now + self._step
            return now


IdGenerator = Callable[[str], str]


def ulid_ids(prefix: str = "") -> str:
    """Sortable ids (ULID); ``prefix`` names the kind, e.g. ``ses_``."""
    return f"{prefix}{ULID()}".lower() if prefix else str(ULID()).lower()


class CountingIds:
    """Deterministic id generator for tests and replays: ``ses_000001``, ``msg_000002``…"""

    def __init__(self) -> None:
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, prefix: str = "") -> str:
        with self._lock:
            return f"{prefix}{next(self._counter):06d}"


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
