"""Model keys kept by the server: ``<home>/secrets.json`` (mode 0600), used when the environment
has none.

The settings page may store a provider's key so a browser-only user needs no shell. The key is
write-only from outside: it never enters the event log, a response, a log line or a model
request's recorded label; ``status`` only says whether one is set. The environment always wins
(``DEEPSEEK_API_KEY`` set in the shell beats a stored key), so a deployment's own secret manager
stays in charge. The file is replaced atomically and created owner-only, never chmod-ed after the
fact, so no other user can read it in between.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from roleplay.errors import RpError, ValidationError

from .registry import PROVIDERS

FILE_NAME = "secrets.json"
MAX_KEY_CHARS = 4096


class KeyFile:
    """The stored keys of one home, by provider name."""

    def __init__(self, home: Path | str) -> None:
        self.path = Path(home) / FILE_NAME

    def _read(self) -> dict[str, str]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RpError("keys.unreadable", f"{self.path} cannot be read ({exc.__class__.__name__}); fix or remove it") from None
        keys = raw.get("modelKeys") if isinstance(raw, dict) else None
        return {k: v for k, v in (keys or {}).items() if isinstance(k, str) and isinstance(v, str) and v}

    def _write(self, keys: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"modelKeys": keys}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def set(self, provider: str, key: str) -> None:
        key_env = _key_env(provider)
        key = key.strip()
        if not key or len(key) > MAX_KEY_CHARS or any(ord(c) < 0x21 or ord(c) == 0x7F for c in key):
            raise ValidationError("keys.invalid", f"a {key_env} value is one line of visible characters", pointer="/key")
        self._write({**self._read(), provider: key})

    def clear(self, provider: str) -> bool:
        _key_env(provider)
        keys = self._read()
        if keys.pop(provider, None) is None:
            return False
        self._write(keys)
        return True

    def status(self) -> dict[str, bool]:
        """Whether a key is stored, for every provider that takes one (never the key)."""
        stored = self._read()
        return {p.name: p.name in stored for p in PROVIDERS.values() if p.key_env}

    def environment(self) -> dict[str, str]:
        """The stored keys under their providers' environment names."""
        out = {}
        for name, key in self._read().items():
            provider = PROVIDERS.get(name)
            if provider is not None and provider.key_env:
                out[provider.key_env] = key
        return out


def _key_env(provider: str) -> str:
    info = PROVIDERS.get(provider)
    if info is None or not info.key_env:
        raise RpError("keys.provider_not_found", f"{provider!r} is not a provider that takes a key", pointer="/provider")
    return info.key_env


def with_stored_keys(env: Mapping[str, str], keys: KeyFile | None) -> Mapping[str, str]:
    """``env`` with the stored keys filling in the key variables it leaves unset or empty."""
    if keys is None:
        return env
    fill = {name: key for name, key in keys.environment().items() if not env.get(name)}
    return {**env, **fill} if fill else env


__all__ = ["FILE_NAME", "KeyFile", "with_stored_keys"]
