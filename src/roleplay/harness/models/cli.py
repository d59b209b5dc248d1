"""``rp models``: see which providers are configured, and send one prompt through a route.

The main CLI attaches the group with ``cli.add_command(models)``; it also runs on its own with
``python -m roleplay.harness.models.cli``. Configuration is read the same way a run resolves its
route (the environment, then the keys stored in the home, ``rp models key``), so what ``models
test`` reports is what a chat would use.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import click

from roleplay.cli_context import fail, home_option, json_text, state_of, terminal_safe
from roleplay.errors import RpError

from .registry import PROVIDERS, is_configured
from .routes import Route, build_model, deprecation_note, model_environment, resolve_route
from .secrets import KeyFile
from .types import ChatMessage, ChatModel, ModelRequest, ModelResponse, complete

DEFAULT_PROMPT = "Reply with one short, friendly sentence."


@click.group("models")
def models() -> None:
    """List model providers and test a model route."""


def _provider_rows(show_all: bool) -> list[dict[str, Any]]:
    env = model_environment()
    rows = []
    for provider in PROVIDERS.values():
        if provider.test_double and not show_all:
            continue
        rows.append(
            {
                "provider": provider.name,
                "label": provider.label,
                "configured": is_configured(provider, env),
                "key_env": provider.key_env,
                "base_url_env": provider.base_url_env,
                "demo": provider.demo,
                "test_double": provider.test_double,
                "accepts_any_model": provider.open_models,
                "models": [
                    {
                        "route": f"{provider.name}/{m.name}",
                        "description": m.description,
                        "default": m.name == provider.default_model,
                        "deprecated": m.deprecated,
                        "context_window": m.context_window,
                        "max_output_tokens": m.max_output_tokens,
                    }
                    for m in provider.models
                ],
            }
        )
    return rows


def _default_route() -> Route | None:
    try:
        return resolve_route(None, None, model_environment())
    except RpError:
        return None


@models.command("list")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--all", "show_all", is_flag=True, help="Include test doubles.")
@click.pass_context
def list_command(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """Known providers and models, and which are configured (the environment, or a stored key)."""
    state_of(ctx).paths  # noqa: B018  (the home's stored keys count)
    rows = _provider_rows(show_all)
    default = _default_route()
    if as_json:
        click.echo(json.dumps({"default_route": default.spec if default else None, "providers": rows}, indent=2))
        return
    for row in rows:
        if row["demo"]:
            state = "demo, always available"
        elif row["test_double"]:
            state = "test double"
        elif row["configured"]:
            state = "configured"
        else:
            needs = row["key_env"] + (f" or {row['base_url_env']}" if row["accepts_any_model"] else "")
            state = f"not configured: set {needs}"
        click.echo(f"{row['provider']}: {row['label']} [{state}]")
        for m in row["models"]:
            marks = [mark for mark, on in (("default", m["default"]), ("DEMO", row["demo"])) if on]
            if m["deprecated"]:
                marks.append(f"deprecated: {m['deprecated']}")
            suffix = f" [{'; '.join(marks)}]" if marks else ""
            click.echo(f"  {m['route']:<28} {m['description']}{suffix}")
        if row["accepts_any_model"] and not row["test_double"]:
            click.echo(f"  {row['provider']}/<any model name the endpoint serves>")
    if default:
        click.echo(f"default route: {default.spec}")
    else:
        click.echo("default route: none (set DEEPSEEK_API_KEY or OPENAI_API_KEY, or use --model demo)")


async def _run_once(model: ChatModel, prompt: str) -> ModelResponse:
    try:
        return await complete(model, ModelRequest(messages=[ChatMessage("user", prompt)]))
    finally:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await aclose()


@models.command("test")
@click.option("--model", "spec", default=None, help="Route, e.g. deepseek/deepseek-flash, openai/gpt-4o-mini, demo.")
@click.option("--prompt", default=DEFAULT_PROMPT, show_default=True, help="The one-line prompt to send.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@home_option
@click.pass_context
def test_command(ctx: click.Context, spec: str | None, prompt: str, as_json: bool) -> None:
    """Send one prompt through a route; print the reply, usage and latency."""
    try:
        state_of(ctx).paths  # noqa: B018  (the home's stored keys count)
        env = model_environment()
        route = resolve_route(spec, None, env)
        model = build_model(route, env)
        started = time.perf_counter()
        response = asyncio.run(_run_once(model, prompt))
        latency_ms = round((time.perf_counter() - started) * 1000, 1)
    except RpError as exc:
        fail(exc, as_json)  # the one error format of every ``rp`` command
        return
    warnings = [w for w in (deprecation_note(route),) if w] + list(response.warnings)
    if as_json:
        payload = {
            "ok": True,
            "route": route.spec,
            "label": model.label,
            "demo": model.provider == "demo",
            "reply": response.text,
            "reasoning": response.reasoning,
            "finish_reason": response.finish_reason,
            "usage": response.usage.to_dict() if response.usage else None,
            "latency_ms": latency_ms,
            "warnings": warnings,
        }
        click.echo(json_text(payload))
        return
    click.echo(f"route:    {route.spec} ({model.label})")
    # The reply is a stranger's text: it must not drive the terminal.
    click.echo(f"reply:    {terminal_safe(response.text)}")
    click.echo(f"usage:    {_usage_line(response)}")
    click.echo(f"latency:  {latency_ms} ms")
    for warning in warnings:
        click.echo(f"warning:  {warning}")


@models.group("key")
def key_group() -> None:
    """Model keys stored in the home (secrets.json, owner-only); the environment always wins."""


def _key_file(ctx: click.Context) -> KeyFile:
    return KeyFile(state_of(ctx).paths.home)


@key_group.command("set")
@home_option
@click.argument("provider")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def key_set(ctx: click.Context, provider: str, as_json: bool) -> None:
    """Store PROVIDER's key, read from standard input (a hidden prompt on a terminal); never printed."""
    try:
        keys = _key_file(ctx)
        keys.status()  # a broken file is said before asking for the key
        key: str = click.prompt(f"{provider} key", hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
        keys.set(provider, key)
    except RpError as exc:
        fail(exc, as_json)
        return
    click.echo(json_text({"provider": provider, "stored": True}) if as_json else f"stored {provider}'s key in {keys.path}")


@key_group.command("clear")
@home_option
@click.argument("provider")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def key_clear(ctx: click.Context, provider: str, as_json: bool) -> None:
    """Forget PROVIDER's stored key."""
    try:
        cleared = _key_file(ctx).clear(provider)
    except RpError as exc:
        fail(exc, as_json)
        return
    click.echo(
        json_text({"provider": provider, "cleared": cleared})
        if as_json
        else (f"forgot {provider}'s key" if cleared else f"no stored key for {provider}")
    )


@key_group.command("status")
@home_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def key_status(ctx: click.Context, as_json: bool) -> None:
    """Which providers have a stored key (never the key) and which the environment sets (it wins)."""
    try:
        stored = _key_file(ctx).status()
    except RpError as exc:
        fail(exc, as_json)
        return
    rows = {p: {"stored": s, "environment": bool(os.environ.get(PROVIDERS[p].key_env or ""))} for p, s in stored.items()}
    if as_json:
        click.echo(json_text({"keys": rows}))
        return
    for provider, row in rows.items():
        where = [w for w, on in (("environment", row["environment"]), ("stored", row["stored"])) if on]
        click.echo(f"{provider}: {', '.join(where) if where else 'not set'}")


def _usage_line(response: ModelResponse) -> str:
    usage = response.usage
    if usage is None:
        return "not reported by the server"
    parts = [f"prompt {usage.prompt_tokens}", f"completion {usage.completion_tokens}", f"total {usage.total_tokens}"]
    if usage.cache_hit_tokens is not None:
        parts.append(f"cache hit {usage.cache_hit_tokens}")
    if usage.cache_miss_tokens is not None:
        parts.append(f"cache miss {usage.cache_miss_tokens}")
    return ", ".join(parts)


if __name__ == "__main__":
    models()
