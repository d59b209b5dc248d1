"""Retry tokens, the one-draft cache and RFC 6902 patch application."""

from __future__ import annotations

import copy

import pytest

from roleplay.core.commit_retry import (
    Binding,
    DraftCache,
    apply_patches,
    derive_token,
    patch_shape_problems,
)
from roleplay.errors import RpError

BINDING = Binding("run1", "turn1", "epoch1", "ph1")
DRAFT = {"references": {"writer": "w"}, "effects": [{"kind": "k", "n": 1}], "summary": "s"}


def test_tokens_are_deterministic_and_bound_to_every_field() -> None:
    token = derive_token(b"secret", BINDING, 1)
    assert token == derive_token(b"secret", BINDING, 1)
    assert token.startswith("rct_") and len(token) == 4 + 32
    variants = {
        derive_token(b"secret", Binding("run2", "turn1", "epoch1", "ph1"), 1),
        derive_token(b"secret", Binding("run1", "turn2", "epoch1", "ph1"), 1),
        derive_token(b"secret", Binding("run1", "turn1", "epoch2", "ph1"), 1),
        derive_token(b"secret", Binding("run1", "turn1", "epoch1", "ph2"), 1),
        derive_token(b"secret", BINDING, 2),
        derive_token(b"other", BINDING, 1),
    }
    assert token not in variants and len(variants) == 6


def test_the_cache_hands_back_a_copy_of_the_latest_draft_only() -> None:
    cache = DraftCache(b"secret")
    draft = copy.deepcopy(DRAFT)
    first = cache.store(draft, BINDING)
    draft["summary"] = "mutated after storing"
    assert cache.take(first, BINDING).args == DRAFT
    second = cache.store(DRAFT, BINDING)
    assert second != first
    with pytest.raises(RpError) as caught:
        cache.take(first, BINDING)
    assert caught.value.code == "commit.retry.token_invalid" and caught.value.details == {"reason": "mismatch"}
    assert cache.take(second, BINDING).seq == 2
    assert cache.current is not None  # taking does not consume: a failed repair may be retried


def test_no_draft_and_changed_binding_are_told_apart() -> None:
    cache = DraftCache(b"secret")
    with pytest.raises(RpError) as caught:
        cache.take("rct_x", BINDING)
    assert caught.value.details == {"reason": "no-draft"}
    token = cache.store(DRAFT, BINDING)
    with pytest.raises(RpError) as caught:
        cache.take(token, Binding("run1", "turn1", "epoch2", "ph1"))
    assert caught.value.details == {"reason": "binding-changed"} and caught.value.pointer == "/retry/token"
    assert cache.current is None  # a draft judged against void material is dropped


def test_non_string_tokens_are_rejected() -> None:
    cache = DraftCache(b"secret")
    cache.store(DRAFT, BINDING)
    with pytest.raises(RpError):
        cache.take(123, BINDING)


def test_a_secret_is_required() -> None:
    with pytest.raises(ValueError):
        DraftCache(b"")


def test_patch_shape_limits() -> None:
    ok = [{"op": "remove", "path": "/summary"}] * 64
    assert patch_shape_problems(ok) is None
    too_many = patch_shape_problems(ok + ok[:1])
    assert too_many is not None and too_many.code == "commit.retry.too_many_patches" and too_many.pointer == "/retry/patches"
    bad = patch_shape_problems([{"op": "copy", "from": "/a", "path": "/b"}, {"op": "add", "path": "/x", "value": 1}, {"path": "/y"}])
    assert bad is not None and bad.code == "commit.retry.bad_op"
    assert [(p.pointer, p.details) for p in bad.problems] == [
        ("/retry/patches/0/op", {"op": "copy"}),
        ("/retry/patches/2/op", {"op": None}),
    ]
    assert patch_shape_problems("not a list") is None  # left to the schema


def test_patches_apply_in_order_without_touching_the_draft() -> None:
    draft = copy.deepcopy(DRAFT)
    rebuilt = apply_patches(
        draft,
        [
            {"op": "add", "path": "/effects/-", "value": {"kind": "k", "n": 2}},
            {"op": "replace", "path": "/effects/1/n", "value": 3},
            {"op": "remove", "path": "/summary"},
            {"op": "add", "path": "/body", "value": "正文"},
        ],
    )
    assert rebuilt == {"references": {"writer": "w"}, "effects": [{"kind": "k", "n": 1}, {"kind": "k", "n": 3}], "body": "正文"}
    assert draft == DRAFT


@pytest.mark.parametrize(
    "patch",
    [
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "remove", "path": "/effects/5"},
        {"op": "add", "path": "no-leading-slash", "value": 1},
        {"op": "add", "path": "/x"},
    ],
)
def test_a_patch_that_cannot_apply_is_reported_at_its_index(patch: dict) -> None:
    with pytest.raises(RpError) as caught:
        apply_patches(DRAFT, [{"op": "remove", "path": "/summary"}, patch])
    assert caught.value.code == "commit.retry.patch_failed"
    assert caught.value.pointer == "/retry/patches/1"
    assert caught.value.details["problems"][0]["pointer"] == "/retry/patches/1"
