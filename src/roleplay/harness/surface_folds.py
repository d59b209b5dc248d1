"""Folds over a session's surface nodes, continued across turns instead of started again.

A runtime derives views from the surface at every turn (the conversation as Writer material, the
story as the parent's history). Deriving them from all nodes each time makes a turn's cost grow
with the story (issue 12). The surface only grows between turns except when an event rewrites it
(a replacement, a compaction: ``surface.rewrites_surface``), and the service's projection cache
knows when that last happened (``Loaded.appends_since``). So a fold kept per (view, session) is
fed only the nodes added since it last ran, and starts again after a rewrite, after the cache
lost track (``appends_since`` None or newer), or when its owner says its inputs changed.

A fold is any object with ``feed(node) -> bool | None`` (False: stop, the rest is not part of the
view). Its result must equal a fresh fold over the same nodes; ``tests/harness/test_surface_folds.py``
and the owners' tests check that against full folds, across rewrites, forks and other writers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from .projections import Loaded


class SurfaceFold(Protocol):
    def feed(self, node: dict[str, Any]) -> bool | None: ...


F = TypeVar("F", bound=SurfaceFold)


@dataclass
class _Kept:
    fold: Any
    seq: int  # the surface's seq when the fold last ran
    count: int  # nodes fed (or looked at, once the fold stopped)
    stopped: bool


class SurfaceFolds:
    """The folds of a process's sessions, by (view name, session). Bounded: the least recently
    used is dropped, which costs one fold from the first node, never a different result."""

    def __init__(self, max_entries: int = 256) -> None:
        self._kept: dict[tuple[str, str], _Kept] = {}
        self._max = max_entries

    def fold(
        self,
        name: str,
        session_id: str,
        surface: Loaded,
        start: Callable[[], F],
        *,
        count: int | None = None,
        reuse: Callable[[F], bool] | None = None,
    ) -> F:
        """``start()`` fed the first ``count`` nodes (all by default) of ``surface``, which must
        come from the session service's projection cache (``SessionService.projection``).

        The fold is continued from the one kept for (name, session) when the surface only grew
        since and ``reuse(kept)`` agrees (it may update the fold's own inputs); otherwise a new
        one starts. The fold returned is shared: read it, copy what you keep, never feed it."""
        nodes = surface.state["nodes"]
        count = len(nodes) if count is None else count
        key = (name, session_id)
        kept = self._kept.pop(key, None)
        if kept is not None and surface.upto_seq < kept.seq:
            # An older state than the one the fold has seen: answer it without touching the fold.
            self._kept[key] = kept
            return _feed(start(), nodes, 0, count)[0]
        if (
            kept is None
            or surface.appends_since is None
            or surface.appends_since > kept.seq
            or count < kept.count
            or (reuse is not None and not reuse(kept.fold))
        ):
            kept = _Kept(start(), surface.upto_seq, 0, False)
        if not kept.stopped:
            kept.fold, kept.stopped = _feed(kept.fold, nodes, kept.count, count)
        kept.count, kept.seq = count, surface.upto_seq
        self._kept[key] = kept  # most recently used last
        while len(self._kept) > self._max:
            self._kept.pop(next(iter(self._kept)))
        return kept.fold  # type: ignore[no-any-return]

    def drop(self, session_id: str | None = None) -> None:
        """Forget the folds of one session (all sessions without one)."""
        for key in [k for k in self._kept if session_id is None or k[1] == session_id]:
            del self._kept[key]


def _feed(fold: F, nodes: list[dict[str, Any]], start: int, stop: int) -> tuple[F, bool]:
    feed = fold.feed
    # A slice, not ``islice``: that steps over the ``start`` nodes already fed, a long story's
    # whole surface at every call.
    for node in nodes[start:stop]:
        if feed(node) is False:
            return fold, True
    return fold, False
