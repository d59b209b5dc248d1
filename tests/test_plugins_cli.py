"""``rp plugins list`` and ``rp features list|enable|disable`` through click."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from roleplay.cli import cli
from roleplay.cli_context import CliState
from roleplay.core.settings import FEATURES
from roleplay.plugins import BUILTIN_PLUGINS

CLEAN = {"RP_DATABASE_URL": "", "RP_MODEL": "", "RP_WRITER_MODEL": ""}


def invoke(home: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=CLEAN, obj=CliState())


def ok_json(home: Path, *args: str) -> dict:  # type: ignore[type-arg]
    result = invoke(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plugins_list_shows_the_loaded_plugins_with_their_origin_and_hooks(tmp_path: Path) -> None:
    rows = ok_json(tmp_path, "plugins", "list")["plugins"]
    builtin = [r for r in rows if r["builtin"]]
    assert [r["name"] for r in builtin] == list(BUILTIN_PLUGINS)
    assert next(r for r in builtin if r["name"] == "rp-quick-replies") == {
        "name": "rp-quick-replies",
        "builtin": True,
        "module": "roleplay.quick_replies",
        "hooks": ["register_play_commands"],
    }
    text = invoke(tmp_path, "plugins", "list").stdout
    assert "rp-state  built-in roleplay.state.feature\n    hooks: register_context_sources, " in text
    invoke(tmp_path, "features", "disable", "rp-quick-replies")
    assert "rp-quick-replies" not in [r["name"] for r in ok_json(tmp_path, "plugins", "list")["plugins"]]


def test_features_list_enable_disable_with_the_closure_named(tmp_path: Path) -> None:
    listed = ok_json(tmp_path, "features", "list")
    assert listed["enabled"] == list(FEATURES) and listed["revision"] == 0 and "rp-core" in listed["alwaysOn"]
    off = invoke(tmp_path, "features", "disable", "rp-lore-book")
    assert off.exit_code == 0
    assert "rp-lore-book turned off; also turned off: rp-compat-mvu (they need it). Applies from the next conversation." in off.stderr
    assert "off  rp-lore-book\n" in off.stdout and "off  rp-compat-mvu  (needs rp-character-card, rp-lore-book, rp-state)\n" in off.stdout
    on = ok_json(tmp_path, "features", "enable", "rp-compat-mvu", "--expected-revision", "1")
    assert (on["feature"], on["on"], on["also"], on["changed"], on["revision"]) == ("rp-compat-mvu", True, ["rp-lore-book"], True, 2)
    assert on["enabled"] == list(FEATURES)
    same = invoke(tmp_path, "features", "enable", "rp-compat-mvu")
    assert same.exit_code == 0 and "rp-compat-mvu is already on" in same.stderr


def test_feature_errors_are_stable_codes(tmp_path: Path) -> None:
    unknown = invoke(tmp_path, "features", "enable", "rp-weather", "--json")
    assert unknown.exit_code == 1 and json.loads(unknown.stdout)["error"]["code"] == "features.unknown"
    core = invoke(tmp_path, "features", "disable", "rp-core")
    assert core.exit_code == 1 and "error [features.always_on]" in core.stderr
    stale = invoke(tmp_path, "features", "disable", "rp-persona", "--expected-revision", "3", "--json")
    assert stale.exit_code == 1 and json.loads(stale.stdout)["error"]["details"] == {"expectedRevision": 3, "currentRevision": 0}
