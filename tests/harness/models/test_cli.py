"""`rp models list|test` through click's CliRunner, against the fake server."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from roleplay.harness.models.cli import models
from roleplay.harness.models.routes import build_model, use_key_file
from roleplay.testing.fake_openai import FakeReply, serve_fake_openai

ENV_NAMES = ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DEEPSEEK_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "RP_MODEL")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    # The developer's own keys (environment or stored in their home) must not leak into these tests.
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RP_HOME", str(tmp_path))
    yield
    use_key_file(None)


def run(args, env=None):
    return CliRunner().invoke(models, args, env=env or {}, catch_exceptions=False)


def test_list_marks_configuration_and_the_demo():
    result = run(["list"], {"DEEPSEEK_API_KEY": "sk-x"})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "deepseek: DeepSeek [configured]" in lines
    assert any(line.startswith("openai:") and "not configured: set OPENAI_API_KEY or OPENAI_BASE_URL" in line for line in lines)
    assert any("demo/demo" in line and "DEMO" in line for line in lines)
    assert any("deepseek/deepseek-chat" in line and "deprecated" in line for line in lines)
    assert "scripted" not in result.output
    assert lines[-1] == "default route: deepseek/deepseek-flash"


def test_list_json_and_all():
    payload = json.loads(run(["list", "--json", "--all"]).output)
    by_name = {p["provider"]: p for p in payload["providers"]}
    assert payload["default_route"] is None
    assert by_name["demo"]["demo"] and by_name["demo"]["configured"]
    assert not by_name["deepseek"]["configured"] and by_name["scripted"]["test_double"]
    assert [m["route"] for m in by_name["deepseek"]["models"] if m["default"]] == ["deepseek/deepseek-flash"]


def test_test_command_json_through_deepseek_route():
    with serve_fake_openai(flavor="deepseek", api_keys=["sk-ds"], strict=True) as fake:
        fake.enqueue(FakeReply(text="Hello, traveller!", reasoning="greet", usage={"prompt_tokens": 20, "prompt_cache_hit_tokens": 16}))
        result = run(["test", "--json", "--prompt", "Say hi"], {"DEEPSEEK_API_KEY": "sk-ds", "DEEPSEEK_BASE_URL": fake.root_url})
        sent = fake.chat_requests[0].body
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["ok"] and payload["route"] == "deepseek/deepseek-flash" and not payload["demo"]
    assert payload["reply"] == "Hello, traveller!" and payload["reasoning"] == "greet"
    assert payload["usage"]["cache_hit_tokens"] == 16 and payload["usage"]["cache_miss_tokens"] == 4
    assert payload["latency_ms"] >= 0 and payload["warnings"] == []
    assert sent["messages"] == [{"role": "user", "content": "Say hi"}]


def test_test_command_text_through_openai_compatible_route():
    with serve_fake_openai(strict=True) as fake:
        fake.enqueue("Hi from a local server.")
        result = run(["test", "--model", "openai/llama3"], {"OPENAI_BASE_URL": fake.base_url})
        assert fake.chat_requests[0].body["model"] == "llama3"
    assert result.exit_code == 0
    assert "route:    openai/llama3" in result.output
    assert "reply:    Hi from a local server." in result.output
    assert "usage:    prompt " in result.output and "latency:  " in result.output


def test_test_command_warns_about_deprecated_names():
    with serve_fake_openai(flavor="deepseek", strict=True) as fake:
        fake.enqueue("ok")
        result = run(["test", "--model", "deepseek/deepseek-reasoner"], {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": fake.root_url})
    assert "warning:  deepseek/deepseek-reasoner: alias retired" in result.output


def test_demo_needs_no_key():
    payload = json.loads(run(["test", "--model", "demo", "--json", "--prompt", "I light a candle"]).output)
    assert payload["demo"] and payload["label"] == "demo (offline, not a real model)"
    assert "I light a candle" in payload["reply"]


def test_errors_are_reported_with_their_code():
    with serve_fake_openai(api_keys=["sk-right"], strict=True) as fake:
        env = {"OPENAI_API_KEY": "sk-wrong-123456789", "OPENAI_BASE_URL": fake.base_url}
        text = run(["test"], env)
        as_json = run(["test", "--json"], env)
    assert text.exit_code == 1 and "[model.auth]" in text.output and "sk-wrong-123456789" not in text.output
    assert as_json.exit_code == 1 and json.loads(as_json.output)["error"]["code"] == "model.auth"


def test_not_configured_points_to_the_demo():
    result = run(["test"])
    assert result.exit_code == 1 and "[model.not_configured]" in result.output and "--model demo" in result.output


def test_test_command_never_prints_credentials_from_the_base_url():
    with serve_fake_openai(strict=True) as fake:
        fake.enqueue("Hi.", "Hi again.")
        url = fake.base_url.replace("http://", "http://alice:s3cret@")
        text = run(["test", "--model", "openai/llama3"], {"OPENAI_BASE_URL": url})
        as_json = run(["test", "--model", "openai/llama3", "--json"], {"OPENAI_BASE_URL": url})
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output
    assert f"(llama3 via {fake.base_url.replace('http://', 'http://***@')})" in text.output
    assert "s3cret" not in text.output + as_json.output and "alice" not in text.output + as_json.output


def test_a_failing_test_command_never_prints_credentials_from_the_base_url(monkeypatch):
    from roleplay.harness.models import cli as models_cli
    from roleplay.harness.models.failures import RetryPolicy

    # No backoff sleeps: one attempt at a closed port is enough to get the connection error.
    monkeypatch.setattr(models_cli, "build_model", lambda route, env: build_model(route, env, retry=RetryPolicy(max_retries=0)))
    with serve_fake_openai() as fake:
        closed = fake.base_url  # the port is closed once the server stops
    url = closed.replace("http://", "http://alice:s3cret@") + "?token=tok123"
    result = run(["test", "--model", "openai/llama3"], {"OPENAI_BASE_URL": url})
    assert result.exit_code == 1 and "[model.connection]" in result.output
    assert not any(s in result.output for s in ("alice", "s3cret", "tok123")), result.output


def test_test_command_prints_the_reply_inert():
    hostile = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m"
    with serve_fake_openai(strict=True) as fake:
        fake.enqueue(f"Hi {hostile} 你好 👩\u200d💻")
        fake.enqueue(f"Hi {hostile} 你好 👩\u200d💻")
        text = run(["test", "--model", "openai/llama3"], {"OPENAI_BASE_URL": fake.base_url})
        as_json = run(["test", "--model", "openai/llama3", "--json"], {"OPENAI_BASE_URL": fake.base_url})
    assert text.exit_code == 0 and as_json.exit_code == 0
    for out in (text.output, as_json.output):
        assert not any(c in out for c in "\x1b\x07\x9b\u202e"), out
    assert "reply:    Hi \\x1b]0;owned\\x07\\x1b[2J\\u202e\\x9b31m 你好 👩\u200d💻" in text.output
    assert json.loads(as_json.output)["reply"] == f"Hi {hostile} 你好 👩\u200d💻"  # the same value, escaped


def test_test_errors_use_the_common_format() -> None:
    text = run(["test"])
    assert text.exit_code == 1 and text.stderr.startswith("error [model.not_configured]: ")
    as_json = run(["test", "--json"])
    assert as_json.exit_code == 1 and set(json.loads(as_json.stdout)) == {"error"}


def test_keys_are_stored_in_the_home_never_printed_and_the_environment_wins(tmp_path):
    secret = "sk-stored-by-the-cli-0123456789"
    stored = CliRunner().invoke(models, ["key", "set", "deepseek"], input=secret + "\n", env={}, catch_exceptions=False)
    assert stored.exit_code == 0 and secret not in stored.output and (tmp_path / "secrets.json").exists()
    assert run(["key", "status"]).output.splitlines() == ["deepseek: stored", "openai: not set"]
    listed = run(["list"]).output.splitlines()
    assert "deepseek: DeepSeek [configured]" in listed and listed[-1] == "default route: deepseek/deepseek-flash"
    both = json.loads(run(["key", "status", "--json"], {"DEEPSEEK_API_KEY": "sk-env"}).output)
    assert both["keys"]["deepseek"] == {"stored": True, "environment": True} and secret not in json.dumps(both)
    bad = run(["key", "set", "nowhere", "--json"])
    assert bad.exit_code == 1 and json.loads(bad.output)["error"]["code"] == "keys.provider_not_found"
    assert json.loads(run(["key", "clear", "deepseek", "--json"]).output) == {"provider": "deepseek", "cleared": True}
    assert "deepseek: DeepSeek [configured]" not in run(["list"]).output.splitlines()
