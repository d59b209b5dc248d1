"""Card import: lenient-JSON parse time and PNG/CHARX decode memory (issue 18 items 5 and 6).

    .venv/bin/python bench/card_import.py [--src DIR]

``--src`` points at another checkout's ``src`` (for example a ``git worktree`` of an older
commit), so the same workloads can be measured before and after a change. Each workload runs in a
fresh subprocess: peak memory is that process's ``ru_maxrss`` minus its resident size just before
the import call, so imports, interpreter start-up and the input bytes themselves are not counted.

Workloads and targets:
* a ~3.9 MB V2 card JSON with one trailing comma: import time at most 3x the import time of the
  same card without the comma (strict JSON), both measured in one process, best of three;
* a 78 KB PNG card of 1x40,000,000 pixels (inside the 40 M pixel limit): peak at most 256 MB;
* a ~1 KB CHARX whose icon is a 6300x6300 PNG: peak at most 256 MB;
* a 5000x5000 PNG card, inside every limit, so its image is kept: peak at most 256 MB.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_RATIO_TARGET = 3.0
PEAK_TARGET_MB = 256.0

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, sys.argv[1])
from roleplay.assets.cards import import_card_bytes
from roleplay.errors import RpError

repeat = int(sys.argv[3])
data = open(sys.argv[2], "rb").read()
def rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
before = rss_kb()
best = float("inf")
for _ in range(repeat):
    t0 = time.perf_counter()
    try:
        result = import_card_bytes(data, os.path.basename(sys.argv[2]))
        outcome = "imported " + result.card.name + (" with image" if result.avatar_png else " without image")
        outcome += " " + ",".join(sorted({w.code for w in result.warnings}))
    except RpError as exc:
        outcome = "error " + exc.code
    best = min(best, time.perf_counter() - t0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": best, "peak_mb": max(peak - before, 0) / 1024, "outcome": outcome}))
"""


def _child(src: Path, path: Path, repeat: int = 1) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(path), str(repeat)], capture_output=True, text=True, timeout=900, check=False
    )
    if out.returncode != 0:
        return {"seconds": float("nan"), "peak_mb": float("nan"), "outcome": "crashed: " + out.stderr[-300:]}
    return json.loads(out.stdout)


def _card(description: str) -> dict:
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Bench",
            "description": description,
            "first_mes": "Hello.",
            "alternate_greetings": [f"Greeting {i}: " + "lorem ipsum " * 20 for i in range(2000)],
        },
    }


def _chunk(ctype: bytes, body: bytes) -> bytes:
    import struct

    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body) & 0xFFFFFFFF)


def _tall_png(card: dict) -> bytes:
    """1 x 40,000,000 greyscale PNG (each row: filter byte + one pixel), card in a tEXt chunk."""
    import struct

    width, height = 1, 40_000_000
    compressor = zlib.compressobj(9)
    rows = b"\x00\x00" * 1_000_000
    idat = b"".join(compressor.compress(rows) for _ in range(height // 1_000_000)) + compressor.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    text = b"chara\x00" + base64.b64encode(json.dumps(card).encode())
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"tEXt", text) + _chunk(b"IEND", b"")


def _square_png(side: int, card: dict | None = None) -> bytes:
    """A side x side RGB PNG of one colour (6300x6300 deflates to ~1 KB), optionally with a card."""
    import struct

    compressor = zlib.compressobj(9)
    row = b"\x00" + b"\x80\x40\x20" * side
    idat = b"".join(compressor.compress(row * 100) for _ in range(side // 100)) + compressor.flush()
    text = [] if card is None else [_chunk(b"tEXt", b"chara\x00" + base64.b64encode(json.dumps(card).encode()))]
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
        + _chunk(b"IDAT", idat)
        + b"".join(text)
        + _chunk(b"IEND", b"")
    )


def _big_icon_charx(card: dict) -> bytes:
    """A CHARX whose main icon is a 6300x6300 RGB PNG."""
    png = _square_png(6300)
    v3 = {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "data": {**card["data"], "assets": [{"type": "icon", "uri": "embeded://assets/main.png", "name": "main", "ext": "png"}]},
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("card.json", json.dumps(v3))
        archive.writestr("assets/main.png", png)
    return out.getvalue()


def _strict_seconds(text: str, repeat: int = 5) -> float:
    import time

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        json.loads(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the src directory to measure")
    args = parser.parse_args()
    src = args.src.resolve()
    print(f"source: {src}")
    small = {"name": "Bench", "description": "x", "first_mes": "Hello."}
    small_v2 = {"spec": "chara_card_v2", "spec_version": "2.0", "data": small}
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        # 1. Lenient JSON: ~3.9 MB, one trailing comma inside the data object.
        description = "She walks the long road at dusk. " * 104_000
        strict_text = json.dumps(_card(description), ensure_ascii=False)
        comma_text = strict_text[:-2] + ",}}"
        assert comma_text.endswith('"]' + ",}}")
        path = Path(tmp, "comma.json")
        path.write_text(comma_text, encoding="utf-8")
        strict_path = Path(tmp, "strict.json")
        strict_path.write_text(strict_text, encoding="utf-8")
        loads = _strict_seconds(strict_text)
        strict = _child(src, strict_path, repeat=3)
        # The old code needs about a minute per run on the comma file: one run is enough to show it.
        lenient = _child(src, path)
        if lenient["seconds"] < 2:
            lenient = _child(src, path, repeat=3)
        ratio = lenient["seconds"] / strict["seconds"]
        ok = ratio <= JSON_RATIO_TARGET
        failed |= not ok
        print(
            f"json trailing comma ({len(comma_text.encode()) / 1e6:.1f} MB): import {lenient['seconds'] * 1000:.0f} ms"
            f", strict-JSON import {strict['seconds'] * 1000:.0f} ms (json.loads alone {loads * 1000:.0f} ms), "
            f"ratio {ratio:.1f}x (target <= {JSON_RATIO_TARGET:.0f}x), peak +{lenient['peak_mb']:.0f} MB; "
            f"{lenient['outcome']} -> {'PASS' if ok else 'FAIL'}"
        )

        # 2. and 3. Decode memory.
        for label, data in (
            ("png 1x40,000,000", _tall_png(small_v2)),
            ("charx 6300x6300 icon", _big_icon_charx({"data": small})),
            ("png 5000x5000 (a large image that is kept)", _square_png(5000, small_v2)),
        ):
            path = Path(tmp, "case.bin")
            path.write_bytes(data)
            result = _child(src, path)
            ok = result["peak_mb"] <= PEAK_TARGET_MB
            failed |= not ok
            print(
                f"{label} ({len(data) / 1000:.1f} KB): peak +{result['peak_mb']:.0f} MB "
                f"(target <= {PEAK_TARGET_MB:.0f} MB), {result['seconds'] * 1000:.0f} ms; {result['outcome']} "
                f"-> {'PASS' if ok else 'FAIL'}"
            )
            os.unlink(path)
    print("verdict:", "FAIL" if failed else "PASS")


if __name__ == "__main__":
    main()
