"""Model keys stored in the home (roleplay.harness.models.secrets): owner-only file, write-only
from outside, the environment wins, route resolution uses them when it has none."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from roleplay.errors import RpError
from roleplay.harness.models import routes
from roleplay.harness.models.routes import build_model, resolve_route, use_key_file
from roleplay.harness.models.secrets import KeyFile, with_stored_keys

KEY = "sk-stored-0123456789abcdef"


def test_set_clear_and_status_never_show_the_key(tmp_path: Path) -> None:
    keys = KeyFile(tmp_path)
    assert keys.status() == {"deepseek": False, "openai": False} and keys.environment() == {}
    keys.set("deepseek", f"  {KEY}\n")
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600
    assert keys.status() == {"deepseek": True, "openai": False} and KEY not in repr(keys.status())
    assert keys.environment() == {"DEEPSEEK_API_KEY": KEY}
    assert keys.clear("deepseek") and not keys.clear("deepseek") and keys.environment() == {}
    assert [p.name for p in tmp_path.iterdir()] == ["secrets.json"]  # no temporary file left behind


def test_bad_input_is_refused_and_a_broken_file_is_reported(tmp_path: Path) -> None:
    keys = KeyFile(tmp_path)
    with pytest.raises(RpError) as unknown:
        keys.set("demo", KEY)
    assert unknown.value.code == "keys.provider_not_found"
    for bad in ("", "two words", "line\nbreak", "x" * 5000):
        with pytest.raises(RpError) as invalid:
            keys.set("openai", bad)
        assert invalid.value.code == "keys.invalid" and invalid.value.message == "a OPENAI_API_KEY value is one line of visible characters"
    keys.path.write_text("{not json")
    with pytest.raises(RpError) as broken:
        keys.status()
    assert broken.value.code == "keys.unreadable"


def test_the_environment_wins_and_stored_keys_fill_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = KeyFile(tmp_path)
    keys.set("deepseek", KEY)
    assert with_stored_keys({"DEEPSEEK_API_KEY": "env-key"}, keys)["DEEPSEEK_API_KEY"] == "env-key"
    assert with_stored_keys({"DEEPSEEK_API_KEY": ""}, keys)["DEEPSEEK_API_KEY"] == KEY
    for name in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "RP_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RpError):
        resolve_route(None)  # nothing configured
    use_key_file(keys)
    try:
        assert routes.key_file() is keys
        route = resolve_route(None)
        assert route.provider == "deepseek"  # the stored key configures the default provider
        model = build_model(route)
        assert KEY not in repr(model) and KEY not in model.label
        monkeypatch.setenv("DEEPSEEK_API_KEY", "env-key")
        assert routes.model_environment()["DEEPSEEK_API_KEY"] == "env-key"
    finally:
        use_key_file(None)
    assert routes.model_environment().get("DEEPSEEK_API_KEY") == "env-key"
