"""CHARX reader: a zip holding ``card.json`` (V3) and assets referenced as ``embeded://path``.

Archives come from strangers, so every limit is checked on the central directory *before*
anything is inflated (entry count, declared sizes, compression ratio, path safety), and reads are
then streamed with a hard cap, because declared sizes can lie. Only ``card.json`` and the icon
assets are extracted; RisuAI exports reach hundreds of megabytes of emotions and backgrounds that
this importer does not store, and it says so in a warning instead of silently dropping them.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from typing import Any

from roleplay.errors import Problem, RpError

from .detect import find_zip_start
from .jsonio import load_json_bytes


@dataclass(frozen=True)
class CharxLimits:
    max_archive_bytes: int = 256 * 1024 * 1024  # real RisuAI exports reach ~200 MB
    max_entries: int = 20_000
    max_total_uncompressed: int = 1024 * 1024 * 1024  # declared, over all entries
    max_entry_bytes: int = 64 * 1024 * 1024  # declared, any single entry
    max_card_json_bytes: int = 32 * 1024 * 1024
    max_asset_bytes: int = 32 * 1024 * 1024  # an icon we actually extract
    max_ratio: float = 200.0  # uncompressed / compressed, for entries above ratio_floor
    ratio_floor: int = 1024 * 1024  # tiny entries (e.g. whitespace JSON) may compress very well


DEFAULT_LIMITS = CharxLimits()
ASSET_URI_PREFIXES = ("embeded://", "embedded://")  # the spec's spelling, plus the common typo


@dataclass
class CharxContent:
    card_json: dict[str, Any]
    icons: dict[str, bytes]  # entry path -> bytes, for every icon asset found in the archive
    main_icon: str | None  # entry path of the icon to use as avatar
    warnings: list[Problem] = field(default_factory=list)


def _error(code: str, message: str, entry: str | None = None, **details: Any) -> RpError:
    return RpError(code, message, pointer=None if entry is None else f"zip:{entry}", details=details)


def _check_path(name: str) -> None:
    parts = name.replace("\\", "/").split("/")
    if (
        name.startswith(("/", "\\")) or "\x00" in name or ".." in parts or (len(name) > 1 and name[1] == ":")  # Windows drive letter
    ):
        raise _error("card.charx.unsafe_path", f"archive entry {name!r} has an unsafe path", name)


def _check_directory(archive: zipfile.ZipFile, limits: CharxLimits) -> None:
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise _error("card.charx.too_many_entries", f"archive has {len(infos)} entries; limit {limits.max_entries}")
    total = 0
    for info in infos:
        _check_path(info.filename)
        if info.file_size > limits.max_entry_bytes:
            raise _error(
                "card.charx.too_large",
                f"entry {info.filename!r} declares {info.file_size} bytes; limit {limits.max_entry_bytes}",
                info.filename,
            )
        total += info.file_size
        if total > limits.max_total_uncompressed:
            raise _error("card.charx.too_large", f"archive expands beyond {limits.max_total_uncompressed} bytes")
        if info.file_size > limits.ratio_floor and info.file_size > limits.max_ratio * max(info.compress_size, 1):
            raise _error(
                "card.charx.zip_bomb",
                f"entry {info.filename!r} compresses {info.file_size}:{info.compress_size}; that ratio is typical of a zip bomb",
                info.filename,
            )


def _read_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    if info.flag_bits & 0x1:
        raise _error("card.charx.encrypted", f"entry {info.filename!r} is encrypted", info.filename)
    if info.file_size > cap:
        raise _error("card.charx.too_large", f"entry {info.filename!r} is larger than {cap} bytes", info.filename)
    chunks: list[bytes] = []
    size = 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(1024 * 1024):
                size += len(chunk)
                if size > cap:  # zipfile stops at the declared size, this is belt and braces
                    raise _error("card.charx.too_large", f"entry {info.filename!r} exceeds {cap} bytes", info.filename)
                chunks.append(chunk)
    except RpError:
        raise
    except NotImplementedError:
        message = f"entry {info.filename!r} uses an unsupported compression method"
        raise _error("card.charx.unsupported", message, info.filename) from None
    except Exception as exc:
        # BadZipFile (CRC mismatch), zlib.error, EOFError, struct.error…: the stdlib readers have
        # no single exception type for damaged streams, and any of them means "corrupt entry".
        raise _error("card.charx.corrupt", f"entry {info.filename!r} is corrupt: {exc}", info.filename) from None
    return b"".join(chunks)


def _icon_paths(card: dict[str, Any]) -> list[tuple[str, str]]:
    """(asset name, archive path) of every embedded icon, the ``main`` one first."""
    data = card.get("data") if isinstance(card.get("data"), dict) else card
    assets = data.get("assets") if isinstance(data, dict) else None
    found: list[tuple[str, str]] = []
    for item in assets if isinstance(assets, list) else []:
        if not isinstance(item, dict) or item.get("type") != "icon" or not isinstance(item.get("uri"), str):
            continue
        for prefix in ASSET_URI_PREFIXES:
            if item["uri"].startswith(prefix):
                found.append((str(item.get("name", "")), item["uri"][len(prefix) :].lstrip("/")))
    found.sort(key=lambda pair: pair[0] != "main")
    return found


def read_charx(data: bytes, *, limits: CharxLimits = DEFAULT_LIMITS, allow_repair: bool = False) -> CharxContent:
    """Open a CHARX archive and return its parsed ``card.json`` plus icon blobs."""
    if len(data) > limits.max_archive_bytes:
        raise _error("card.charx.too_large", f"archive is {len(data)} bytes; limit {limits.max_archive_bytes}")
    start = find_zip_start(data)
    if start is None:
        raise _error("card.charx.not_zip", "file is not a zip archive")
    warnings: list[Problem] = []
    if start:
        warnings.append(Problem("card.charx.prefixed", f"archive starts at byte {start} (JPEG or SFX prefix)"))
    try:
        archive = zipfile.ZipFile(io.BytesIO(data[start:]))
    except Exception as exc:  # BadZipFile, but also struct.error, ValueError… on crafted junk
        raise _error("card.charx.corrupt", f"zip archive is unreadable: {exc}") from None
    with archive:
        _check_directory(archive, limits)
        by_name = {info.filename: info for info in archive.infolist()}
        info = by_name.get("card.json") or next((i for n, i in by_name.items() if n.lower() == "card.json"), None)
        if info is None:
            raise _error("card.charx.no_card_json", "archive has no card.json at its root")
        raw = _read_entry(archive, info, limits.max_card_json_bytes)
        card, json_warnings = load_json_bytes(raw, code_prefix="card.json", allow_repair=allow_repair)
        for problem in json_warnings:
            problem.pointer = problem.pointer or "zip:card.json"
        warnings.extend(json_warnings)
        if not isinstance(card, dict):
            raise _error("card.json.not_object", "card.json does not hold a JSON object", "card.json")

        icons: dict[str, bytes] = {}
        main: str | None = None
        for _name, path in _icon_paths(card):
            if path in icons:
                continue
            entry = by_name.get(path)
            if entry is None:
                message = f"icon {path!r} is not in the archive"
                warnings.append(Problem("card.charx.asset_missing", message, f"zip:{path}"))
                continue
            try:
                icons[path] = _read_entry(archive, entry, limits.max_asset_bytes)
            except RpError as exc:
                # One bad asset must not sink the card (RisuAI #1053).
                warnings.append(Problem(exc.code, exc.message, exc.pointer))
                continue
            main = main or path
        if "module.risum" in by_name:
            warnings.append(
                Problem(
                    "card.charx.risum_ignored",
                    "RisuAI module.risum (scripts, extra lore) is not imported",
                    "zip:module.risum",
                )
            )
        other = [n for n in by_name if n != info.filename and n not in icons and not n.endswith("/")]
        if other:
            warnings.append(
                Problem(
                    "card.charx.assets_not_imported",
                    f"{len(other)} archive file(s) other than card.json and the icon were not imported",
                    details={"entries": sorted(other)[:50]},
                )
            )
    return CharxContent(card_json=card, icons=icons, main_icon=main, warnings=warnings)
