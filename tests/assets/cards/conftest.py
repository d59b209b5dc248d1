"""Factories for small synthetic PNGs and card objects (corpus files are never copied here)."""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib
from typing import Any

import pytest
from PIL import Image

from roleplay.assets.cards.png_chunks import PNG_SIGNATURE, iter_chunks


def raw_chunk(ctype: bytes, body: bytes, *, crc: int | None = None) -> bytes:
    value = zlib.crc32(ctype + body) & 0xFFFFFFFF if crc is None else crc
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", value)


def text_body(kind: str, keyword: str, value: bytes) -> bytes:
    kw = keyword.encode("latin-1") + b"\x00"
    if kind == "tEXt":
        return kw + value
    if kind == "zTXt":
        return kw + b"\x00" + zlib.compress(value)
    if kind == "iTXt":
        return kw + b"\x01\x00" + b"en\x00" + b"\x00" + zlib.compress(value)
    if kind == "iTXt-plain":
        return kw + b"\x00\x00" + b"\x00" + b"\x00" + value
    raise ValueError(kind)


def tiny_png(size: tuple[int, int] = (4, 3), color: tuple[int, int, int] = (200, 30, 60)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def build_png(
    before: list[tuple[str, str, bytes]] = (),
    after: list[tuple[str, str, bytes]] = (),
    *,
    base: bytes | None = None,
    extra_before_idat: list[tuple[bytes, bytes]] = (),
) -> bytes:
    """Insert (kind, keyword, value) text chunks before the first IDAT and/or before IEND."""
    source = base if base is not None else tiny_png()
    out = [PNG_SIGNATURE]
    placed = False
    for chunk in iter_chunks(source):
        if chunk.type == b"IDAT" and not placed:
            out.extend(raw_chunk(ctype, body) for ctype, body in extra_before_idat)
            out.extend(raw_chunk(k.replace("-plain", "").encode(), text_body(k, kw, v)) for k, kw, v in before)
            placed = True
        if chunk.type == b"IEND":
            out.extend(raw_chunk(k.replace("-plain", "").encode(), text_body(k, kw, v)) for k, kw, v in after)
        out.append(raw_chunk(chunk.type, bytes(chunk.data)))
    return b"".join(out)


def b64json(obj: Any) -> bytes:
    return base64.b64encode(json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def v2_card(**data: Any) -> dict[str, Any]:
    base = {
        "name": "Alice",
        "description": "A curious traveller.",
        "personality": "bold",
        "scenario": "A road at dusk.",
        "first_mes": "Hello, {{user}}.",
        "mes_example": "<START>\n{{char}}: Hi.",
        "creator_notes": "notes",
        "system_prompt": "Be Alice. {{original}}",
        "post_history_instructions": "Stay in character.",
        "alternate_greetings": ["Hi!", "Yo."],
        "tags": ["fantasy"],
        "creator": "someone",
        "character_version": "1.0",
        "extensions": {"talkativeness": "0.5", "x_custom": {"nested": [1, 2]}},
    }
    base.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": base}


def v3_card(**data: Any) -> dict[str, Any]:
    card = v2_card(**data)
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].setdefault("group_only_greetings", ["Hi all"])
    return card


@pytest.fixture(scope="session")
def helpers() -> Any:
    """Module-level helpers as attributes, for tests that need several of them."""

    class _Helpers:
        raw_chunk = staticmethod(raw_chunk)
        text_body = staticmethod(text_body)
        tiny_png = staticmethod(tiny_png)
        build_png = staticmethod(build_png)
        b64json = staticmethod(b64json)
        v2_card = staticmethod(v2_card)
        v3_card = staticmethod(v3_card)

    return _Helpers()
