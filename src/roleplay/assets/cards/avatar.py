"""Avatar sanitising: decode with Pillow under strict limits and re-encode to a clean PNG.

A card image is untrusted twice over: it may be a decompression bomb, and it usually carries
metadata the user never meant to share (the card JSON itself, ComfyUI workflows with model paths,
EXIF with camera/GPS/time, C2PA credentials). Re-encoding from pixels drops all of that; only
IHDR/PLTE/IDAT/IEND-level image data survives. Output is deterministic for a given input.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageDraw, ImageOps

from roleplay.errors import RpError

from .png_chunks import is_png, rewrite_png

MAX_AVATAR_BYTES = 32 * 1024 * 1024
MAX_AVATAR_PIXELS = 40_000_000  # checked from the header before any pixel is decoded
MAX_OUTPUT_SIDE = 2048  # larger images are downscaled, keeping the aspect ratio
ALLOWED_FORMATS = frozenset({"PNG", "JPEG", "WEBP", "GIF"})
_KEPT_MODES = frozenset({"1", "L", "LA", "RGB", "RGBA"})


def _invalid(message: str) -> RpError:
    return RpError("card.avatar.invalid", message)


def _open(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data), formats=sorted(ALLOWED_FORMATS))
    width, height = image.size
    if width < 1 or height < 1:
        raise _invalid("image has no pixels")
    if width * height > MAX_AVATAR_PIXELS:
        raise RpError(
            "card.avatar.too_large",
            f"image is {width}x{height} pixels; the limit is {MAX_AVATAR_PIXELS} pixels",
            details={"width": width, "height": height},
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
            _open(data).verify()  # structural check; verify() leaves the image unusable
            with _open(data) as image:
                image.seek(0)  # animated PNG/GIF/WebP: keep the first frame only
                image.load()
                try:
                    oriented = ImageOps.exif_transpose(image)  # honour EXIF rotation before dropping it
                except Exception:  # broken EXIF must not cost us the picture
                    oriented = image
                clean = _normalise_mode(oriented)
    except RpError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise RpError("card.avatar.too_large", f"image is too large to decode safely: {exc}") from None
    except Exception as exc:
        # Pillow signals damaged or hostile input with many unrelated types (OSError,
        # SyntaxError, ValueError, struct.error, DecompressionBombError/Warning, EOFError…).
        raise _invalid(f"image cannot be decoded: {type(exc).__name__}: {exc}") from None
    if max(clean.size) > max_side:
        clean.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    clean.info.clear()  # Pillow re-emits icc_profile/transparency/dpi from info when saving
    out = io.BytesIO()
    clean.save(out, format="PNG", optimize=False)
    return out.getvalue()


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
