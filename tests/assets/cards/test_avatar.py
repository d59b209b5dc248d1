from __future__ import annotations

import io

import pytest
from PIL import Image, PngImagePlugin

from roleplay.assets.cards.avatar import MAX_AVATAR_PIXELS, MAX_DECODED_BYTES, placeholder_avatar, sanitize_avatar
from roleplay.assets.cards.png_chunks import iter_chunks
from roleplay.errors import RpError


def _encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **kwargs)
    return out.getvalue()


def _chunk_types(png: bytes) -> set[str]:
    return {c.type_name for c in iter_chunks(png)}


def test_png_metadata_and_card_chunks_are_stripped(helpers):
    info = PngImagePlugin.PngInfo()
    info.add_text("prompt", '{"ckpt": "model.safetensors"}')
    info.add_text("chara", "e30=")
    src = _encode(Image.new("RGB", (8, 8), "red"), "PNG", pnginfo=info, exif=Image.Exif().tobytes(), dpi=(300, 300))
    src = helpers.build_png(base=src, after=[("zTXt", "ccv3", b"x" * 5_000_000)])  # > Pillow's zTXt cap
    out = sanitize_avatar(src)
    assert _chunk_types(out) <= {"IHDR", "IDAT", "IEND"}
    with Image.open(io.BytesIO(out)) as image:
        assert image.size == (8, 8) and image.getpixel((0, 0)) == (255, 0, 0)


def test_jpeg_exif_is_stripped_and_orientation_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise on display
    exif[0x010F] = "CameraMaker"
    src = _encode(Image.new("RGB", (20, 10), "blue"), "JPEG", exif=exif.tobytes())
    out = sanitize_avatar(src)
    assert out.startswith(b"\x89PNG")
    with Image.open(io.BytesIO(out)) as image:
        assert image.size == (10, 20)
        assert not image.getexif()
    assert b"CameraMaker" not in out


def test_palette_with_transparency_becomes_rgba():
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
    src = _encode(image, "PNG", transparency=0)
    with Image.open(io.BytesIO(sanitize_avatar(src))) as out:
        assert out.mode == "RGBA" and out.getpixel((0, 0))[3] == 0


def test_large_images_are_downscaled_keeping_aspect():
    src = _encode(Image.new("RGB", (300, 150), "green"), "PNG")
    with Image.open(io.BytesIO(sanitize_avatar(src, max_side=100))) as out:
        assert out.size == (100, 50)


def test_output_is_deterministic():
    src = _encode(Image.new("RGB", (16, 16), "purple"), "WEBP")
    assert sanitize_avatar(src) == sanitize_avatar(src)


def test_pixel_bomb_is_rejected_from_the_header(helpers):
    # A valid IHDR claiming 10000x10000 pixels: rejected before any pixel is decoded.
    png = helpers.tiny_png()
    ihdr = bytearray(png[16:29])
    ihdr[0:8] = (10_000).to_bytes(4, "big") + (10_000).to_bytes(4, "big")
    bomb = png[:8] + helpers.raw_chunk(b"IHDR", bytes(ihdr)) + png[33:]
    assert 10_000 * 10_000 > MAX_AVATAR_PIXELS
    with pytest.raises(RpError) as info:
        sanitize_avatar(bomb)
    assert info.value.code == "card.avatar.too_large"


def test_pixel_limit_below_pillows_own(helpers):
    # 7000x7000 = 49 MP: under Pillow's bomb threshold, over ours; our header check catches it.
    png = helpers.tiny_png()
    ihdr = bytearray(png[16:29])
    ihdr[0:8] = (7_000).to_bytes(4, "big") + (7_000).to_bytes(4, "big")
    big = png[:8] + helpers.raw_chunk(b"IHDR", bytes(ihdr)) + png[33:]
    with pytest.raises(RpError) as info:
        sanitize_avatar(big)
    assert info.value.code == "card.avatar.too_large"
    assert info.value.details == {"width": 7_000, "height": 7_000}


@pytest.mark.parametrize("data", [b"", b"not an image", b"GIF89a\x01\x00", b"\xff\xd8\xff\xe0broken"])
def test_undecodable_input_raises_rperror(data):
    with pytest.raises(RpError) as info:
        sanitize_avatar(data)
    assert info.value.code == "card.avatar.invalid"


def test_corrupt_pixel_data_raises_rperror(helpers):
    png = helpers.tiny_png((64, 64))
    chunks = [c for c in iter_chunks(png) if c.type == b"IDAT"]
    start = chunks[0].offset + 8
    broken = bytearray(png)
    broken[start + 2 : start + 12] = b"\xff" * 10
    with pytest.raises(RpError):
        sanitize_avatar(bytes(broken))


def test_placeholder_is_deterministic_png():
    first = placeholder_avatar()
    assert first == placeholder_avatar()
    with Image.open(io.BytesIO(first)) as image:
        assert image.size == (400, 600) and image.format == "PNG"


# --- decoded-size bound (issue 18 item 6) ---------------------------------------------------------


def _declared(helpers, width: int, height: int, colour_type: int) -> bytes:
    """A tiny PNG whose IHDR declares ``width`` x ``height`` (8-bit, the given colour type)."""
    png = helpers.tiny_png()
    ihdr = bytearray(png[16:29])
    ihdr[0:8] = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    ihdr[8:10] = bytes([8, colour_type])
    return png[:8] + helpers.raw_chunk(b"IHDR", bytes(ihdr)) + png[33:]


@pytest.fixture
def no_decoding(monkeypatch):
    """Fail loudly if any pixel is decoded."""
    from PIL import ImageFile

    def refuse(self):
        raise AssertionError("pixels were decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)


@pytest.mark.parametrize(
    ("width", "height", "colour_type"),
    [
        (1, 40_000_000, 0),  # 78 KB on disk, inside the pixel limit; Pillow needs a row pointer per row
        (6300, 6300, 2),  # the 1 KB CHARX icon: 39.7 M pixels, stored as 4 bytes each
    ],
)
def test_huge_raster_inside_the_pixel_limit_is_refused_before_decoding(helpers, no_decoding, width, height, colour_type):
    assert width * height <= MAX_AVATAR_PIXELS
    with pytest.raises(RpError) as info:
        sanitize_avatar(_declared(helpers, width, height, colour_type))
    assert info.value.code == "card.avatar.too_large"
    assert info.value.details["decodedBytes"] > MAX_DECODED_BYTES == info.value.details["limit"]


def test_large_jpeg_is_decoded_at_a_reduced_scale():
    # 6000x6000 RGB would be 137 MiB decoded at full size; the JPEG decoder's draft mode scales it.
    src = _encode(Image.new("RGB", (6000, 6000), "teal"), "JPEG", quality=50)
    with Image.open(io.BytesIO(sanitize_avatar(src, max_side=1000))) as out:
        assert out.size == (1000, 1000) and out.mode == "RGB"
