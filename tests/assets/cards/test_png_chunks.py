from __future__ import annotations

import struct
import zlib

import pytest

from roleplay.assets.cards.png_chunks import (
    PNG_SIGNATURE,
    iter_chunks,
    read_text_chunks,
    rewrite_png,
    text_chunk,
)
from roleplay.errors import RpError


def _types(png: bytes) -> list[str]:
    return [c.type_name for c in iter_chunks(png)]


def test_reads_text_before_and_after_idat(helpers):
    png = helpers.build_png(before=[("tEXt", "Title", b"early")], after=[("tEXt", "chara", b"late")])
    scan = read_text_chunks(png)
    found = [(t.keyword, t.text, t.after_idat) for t in scan.texts]
    assert found == [("Title", b"early", False), ("chara", b"late", True)]
    assert scan.problems == []
    assert scan.chunk_types[0] == "IHDR" and scan.chunk_types[-1] == "IEND"


@pytest.mark.parametrize("kind", ["zTXt", "iTXt", "iTXt-plain"])
def test_reads_compressed_and_international_text(helpers, kind):
    png = helpers.build_png(after=[(kind, "ccv3", b"payload-\xc3\xa9")])
    (text,) = read_text_chunks(png).texts
    assert text.keyword == "ccv3"
    assert text.text == b"payload-\xc3\xa9"
    assert text.chunk_type == kind.replace("-plain", "")


def test_unwanted_keywords_are_not_inflated(helpers):
    # A bomb in an irrelevant chunk costs nothing because it is never decompressed.
    bomb = zlib.compress(b"\x00" * (8 * 1024 * 1024), 9)
    png = helpers.build_png(before=[("tEXt", "chara", b"x")], extra_before_idat=[(b"zTXt", b"prompt\x00\x00" + bomb)])
    scan = read_text_chunks(png, wanted=lambda k: k == "chara", max_text_bytes=1024)
    assert [t.keyword for t in scan.texts] == ["chara"]


def test_decompression_bomb_in_wanted_chunk_is_rejected(helpers):
    png = helpers.build_png(after=[("zTXt", "chara", b"A" * 100_000)])
    with pytest.raises(RpError) as info:
        read_text_chunks(png, max_text_bytes=10_000)
    assert info.value.code == "card.png.text_too_large"


def test_total_text_is_bounded(helpers):
    png = helpers.build_png(after=[("tEXt", "a", b"1" * 600), ("tEXt", "b", b"2" * 600)])
    with pytest.raises(RpError) as info:
        read_text_chunks(png, max_total_text_bytes=1000)
    assert info.value.code == "card.png.text_too_large"


def test_bad_crc_is_reported_not_fatal(helpers):
    base = helpers.build_png(after=[("tEXt", "chara", b"data")])
    idx = base.index(b"tEXtchara")
    length = struct.unpack(">I", base[idx - 4 : idx])[0]
    crc_at = idx + 4 + length
    broken = base[:crc_at] + b"\x00\x00\x00\x00" + base[crc_at + 4 :]
    scan = read_text_chunks(broken)
    assert [t.text for t in scan.texts] == [b"data"]
    assert [p.code for p in scan.problems] == ["card.png.crc_mismatch"]
    assert scan.problems[0].pointer == f"byte:{idx - 4}"


def test_malformed_ztxt_is_skipped_with_warning(helpers):
    png = helpers.build_png(extra_before_idat=[(b"zTXt", b"chara\x00\x00not-zlib")])
    scan = read_text_chunks(png)
    assert scan.texts == []
    assert [p.code for p in scan.problems] == ["card.png.bad_text_chunk"]


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda b: b[:-20], "card.png.truncated"),
        (lambda b: b[:8], "card.png.truncated"),
        (lambda b: b"GIF89a" + b[6:], "card.png.bad_signature"),
        (lambda b: b[:12] + b"!!!!" + b[16:], "card.png.bad_chunk"),
        (lambda b: b[:8] + struct.pack(">I", 0x7FFFFFFF) + b[12:], "card.png.chunk_too_large"),
    ],
)
def test_structural_damage_raises_rperror(helpers, mutate, code):
    with pytest.raises(RpError) as info:
        read_text_chunks(mutate(helpers.tiny_png()))
    assert info.value.code == code


def test_whole_file_size_is_bounded(helpers):
    with pytest.raises(RpError) as info:
        list(iter_chunks(helpers.tiny_png(), max_file_bytes=10))
    assert info.value.code == "card.png.too_large"


def test_bytes_after_iend_are_ignored(helpers):
    png = helpers.tiny_png() + b"trailing junk"
    assert _types(png)[-1] == "IEND"


def test_rewrite_drops_metadata_inserts_text_before_iend_and_keeps_idat(helpers):
    base = helpers.build_png(
        before=[("tEXt", "prompt", b"{comfy workflow}"), ("zTXt", "Description", b"x")],
        after=[("tEXt", "chara", b"old"), ("iTXt", "ccv3", b"old")],
        extra_before_idat=[(b"eXIf", b"MM\x00*\x00\x00\x00\x08\x00\x00"), (b"tIME", b"\x07\xe8\x01\x01\x00\x00\x00")],
    )
    out = rewrite_png(base, [("chara", b"NEW2"), ("ccv3", b"NEW3")])
    assert out.startswith(PNG_SIGNATURE)
    assert _types(out) == ["IHDR", "IDAT", "tEXt", "tEXt", "IEND"]
    assert [(t.keyword, t.text, t.after_idat) for t in read_text_chunks(out).texts] == [
        ("chara", b"NEW2", True),
        ("ccv3", b"NEW3", True),
    ]
    idat_in = [bytes(c.data) for c in iter_chunks(base) if c.type == b"IDAT"]
    idat_out = [bytes(c.data) for c in iter_chunks(out) if c.type == b"IDAT"]
    assert idat_in == idat_out
    assert all(c.crc_ok for c in iter_chunks(out))


def test_rewrite_repairs_bad_crc_of_kept_chunks(helpers):
    png = helpers.tiny_png()
    idx = png.index(b"IDAT")
    length = struct.unpack(">I", png[idx - 4 : idx])[0]
    crc_at = idx + 4 + length
    broken = png[:crc_at] + b"\xde\xad\xbe\xef" + png[crc_at + 4 :]
    assert not all(c.crc_ok for c in iter_chunks(broken))
    assert all(c.crc_ok for c in iter_chunks(rewrite_png(broken)))


@pytest.mark.parametrize("keyword", ["", "x" * 80, "bad\x00kw", " lead"])
def test_text_chunk_rejects_invalid_keywords(keyword):
    with pytest.raises(RpError) as info:
        text_chunk(keyword, b"v")
    assert info.value.code == "card.png.bad_keyword"


def test_text_chunk_rejects_nul_in_value():
    with pytest.raises(RpError) as info:
        text_chunk("chara", b"a\x00b")
    assert info.value.code == "card.png.bad_text"
