"""Canonical JSON and hashes: prompt hashes, context epochs and snapshot keys must not depend on
dict order or whitespace, so everything hashed goes through here."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 text kept as is (``ensure_ascii=False``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(value: Any) -> str:
    data = value if isinstance(value, str) else canonical_json(value)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, for messages such as "expected a string, got array"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    return "object"
