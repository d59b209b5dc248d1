"""Avatar sanitising: decode with Pillow under strict limits and re-encode to a clean PNG.

A card image is untrusted twice over: it may be a decompression bomb, and it usually carries
metadata the user never meant to share (the card JSON itself, ComfyUI workflows with model paths,
EXIF with camera/GPS/time, C2PA credentials). Re-encoding from pixels drops all of that; only
IHDR/PLTE/IDAT/IEND-level image data survives. Output is deterministic for a given input.

Memory: a tiny file can declare a huge raster (a 78 KB PNG of 1x40,000,000 pixels, a 1 KB icon of
6300x6300). So the decoded size (height x (width x bytes per pixel + a row pointer), as Pillow
stores it) is bounded
from the header before any pixel is decoded; JPEGs are first asked to decode at a reduced scale
(``draft``), and every step after the one unavoidable full decode works in place or on the
already reduced image (``thumbnail`` reduces by an integer factor before resampling), so the
decode is the peak.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageDraw, ImageOps

from roleplay.errors import RpError

from .png_chunks import is_png, rewrite_png

MAX_AVATAR_BYTES = 32 * 1024 * 1024
MAX_AVATAR_PIXELS = 40_000_000  # checked from the header before any pixel is decoded
MAX_DECODED_BYTES = 128 * 1024 * 1024  # likewise; e.g. 5792x5792 RGB(A), or 40 M greyscale pixels
MAX_OUTPUT_SIDE = 2048  # larger images are downscaled, keeping the aspect ratio
ALLOWED_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF"})
_KEPT_MODES = frozenset({"1", "L", "LA", "RGB", "RGBA"})
# Modes Pillow can reduce and resample directly; others are converted first, at full size.
_RESIZABLE_MODES = frozenset({"L", "LA", "RGB", "RGBA", "I", "F"})


def _invalid(message: str) -> RpError:
    return RpError("card.avatar.invalid", message)


def _bytes_per_pixel(mode: str) -> int:
    # Pillow stores 8-bit single-band images in one byte per pixel, 16-bit ones in two, and every
    # multi-band image (LA, RGB, RGBA, CMYK, YCbCr…) and 32-bit one in four.
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


_ROW_POINTER = 8  # Pillow also keeps one pointer per row: a 1-pixel-wide image is mostly pointers


def _open(data: bytes, max_side: int) -> Image.Image:
    image = Image.open(io.BytesIO(data), formats=sorted(ALLOWED_FORMATS))
    if image.format == "JPEG" and max(image.size) > max_side:
        # DCT scaling: the decoder itself produces 1/2, 1/4 or 1/8 of the size, never the full raster.
        image.draft(image.mode, (max_side, max_side))
    width, height = image.size
    if width < 1 or height < 1:
        raise _invalid("image has no pixels")
    if width * height > MAX_AVATAR_PIXELS:
        raise RpError(
            "card.avatar.too_large",
            f"image is {width}x{height} pixels; the limit is {MAX_AVATAR_PIXELS} pixels",
            details={"width": width, "height": height},
        )
    per_pixel = _bytes_per_pixel(image.mode)
    if image.mode not in _RESIZABLE_MODES and max(width, height) > max_side:
        per_pixel += 4  # converted to RGB(A) at full size before it can be reduced
    decoded = height * (width * per_pixel + _ROW_POINTER)
    if decoded > MAX_DECODED_BYTES:
        raise RpError(
            "card.avatar.too_large",
            f"image is {width}x{height} pixels ({image.mode}); decoding it takes {decoded // 2**20} MiB, "
            f"the limit is {MAX_DECODED_BYTES // 2**20} MiB",
            details={"width": width, "height": height, "mode": image.mode, "decodedBytes": decoded, "limit": MAX_DECODED_BYTES},
        )
    return image


def sanitize_avatar(data: bytes, *, max_side: int = MAX_OUTPUT_SIDE) -> bytes:
    """Return ``data`` re-encoded as a metadata-free PNG, or raise ``card.avatar.*``."""
    if len(data) > MAX_AVATAR_BYTES:
        raise RpError("card.avatar.too_large", f"image is {len(data)} bytes; limit {MAX_AVATAR_BYTES}")
    if is_png(data):
        # Strip text chunks first with our own walker: Pillow refuses zTXt above 1 MiB and would
        # otherwise reject real cards whose payload sits in a big compressed chunk.
        data = rewrite_png(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            _open(data, max_side).verify()  # structural check; verify() leaves the image unusable
            with _open(data, max_side) as image:
                image.seek(0)  # animated PNG/GIF/WebP: keep the first frame only
                image.load()
                clean = _orient_and_shrink(image, max_side)
    except RpError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise RpError("card.avatar.too_large", f"image is too large to decode safely: {exc}") from None
    except Exception as exc:
        # Pillow signals damaged or hostile input with many unrelated types (OSError,
        # SyntaxError, ValueError, struct.error, DecompressionBombError/Warning, EOFError…).
        raise _invalid(f"image cannot be decoded: {type(exc).__name__}: {exc}") from None
    clean.info.clear()  # Pillow re-emits icc_profile/transparency/dpi from info when saving
    out = io.BytesIO()
    clean.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _orient_and_shrink(image: Image.Image, max_side: int) -> Image.Image:
    """The upright, at most ``max_side`` image in a kept mode, independent of the opened file.

    Works in place on the decoded raster: no full-size copy is ever made (``exif_transpose``
    without ``in_place`` copies even when there is nothing to rotate)."""
    work = image
    if image.mode not in _RESIZABLE_MODES and max(image.size) > max_side:
        work = _normalise_mode(image)  # palette and bilevel images cannot be resampled directly
    try:
        ImageOps.exif_transpose(work, in_place=True)  # honour EXIF rotation before dropping it
    except Exception:  # broken EXIF must not cost us the picture
        pass
    if max(work.size) > max_side:
        work.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return _normalise_mode(work)


def _normalise_mode(image: Image.Image) -> Image.Image:
    has_alpha = "transparency" in image.info or image.mode in ("PA", "La", "RGBa", "LA", "RGBA")
    if image.mode in _KEPT_MODES and "transparency" not in image.info:
        return image.copy()
    if image.mode in ("L", "I", "I;16", "I;16B", "I;16L", "F") and not has_alpha:
        return image.convert("L")
    return image.convert("RGBA" if has_alpha else "RGB")


def placeholder_avatar(width: int = 400, height: int = 600) -> bytes:
    """A neutral, deterministic silhouette used when a card is exported without an avatar."""
    image = Image.new("RGB", (width, height), (58, 63, 77))
    draw = ImageDraw.Draw(image)
    cx = width // 2
    head = width // 5
    draw.ellipse((cx - head, height // 4 - head, cx + head, height // 4 + head), fill=(148, 156, 176))
    draw.rounded_rectangle(
        (cx - 2 * head, height // 4 + head + height // 30, cx + 2 * head, height + head),
        radius=head,
        fill=(148, 156, 176),
    )
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()
