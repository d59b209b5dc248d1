"""The plugin manager: built-in features as default plugins, and a third-party plugin installed
from a temporary distribution (a ``dist-info`` with an entry point in the ``roleplay`` group) that
adds a context source, a tool and a command, all working, with no file of this repository edited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from roleplay.core.run import RpRun, prepare_run
from roleplay.core.settings import FEATURES
from roleplay.features import build_runtime
from roleplay.harness.models import registry
from roleplay.harness.models.routes import Route
from roleplay.harness.store import EventStore
from roleplay.harness.tools import ToolContext
from roleplay.harness.models.types import ToolCall
from roleplay.plugins import BUILTIN_PLUGINS, CORE, plugin_manager, plugin_rows
from tests_support import sample_story

DEMO = Route("demo", "demo")
ROOT = Path(__file__).resolve().parents[1]

PLUGIN = textwrap.dedent(
    '''
    import click

    from roleplay.core.sources import SourceProvider
    from roleplay.core.types import ContextSource
    from roleplay.harness.tools import Tool, ToolOutput
    from roleplay.hookspecs import hookimpl


    async def weather_source(run):
        run.add(ContextSource("plugin.weather", "Weather", "Fog rolls in from the harbour tonight.", "factual"))


    @hookimpl
    def register_context_sources(register):
        register(SourceProvider("plugin.weather", weather_source))


    def read_weather(args, ctx):
        return ToolOutput(f"fog over {args['place']}")


    @hookimpl
    def register_tools(register):
        schema = {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]}
        register(Tool("weather_read", "Today's weather at a place.", schema, read_weather))


    @click.command("weather")
    @click.option("--place", default="the harbour")
    def weather(place):
        """Say the weather at a place."""
        click.echo(f"fog over {place}")


    @hookimpl
    def register_commands(cli):
        cli.add_command(weather)


    @hookimpl
    def register_model_providers(register):
        from roleplay.harness.models.registry import ModelInfo, ProviderInfo

        register(ProviderInfo("weather-llm", "Weather LLM", "w1", (ModelInfo("w1", "an OpenAI-compatible forecaster"),), key_env="WEATHER_API_KEY", default_base_url="http://127.0.0.1:9/v1"))
    '''
)


def install(site: Path, module: str) -> Path:
    """A distribution as an installer leaves it: the module and its ``dist-info``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(PLUGIN, encoding="utf-8")
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[roleplay]\nweather = {module}\n", encoding="utf-8")
    return site


def test_built_in_features_are_default_plugins_in_catalogue_order() -> None:
    rows = plugin_rows(plugin_manager(None, entry_points=False))
    assert [r["name"] for r in rows] == list(BUILTIN_PLUGINS)
    assert all(r["builtin"] for r in rows)
    state = next(r for r in rows if r["name"] == "rp-state")
    assert state["module"] == "roleplay.state.feature"
    assert {"register_tools", "register_projections", "register_context_sources", "register_effect_capabilities"} <= set(state["hooks"])
    assert set(BUILTIN_PLUGINS) - {CORE} <= set(FEATURES)


def test_only_enabled_features_load_and_the_closure_holds() -> None:
    names = [r["name"] for r in plugin_rows(plugin_manager(["rp-compat-mvu"], entry_points=False))]
    assert names == [CORE, "rp-state", "rp-character-card", "rp-lore-book", "rp-compat-mvu"]
    assert [r["name"] for r in plugin_rows(plugin_manager([], entry_points=False))] == [CORE]


@pytest.mark.anyio
async def test_a_third_party_plugin_adds_a_source_and_a_tool_to_the_run(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"rp_weather_{tmp_path.name.replace('-', '_')}"
    monkeypatch.syspath_prepend(str(install(tmp_path / "site", module)))
    # The plugin adds a model provider to the process-wide table: taken out again after the test.
    monkeypatch.setitem(registry.PROVIDERS, "weather-llm", None)
    del registry.PROVIDERS["weather-llm"]
    rows = plugin_rows(plugin_manager(None))
    [row] = [r for r in rows if not r["builtin"]]
    assert row == {
        "name": "weather",
        "builtin": False,
        "distribution": module.replace("_", "-"),
        "version": "0.1",
        "entryPoint": "weather",
        "hooks": ["register_commands", "register_context_sources", "register_model_providers", "register_tools"],
    }

    _, sid = await sample_story(store)
    rt = build_runtime(store)
    prepared = await prepare_run(rt, sid, "我推开灯塔的门。", parent_route=DEMO)
    assert prepared.build.sources["plugin.weather"].text == "Fog rolls in from the harbour tonight."
    assert "Fog rolls in from the harbour tonight." in prepared.build.writer_prompt
    spec = RpRun(rt, prepared).spec()
    # The run's tool registry has it; Chat's mask (spec: only the Writer, commit and the two read
    # tools) keeps it from the Chat parent, as it does the built-in agent-only tools.
    assert "weather_read" in spec.tools and "weather_read" not in spec.allowed_tools
    result = await spec.tools.execute(
        ToolCall("call_1", "weather_read", json.dumps({"place": "港口"})), ToolContext(sid, None, None, "call_1")
    )
    assert result.ok and result.content == "fog over 港口"
    # Agent mode lifts the mask: the parent is offered the plugin's tool with the built-in ones.
    _, agent_sid = await sample_story(store, mode="agent")
    agent = RpRun(rt, await prepare_run(rt, agent_sid, "我推开灯塔的门。", parent_route=DEMO)).spec()
    assert "weather_read" in agent.allowed_tools and "rp_write_turn" in agent.allowed_tools
    await rt.aclose()


def test_a_third_party_plugin_works_from_rp(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "rp_weather_cli_plugin")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "RP_HOME": str(tmp_path / "home")}
    env.pop("RP_DATABASE_URL", None)

    def rp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from roleplay.cli import main; main()", *args], env=env, capture_output=True, text=True, timeout=120
        )

    command = rp("weather", "--place", "港口")
    assert command.returncode == 0 and command.stdout == "fog over 港口\n", command.stderr
    assert "  weather " in rp("--help").stdout
    listed = json.loads(rp("plugins", "list", "--json").stdout)["plugins"]
    assert [(p["name"], p["distribution"]) for p in listed if not p["builtin"]] == [("weather", "rp-weather-cli-plugin")]
    providers = json.loads(rp("models", "list", "--json").stdout)["providers"]
    assert [p["models"][0]["route"] for p in providers if p["provider"] == "weather-llm"] == ["weather-llm/w1"]
    new = rp("new", "--sample", "--model", "demo", "--json")
    assert new.returncode == 0, new.stderr
    sid = json.loads(new.stdout)["sessionId"]
    prompt = rp("prompt", sid, "--json")
    assert prompt.returncode == 0 and "Fog rolls in from the harbour tonight." in json.loads(prompt.stdout)["writer"]["user"]


def test_a_broken_plugin_is_a_clear_error_and_rp_still_starts(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "rp_broken_plugin")
    (site / "rp_broken_plugin.py").write_text("raise ImportError('needs a library that is not installed')\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "RP_HOME": str(tmp_path / "home")}
    env.pop("RP_DATABASE_URL", None)

    def rp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "from roleplay.cli import main; main()", *args], env=env, capture_output=True, text=True, timeout=120
        )

    helped = rp("--help")
    assert helped.returncode == 0 and "  new " in helped.stdout
    assert "warning [plugins.load_failed]" in helped.stderr and "needs a library that is not installed" in helped.stderr
    new = rp("new", "--sample", "--model", "demo")
    assert new.returncode == 1 and "error [plugins.load_failed]" in new.stderr and "Traceback" not in new.stderr
