from __future__ import annotations

import io
import json
import time
import zipfile

import pytest

from roleplay.assets.cards.charx import CharxLimits, read_charx
from roleplay.errors import RpError


def make_charx(files: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(name) if name.endswith("/") else name, data)
    return out.getvalue()


def card_json(helpers, **data) -> bytes:
    card = helpers.v3_card(
        assets=[
            {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
            {"type": "emotion", "uri": "embeded://assets/emotion/images/happy.png", "name": "happy", "ext": "png"},
        ],
        **data,
    )
    return json.dumps(card).encode()


def test_reads_card_and_main_icon(helpers):
    icon = helpers.tiny_png()
    data = make_charx(
        {
            "card.json": card_json(helpers),
            "assets/icon/images/main.png": icon,
            "assets/emotion/images/happy.png": icon,
            "module.risum": b"\x00",
        }
    )
    content = read_charx(data)
    assert content.card_json["data"]["name"] == "Alice"
    assert content.main_icon == "assets/icon/images/main.png"
    assert content.icons == {"assets/icon/images/main.png": icon}  # emotions are not extracted
    codes = [w.code for w in content.warnings]
    assert "card.charx.risum_ignored" in codes
    not_imported = next(w for w in content.warnings if w.code == "card.charx.assets_not_imported")
    assert not_imported.details["entries"] == ["assets/emotion/images/happy.png", "module.risum"]


def test_embedded_typo_prefix_and_missing_asset(helpers):
    card = helpers.v3_card(
        assets=[
            {"type": "icon", "uri": "embedded://a.png", "name": "main", "ext": "png"},
            {"type": "icon", "uri": "embeded://gone.png", "name": "alt", "ext": "png"},
        ]
    )
    content = read_charx(make_charx({"card.json": json.dumps(card).encode(), "a.png": b"img"}))
    assert content.main_icon == "a.png" and content.icons == {"a.png": b"img"}
    assert any(w.code == "card.charx.asset_missing" and w.pointer == "zip:gone.png" for w in content.warnings)


def test_missing_card_json():
    with pytest.raises(RpError) as info:
        read_charx(make_charx({"other.json": b"{}"}))
    assert info.value.code == "card.charx.no_card_json"


@pytest.mark.parametrize("name", ["../evil.png", "/abs.png", "a/../../b", "C:/win.png", "dir\\..\\x"])
def test_unsafe_paths_are_rejected(helpers, name):
    with pytest.raises(RpError) as info:
        read_charx(make_charx({"card.json": card_json(helpers), name: b"x"}))
    assert info.value.code == "card.charx.unsafe_path"
    assert info.value.pointer == f"zip:{name}"


def test_zip_bomb_is_rejected_quickly(helpers):
    bomb = make_charx({"card.json": card_json(helpers), "assets/huge.bin": b"\x00" * (48 * 1024 * 1024)})
    assert len(bomb) < 200_000
    started = time.monotonic()
    with pytest.raises(RpError) as info:
        read_charx(bomb)
    assert info.value.code == "card.charx.zip_bomb"
    assert time.monotonic() - started < 1.0


def test_entry_count_total_and_entry_limits(helpers):
    files = {"card.json": card_json(helpers), **{f"f{i}.txt": b"abc" for i in range(10)}}
    with pytest.raises(RpError) as info:
        read_charx(make_charx(files), limits=CharxLimits(max_entries=5))
    assert info.value.code == "card.charx.too_many_entries"
    with pytest.raises(RpError) as info:
        read_charx(make_charx(files), limits=CharxLimits(max_total_uncompressed=100))
    assert info.value.code == "card.charx.too_large"
    with pytest.raises(RpError) as info:
        read_charx(make_charx(files), limits=CharxLimits(max_entry_bytes=10))
    assert info.value.code == "card.charx.too_large"
    with pytest.raises(RpError) as info:
        read_charx(make_charx(files), limits=CharxLimits(max_archive_bytes=10))
    assert info.value.code == "card.charx.too_large"


def test_oversized_icon_is_a_warning_not_a_failure(helpers):
    data = make_charx({"card.json": card_json(helpers), "assets/icon/images/main.png": b"x" * 5000})
    content = read_charx(data, limits=CharxLimits(max_asset_bytes=100))
    assert content.icons == {} and content.main_icon is None
    assert any(w.code == "card.charx.too_large" for w in content.warnings)


def test_lying_declared_size_is_caught_as_corrupt(helpers):
    data = bytearray(make_charx({"card.json": card_json(helpers)}, compression=zipfile.ZIP_STORED))
    # Flip a byte of the stored card.json: the CRC check must fail instead of returning junk.
    at = data.index(b'"spec"')
    data[at + 1] ^= 0x20
    with pytest.raises(RpError) as info:
        read_charx(bytes(data))
    assert info.value.code == "card.charx.corrupt"


def test_encrypted_entry_is_rejected(helpers):
    data = bytearray(make_charx({"card.json": card_json(helpers)}))
    # Set the "encrypted" flag bit in both the local header and the central directory.
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.index(sig)
        flag_at = at + (6 if sig == b"PK\x03\x04" else 8)
        data[flag_at] |= 0x01
    with pytest.raises(RpError) as info:
        read_charx(bytes(data))
    assert info.value.code == "card.charx.encrypted"


def test_garbage_and_non_object_card(helpers):
    with pytest.raises(RpError) as info:
        read_charx(b"PK\x03\x04garbage")
    assert info.value.code == "card.charx.corrupt"
    with pytest.raises(RpError) as info:
        read_charx(b"not a zip")
    assert info.value.code == "card.charx.not_zip"
    with pytest.raises(RpError) as info:
        read_charx(make_charx({"card.json": b"[1, 2]"}))
    assert info.value.code == "card.json.not_object"


def test_sfx_prefix_is_tolerated_with_warning(helpers):
    data = b"\xff\xd8\xff" + b"JPEGDATA" * 10 + make_charx({"card.json": card_json(helpers)})
    content = read_charx(data)
    assert content.card_json["spec"] == "chara_card_v3"
    assert content.warnings[0].code == "card.charx.prefixed"


def test_corpus_charx(corpus_dir):
    content = read_charx((corpus_dir / "cards" / "test_character.charx").read_bytes())
    assert content.card_json["data"]["name"] == "Test Character"
    assert content.main_icon == "assets/main.png"
    assert content.icons["assets/main.png"].startswith(b"\x89PNG")
