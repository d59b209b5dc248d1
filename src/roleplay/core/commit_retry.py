"""Retry of a failed commit draft: the run-local draft cache, its token, and RFC 6902 patches.

The spec: a failed full draft "is kept only inside the current Run" and gets a token "bound to
run, turn, context epoch and Writer prompt hash"; a repair call carries only ``retry.token`` and
at most 64 ``add``/``replace``/``remove`` patches over RFC 6901 pointers; "refreshing Context or
Writer clears the cache".

Token: ``rct_`` + the first 32 hex digits of HMAC-SHA256(per-run secret, canonical JSON of the
binding and the draft's sequence number). No wall clock, no global RNG: the run passes the secret
in (from its injected id generator). The sequence number makes every failed draft's token new, so
a token of a draft that was already superseded (by a later failure) cannot resurrect it. A token
is checked by recomputing it from the *current* binding, so a token minted before a refresh, or
in another run or turn, fails the comparison even if the cache was somehow not cleared.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import jsonpatch
import jsonpointer

from roleplay.canonical import canonical_json
from roleplay.core.commit_schema import MAX_RETRY_PATCHES, PATCH_OPS
from roleplay.core.types import CommitContext
from roleplay.errors import Problem, RpError

TOKEN_PREFIX = "rct_"


@dataclass(frozen=True)
class Binding:
    run_id: str
    turn_id: str
    epoch: str
    prompt_hash: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"runId": self.run_id, "turnId": self.turn_id, "epoch": self.epoch, "promptHash": self.prompt_hash}


def binding_of(ctx: CommitContext) -> Binding:
    return Binding(ctx.run_id, ctx.turn_id, ctx.epoch, ctx.writer.prompt_hash if ctx.writer is not None else None)


def derive_token(secret: bytes, binding: Binding, seq: int) -> str:
    message = canonical_json({"v": 1, **binding.as_dict(), "draft": seq}).encode("utf-8")
    return TOKEN_PREFIX + hmac.new(secret, message, hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True)
class CachedDraft:
    args: Any  # normally a dict; a patch may have replaced the root with anything
    token: str
    binding: Binding
    seq: int


class DraftCache:
    """At most one failed draft per run: the latest. ``store`` mints its token."""

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError("the commit retry secret must be non-empty bytes")
        self._secret = bytes(secret)
        self._seq = 0
        self._draft: CachedDraft | None = None

    @property
    def current(self) -> CachedDraft | None:
        return self._draft

    def store(self, args: Any, binding: Binding) -> str:
        self._seq += 1
        token = derive_token(self._secret, binding, self._seq)
        self._draft = CachedDraft(copy.deepcopy(args), token, binding, self._seq)
        return token

    def clear(self) -> None:
        self._draft = None

    def take(self, token: Any, binding: Binding) -> CachedDraft:
        """The cached draft ``token`` names under the current ``binding``, or
        ``commit.retry.token_invalid``. The draft stays cached (a failed repair may be retried)."""
        draft = self._draft
        if draft is None:
            raise RpError(
                "commit.retry.token_invalid",
                "there is no failed commit draft to repair in this run (send a full commit)",
                pointer="/retry/token",
                details={"reason": "no-draft"},
            )
        expected = derive_token(self._secret, binding, draft.seq)
        if draft.binding != binding:
            # The context or the Writer changed since the draft failed: it was judged against
            # material that no longer holds, so it cannot be repaired, only resent.
            self._draft = None
            raise RpError(
                "commit.retry.token_invalid",
                "the context or Writer result changed since that draft failed (send a full commit)",
                pointer="/retry/token",
                details={"reason": "binding-changed"},
            )
        if not isinstance(token, str) or not hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8")):
            raise RpError(
                "commit.retry.token_invalid",
                "the retry token does not name this run's current failed draft (another run, turn, context, Writer or an older draft)",
                pointer="/retry/token",
                details={"reason": "mismatch"},
            )
        return draft


def patch_shape_problems(patches: Any) -> RpError | None:
    """The retry-specific limits, with their own stable codes, before generic schema checks."""
    if not isinstance(patches, list):
        return None  # the schema reports it
    if len(patches) > MAX_RETRY_PATCHES:
        return RpError(
            "commit.retry.too_many_patches",
            f"a retry carries at most {MAX_RETRY_PATCHES} patches, got {len(patches)} (send a full commit instead)",
            pointer="/retry/patches",
            details={"count": len(patches), "limit": MAX_RETRY_PATCHES},
        )
    bad = [
        Problem(
            "commit.retry.bad_op",
            f"patch op must be one of {', '.join(PATCH_OPS)}, got {p.get('op')!r}",
            f"/retry/patches/{i}/op",
            {"op": p.get("op")},
        )
        for i, p in enumerate(patches)
        if isinstance(p, dict) and p.get("op") not in PATCH_OPS
    ]
    if bad:
        return RpError(
            "commit.retry.bad_op", bad[0].message, pointer=bad[0].pointer, problems=bad, details={"problems": [p.to_dict() for p in bad]}
        )
    return None


def apply_patches(draft: Any, patches: list[dict[str, Any]]) -> Any:
    """Apply ``patches`` in order to a copy of ``draft``. The first one that cannot apply stops the
    repair (later ones were written against the document it would have produced)."""
    doc: Any = copy.deepcopy(draft)
    for i, patch in enumerate(patches):
        try:
            doc = jsonpatch.JsonPatch([patch]).apply(doc, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            problem = Problem(
                "commit.retry.patch_failed",
                f"patch {i} ({patch.get('op')} {patch.get('path')!r}) cannot apply: {exc}",
                f"/retry/patches/{i}",
            )
            raise RpError(
                "commit.retry.patch_failed",
                problem.message,
                pointer=problem.pointer,
                problems=[problem],
                details={"problems": [problem.to_dict()]},
            ) from None
    return doc
