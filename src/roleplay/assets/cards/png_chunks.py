"""A small, bounded PNG chunk reader and writer (stdlib only).

Why our own walker instead of Pillow: card chunks usually sit *after* IDAT (every SillyTavern
export), where Pillow's lazy ``Image.info`` cannot see them without decoding every pixel, and
Pillow refuses zTXt text above 1 MiB, which real zTXt cards exceed. Walking chunks ourselves lets us
skip pixel data entirely, read tEXt/zTXt/iTXt wherever they sit, and bound every allocation.

CRC mismatches are reported as :class:`Problem` warnings instead of failing: a card whose image
has one damaged ancillary chunk is still worth importing, and structural damage (truncation,
garbage chunk types) is caught separately and is fatal.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from roleplay.errors import Problem, RpError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Proposed caps from the research report (cards.md §3.4). The largest real card seen carries a
# 540 KB chunk, so these leave two orders of magnitude of headroom while bounding memory.
MAX_PNG_BYTES = 64 * 1024 * 1024
MAX_CHUNK_BYTES = 32 * 1024 * 1024
MAX_TEXT_BYTES = 16 * 1024 * 1024  # one decompressed zTXt/iTXt value
MAX_TOTAL_TEXT_BYTES = 64 * 1024 * 1024  # all decompressed text values of one file

# Chunks the writer removes: text of any kind (old card payloads, generator prompts such as
# ComfyUI workflows), EXIF (camera, GPS, time), timestamps and C2PA content credentials (caBX).
DROPPED_ON_WRITE = frozenset({b"tEXt", b"zTXt", b"iTXt", b"eXIf", b"tIME", b"caBX"})


@dataclass(frozen=True)
class Chunk:
    """One chunk. ``data`` is a zero-copy view into the original buffer (IDAT can be large)."""

    type: bytes
    data: memoryview
    offset: int
    crc_ok: bool

    @property
    def type_name(self) -> str:
        return self.type.decode("latin-1")


@dataclass(frozen=True)
class TextChunk:
    keyword: str
    text: bytes  # latin-1 for tEXt/zTXt, UTF-8 for iTXt; card payloads are ASCII base64 anyway
    chunk_type: str  # "tEXt" | "zTXt" | "iTXt"
    after_idat: bool
    offset: int


@dataclass
class PngTextScan:
    texts: list[TextChunk] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    chunk_types: list[str] = field(default_factory=list)


def is_png(data: bytes) -> bool:
    return data[:8] == PNG_SIGNATURE


def _err(code: str, message: str, offset: int | None = None, **details: object) -> RpError:
    info: dict[str, object] = dict(details)
    if offset is not None:
        info["offset"] = offset
    return RpError(code, message, pointer=None if offset is None else f"byte:{offset}", details=info)


def iter_chunks(
    data: bytes,
    *,
    max_file_bytes: int = MAX_PNG_BYTES,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
) -> Iterator[Chunk]:
    """Yield chunks up to and including IEND, raising :class:`RpError` on structural damage.

    Bytes after IEND are ignored (some tools append junk); a missing IEND means truncation.
    """
    if len(data) > max_file_bytes:
        raise _err(
            "card.png.too_large",
            f"PNG is {len(data)} bytes; the limit is {max_file_bytes}",
            size=len(data),
            limit=max_file_bytes,
        )
    if not is_png(data):
        raise _err("card.png.bad_signature", "not a PNG file (the 8-byte PNG signature is missing)", 0)
    view = memoryview(data)
    pos = 8
    first = True
    while True:
        if pos + 8 > len(data):
            raise _err("card.png.truncated", "PNG ends before its IEND chunk (file is truncated)", pos)
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        ctype = bytes(data[pos + 4 : pos + 8])
        if not all(65 <= c <= 90 or 97 <= c <= 122 for c in ctype):
            raise _err("card.png.bad_chunk", f"invalid chunk type {ctype!r}: the PNG is corrupt", pos)
        if first and ctype != b"IHDR":
            raise _err("card.png.bad_chunk", "the first PNG chunk is not IHDR: the PNG is corrupt", pos)
        first = False
        if length > max_chunk_bytes:
            raise _err(
                "card.png.chunk_too_large",
                f"chunk {ctype.decode('latin-1')} is {length} bytes; the limit is {max_chunk_bytes}",
                pos,
                chunk=ctype.decode("latin-1"),
                length=length,
            )
        end = pos + 12 + length
        if end > len(data):
            raise _err(
                "card.png.truncated",
                f"chunk {ctype.decode('latin-1')} runs past the end of the file (file is truncated)",
                pos,
            )
        body = view[pos + 8 : pos + 8 + length]
        (stored_crc,) = struct.unpack(">I", data[pos + 8 + length : end])
        crc_ok = stored_crc == (zlib.crc32(body, zlib.crc32(ctype)) & 0xFFFFFFFF)
        yield Chunk(ctype, body, pos, crc_ok)
        if ctype == b"IEND":
            return
        pos = end


def _inflate_bounded(payload: bytes, limit: int) -> bytes:
    """Inflate at most ``limit`` bytes; a stream that wants more is a decompression bomb."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(payload, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise RpError(
            "card.png.text_too_large",
            f"a compressed text chunk expands beyond {limit} bytes (decompression bomb?)",
            details={"limit": limit},
        )
    if not inflater.eof:
        raise zlib.error("incomplete or truncated zlib stream")
    return out


def _decode_text_chunk(chunk: Chunk, wanted: Callable[[str], bool], limit: int) -> tuple[str, bytes | None]:
    """Return (keyword, text); text is None when the keyword is not wanted (never inflated)."""
    # The keyword is at most 79 bytes, so only the head is copied before we know it is wanted.
    nul = bytes(chunk.data[:80]).find(b"\x00")
    if nul < 1:
        raise ValueError("missing or over-long keyword")
    keyword = bytes(chunk.data[:nul]).decode("latin-1")
    if not wanted(keyword):
        return keyword, None
    rest = chunk.data[nul + 1 :].tobytes()
    if chunk.type == b"tEXt":
        return keyword, rest
    if chunk.type == b"zTXt":
        if not rest or rest[0] != 0:
            raise ValueError("unknown zTXt compression method")
        return keyword, _inflate_bounded(rest[1:], limit)
    # iTXt: flag, method, language tag NUL, translated keyword NUL, text
    if len(rest) < 2:
        raise ValueError("iTXt header is truncated")
    flag, method, rest = rest[0], rest[1], rest[2:]
    _lang, sep1, rest = rest.partition(b"\x00")
    _translated, sep2, text = rest.partition(b"\x00")
    if not (sep1 and sep2):
        raise ValueError("iTXt header is truncated")
    if flag == 0:
        return keyword, text
    if method != 0:
        raise ValueError("unknown iTXt compression method")
    return keyword, _inflate_bounded(text, limit)


def read_text_chunks(
    data: bytes,
    *,
    wanted: Callable[[str], bool] = lambda _keyword: True,
    max_file_bytes: int = MAX_PNG_BYTES,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
    max_text_bytes: int = MAX_TEXT_BYTES,
    max_total_text_bytes: int = MAX_TOTAL_TEXT_BYTES,
) -> PngTextScan:
    """Collect tEXt/zTXt/iTXt chunks whose keyword passes ``wanted``, before or after IDAT.

    Unwanted keywords are never decompressed, so a bomb hidden in an irrelevant chunk costs nothing.
    A malformed text chunk is skipped with a warning; a bomb in a wanted chunk is fatal.
    """
    scan = PngTextScan()
    seen_idat = False
    total = 0
    for chunk in iter_chunks(data, max_file_bytes=max_file_bytes, max_chunk_bytes=max_chunk_bytes):
        scan.chunk_types.append(chunk.type_name)
        if not chunk.crc_ok:
            scan.problems.append(
                Problem(
                    "card.png.crc_mismatch",
                    f"chunk {chunk.type_name} has a bad CRC; its data was used anyway",
                    pointer=f"byte:{chunk.offset}",
                    details={"chunk": chunk.type_name},
                )
            )
        if chunk.type == b"IDAT":
            seen_idat = True
            continue
        if chunk.type not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        try:
            keyword, text = _decode_text_chunk(chunk, wanted, max_text_bytes)
        except (ValueError, zlib.error) as exc:
            scan.problems.append(
                Problem(
                    "card.png.bad_text_chunk",
                    f"unreadable {chunk.type_name} chunk skipped: {exc}",
                    pointer=f"byte:{chunk.offset}",
                )
            )
            continue
        if text is None:
            continue
        total += len(text)
        if total > max_total_text_bytes:
            raise _err(
                "card.png.text_too_large",
                f"text chunks add up to more than {max_total_text_bytes} bytes",
                chunk.offset,
            )
        scan.texts.append(TextChunk(keyword, text, chunk.type_name, seen_idat, chunk.offset))
    return scan


def _chunk_bytes(ctype: bytes, body: bytes | memoryview) -> bytes:
    crc = zlib.crc32(body, zlib.crc32(ctype)) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + ctype + bytes(body) + struct.pack(">I", crc)


def text_chunk(keyword: str, text: bytes) -> bytes:
    """Encode one tEXt chunk (keyword: 1-79 Latin-1 characters, no NUL, no edge spaces)."""
    kw = keyword.encode("latin-1")
    if not 1 <= len(kw) <= 79 or b"\x00" in kw or kw != kw.strip(b" "):
        raise RpError("card.png.bad_keyword", f"invalid PNG text keyword {keyword!r}")
    if b"\x00" in text:
        raise RpError("card.png.bad_text", "tEXt values cannot contain NUL bytes")
    return _chunk_bytes(b"tEXt", kw + b"\x00" + text)


def rewrite_png(data: bytes, texts: Sequence[tuple[str, bytes]] = ()) -> bytes:
    """Copy a PNG without metadata chunks, inserting ``texts`` as tEXt chunks just before IEND.

    Every other chunk (IHDR, PLTE, tRNS, IDAT, colour chunks…) keeps its data byte for byte; CRCs
    are recomputed so the output is valid even when the input had a damaged CRC.
    """
    out = [PNG_SIGNATURE]
    for chunk in iter_chunks(data):
        if chunk.type in DROPPED_ON_WRITE:
            continue
        if chunk.type == b"IEND":
            out.extend(text_chunk(keyword, value) for keyword, value in texts)
        out.append(_chunk_bytes(chunk.type, chunk.data))
    return b"".join(out)
