"""Character cards: import V1/V2/V3 from PNG, JSON and CHARX; export V3 PNGs.

Pure and storage-independent: bytes in, normalised models and bytes out. The asset store decides
where cards, avatars and the extracted lorebooks live.
"""

from .avatar import placeholder_avatar, sanitize_avatar
from .charx import CharxContent, CharxLimits, read_charx
from .detect import AssetKind, classify_json_object, sniff_asset_kind
from .export import build_v2_object, build_v3_object, export_card_png, merge_lorebooks
from .importer import CardImport, import_card_bytes, import_card_object
from .model import CardAsset, CharacterCard, IsolatedPrompts
from .normalize import DepthPrompt, ParsedCard, parse_card_json, st_depth_prompt, st_talkativeness

__all__ = [
    "AssetKind",
    "CardAsset",
    "CardImport",
    "CharacterCard",
    "CharxContent",
    "CharxLimits",
    "DepthPrompt",
    "IsolatedPrompts",
    "ParsedCard",
    "build_v2_object",
    "build_v3_object",
    "classify_json_object",
    "export_card_png",
    "import_card_bytes",
    "import_card_object",
    "merge_lorebooks",
    "parse_card_json",
    "placeholder_avatar",
    "read_charx",
    "sanitize_avatar",
    "sniff_asset_kind",
    "st_depth_prompt",
    "st_talkativeness",
]
