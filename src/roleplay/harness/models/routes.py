"""Routes: which provider, model and effort a run uses, and building the model for one.

A route spec reads ``provider/model[/effort]``: ``deepseek/deepseek-flash``,
``deepseek/deepseek-v4-pro/max``, ``openai/gpt-4o-mini``, ``openai/meta-llama/llama-3-8b`` (model
names may contain slashes; a trailing effort word is the effort), or just ``demo`` / ``scripted``.
A bare known model name (``deepseek-flash``) finds its provider.

Route options follow a ``?``: ``openai/llama3?tools=off`` marks a model that cannot call tools
(a roleplay turn then runs without them, ``core/toolfree.py``), ``?json=off`` one that ignores
JSON mode; both together read ``?tools=off&json=off``. They set the model's capability flags.

Resolution order: the explicit spec, then ``settings["model"]``, then ``RP_MODEL``, then whichever
key is set (``DEEPSEEK_API_KEY`` before ``OPENAI_API_KEY``/``OPENAI_BASE_URL``). With none of
them the user is told to set a key or use ``--model demo``; the demo is never chosen silently,
because a user who thinks they talk to a real model would be misled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping

from roleplay.errors import RpError
from roleplay.redact import redact_url

from .demo import DemoModel, DemoPolicies
from .failures import RetryPolicy
from .registry import OPENAI_BASE_URL, PROVIDERS, context_window, get_provider, provider_for_model
from .scripted import ScriptedModel
from .secrets import KeyFile, with_stored_keys
from .types import REASONING_EFFORTS, Capabilities, ChatModel

if TYPE_CHECKING:
    from .openai_compat import Sleep

# The ``openai`` SDK (about a second to import) is loaded only when a real provider's model is
# built: ``rp --help``, the demo and the scripted model never pay for it.


@dataclass(frozen=True)
class Route:
    provider: str
    model: str
    reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    base_url: str | None = None
    # Overrides the model's known context window (a local server's model, a smaller budget).
    context_window: int | None = None
    # Route options (``?tools=off``, ``?json=off``): False turns the capability off, None keeps
    # the provider's own flag.
    tools: bool | None = None
    json_mode: bool | None = None

    @property
    def spec(self) -> str:
        out = f"{self.provider}/{self.model}"
        out = f"{out}/{self.reasoning_effort}" if self.reasoning_effort else out
        return out + route_options_suffix(self)

    def to_dict(self) -> dict[str, Any]:
        """The route as recorded in the log: a base URL loses its credentials."""
        out = {k: v for k, v in self.__dict__.items() if v is not None}
        if self.base_url is not None:
            out["base_url"] = redact_url(self.base_url)
        return out


def _surrogate_at(value: str) -> int | None:
    """Offset of the first lone surrogate: a byte that was not UTF-8 in an environment variable."""
    return next((i for i, ch in enumerate(value) if "\ud800" <= ch <= "\udfff"), None)


def _char_name(ch: str) -> str:
    code = ord(ch)
    return f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"


def _check_model_name(model: str) -> None:
    bad = _surrogate_at(model)
    if bad is not None:
        raise RpError(
            "model.bad_route",
            f"model route {model!r} is not valid UTF-8 text ({_char_name(model[bad])} at offset {bad}); check the environment's encoding",
            pointer="/model",
            details={"offset": bad},
        )


def _check_environment(name: str, value: str | None, *, header: bool) -> None:
    """Refuse what an HTTP request cannot carry: a key goes into a header (visible ASCII and
    spaces), a base URL into the request line (any text, but not undecodable bytes). The message
    names the variable, never its value: it may be a secret."""
    if value is None:
        return
    bad = next((i for i, ch in enumerate(value) if not " " <= ch <= "~"), None) if header else _surrogate_at(value)
    if bad is not None:
        raise RpError(
            "model.bad_environment",
            f"{name} holds {_char_name(value[bad])} at offset {bad}, which an HTTP "
            "request cannot carry; check for a pasted quote, a line break or a stray byte",
            details={"variable": name, "offset": bad},
        )


ROUTE_OPTIONS = {"tools": "tools", "json": "json_mode"}
_SWITCH = {"on": True, "off": False}


_key_file: KeyFile | None = None


def use_key_file(keys: KeyFile | None) -> None:
    """The process's stored model keys (``rp serve`` and the CLI: the home's ``secrets.json``);
    None: the environment alone."""
    global _key_file
    _key_file = keys


def key_file() -> KeyFile | None:
    return _key_file


def model_environment() -> Mapping[str, str]:
    """What routes read keys from: the environment, with the stored keys where it has none."""
    return with_stored_keys(os.environ, _key_file)


def route_options_suffix(route: Route) -> str:
    pairs = [(key, getattr(route, field)) for key, field in ROUTE_OPTIONS.items()]
    shown = [f"{key}={'on' if value else 'off'}" for key, value in pairs if value is not None]
    return "?" + "&".join(shown) if shown else ""


def _parse_options(text: str, query: str) -> dict[str, bool]:
    """``tools=off&json=off`` → route fields; anything else is refused with the accepted words."""
    options: dict[str, bool] = {}
    for item in query.split("&"):
        key, sep, value = item.partition("=")
        if key not in ROUTE_OPTIONS or not sep or value.lower() not in _SWITCH:
            raise RpError(
                "model.bad_route",
                f"route {text!r}: unknown option {item!r}; options are tools=on|off and json=on|off, e.g. openai/llama3?tools=off",
                pointer="/model",
                details={"route": text, "option": item},
            )
        options[ROUTE_OPTIONS[key]] = _SWITCH[value.lower()]
    return options


def parse_route_spec(spec: str, env: Mapping[str, str] | None = None) -> Route:
    env = model_environment() if env is None else env
    _check_model_name(spec)
    text, _, query = spec.strip().partition("?")
    options = _parse_options(spec.strip(), query) if query else {}
    if not text:
        raise RpError("model.bad_route", "an empty model route; use e.g. deepseek/deepseek-flash or demo")
    parts = text.split("/")
    effort = None
    if len(parts) >= 3 and parts[-1] in REASONING_EFFORTS:
        effort = parts.pop()
    head, rest = parts[0], "/".join(parts[1:])
    if head in PROVIDERS:
        provider = PROVIDERS[head]
        model = rest or provider.default_model
    elif len(parts) == 1:
        known = provider_for_model(head)
        provider = get_provider(known) if known else get_provider(_default_provider(env, spec=text))
        model = head
    else:
        raise RpError(
            "model.unknown_provider",
            f"unknown provider {head!r} in route {text!r}; known: {', '.join(PROVIDERS)}",
            details={"route": text},
        )
    if any(not p for p in model.split("/")):
        raise RpError("model.bad_route", f"route {text!r} has an empty model name part")
    # ``options`` holds the route fields ``ROUTE_OPTIONS`` names; an absent one keeps the provider's flag.
    return Route(
        provider=provider.name, model=model, reasoning_effort=effort, tools=options.get("tools"), json_mode=options.get("json_mode")
    )


def resolve_route(
    spec: str | None = None,
    settings: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Route:
    """The route for a run. ``settings`` may hold ``model`` (a spec), ``reasoning_effort``,
    ``max_output_tokens``, ``base_url`` and ``context_window``; a spec's own effort wins over the
    settings'."""
    env = model_environment() if env is None else env
    settings = dict(settings or {})
    unknown = set(settings) - {"model", "reasoning_effort", "max_output_tokens", "base_url", "context_window"}
    if unknown:
        name = sorted(unknown)[0]
        raise RpError("model.bad_route", f"unknown route setting {name!r}", pointer=f"/{name}")
    if settings.get("model") is not None and not isinstance(settings["model"], str):
        raise RpError("model.bad_route", "the model route must be a string", pointer="/model")
    chosen = spec or settings.get("model") or env.get("RP_MODEL")
    if chosen:
        route = parse_route_spec(chosen, env)
    else:
        provider = get_provider(_default_provider(env, spec=None))
        model = (env.get(provider.model_env) if provider.model_env else None) or provider.default_model
        _check_model_name(model)
        route = Route(provider=provider.name, model=model)
    effort = route.reasoning_effort or settings.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise RpError(
            "model.bad_effort",
            f"unknown reasoning effort {effort!r}; use one of {', '.join(REASONING_EFFORTS)}",
            pointer="/reasoning_effort",
        )
    max_out = settings.get("max_output_tokens")
    if max_out is not None and (isinstance(max_out, bool) or not isinstance(max_out, int) or max_out < 1):
        raise RpError("model.bad_route", "max_output_tokens must be a positive integer", pointer="/max_output_tokens")
    window = settings.get("context_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise RpError("model.bad_route", "context_window must be a positive integer", pointer="/context_window")
    base_url = settings.get("base_url")
    if base_url is not None and (not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))):
        raise RpError("model.bad_route", "base_url must be an http(s) URL", pointer="/base_url")
    return Route(route.provider, route.model, effort, max_out, base_url, window, tools=route.tools, json_mode=route.json_mode)


def route_context_window(route: Route) -> int | None:
    """The route's own window, else the listed model's, else None (unknown)."""
    return route.context_window or context_window(route.provider, route.model)


def _default_provider(env: Mapping[str, str], *, spec: str | None) -> str:
    if env.get("DEEPSEEK_API_KEY"):
        return "deepseek"
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return "openai"
    what = f"model {spec!r} names no provider and" if spec else "no model is configured:"
    raise RpError(
        "model.not_configured",
        f"{what} no API key is set. Set DEEPSEEK_API_KEY (or OPENAI_API_KEY, optionally with "
        "OPENAI_BASE_URL for another OpenAI-compatible server), or use `--model demo` for the "
        "offline demo model.",
    )


def deprecation_note(route: Route) -> str | None:
    info = PROVIDERS[route.provider].model(route.model)
    if info is None or info.deprecated is None:
        return None
    instead = f"; use {route.provider}/{info.alias_of}" if info.alias_of else ""
    return f"{route.spec}: {info.deprecated}{instead}"


def build_model(
    route: Route,
    env: Mapping[str, str] | None = None,
    *,
    sleep: Sleep | None = None,
    retry: RetryPolicy | None = None,
    timeout: float = 300.0,
    demo_policies: DemoPolicies | None = None,
) -> ChatModel:
    """A ready ``ChatModel`` for the route. Keys come from ``env`` (default: the environment, with
    the stored keys where it has none) and nowhere else."""
    if route.tools is not None or route.json_mode is not None:
        # Route options only switch capability flags; the model is built as without them.
        plain = build_model(
            replace(route, tools=None, json_mode=None), env, sleep=sleep, retry=retry, timeout=timeout, demo_policies=demo_policies
        )
        return with_route_options(plain, route)
    env = model_environment() if env is None else env
    provider = get_provider(route.provider)
    if provider.demo:
        return DemoModel(model=route.model, policies=demo_policies)
    if provider.test_double:
        return ScriptedModel(model=route.model)
    base_url = route.base_url or (env.get(provider.base_url_env) if provider.base_url_env else None)
    key = env.get(provider.key_env) if provider.key_env else None
    if provider.key_env:
        _check_environment(provider.key_env, key, header=True)
    if provider.base_url_env and not route.base_url:
        _check_environment(provider.base_url_env, base_url, header=False)
    if provider.name == "deepseek":
        from .deepseek import deepseek_model

        if not key:
            raise RpError(
                "model.not_configured",
                f"route {route.spec} needs DEEPSEEK_API_KEY; set it, or use `--model demo` for the offline demo",
            )
        return deepseek_model(
            route.model,
            api_key=key,
            base_url=base_url,
            retry=retry,
            sleep=sleep,
            timeout=timeout,
            default_max_tokens=route.max_output_tokens,
            context_window=route_context_window(route),
        )
    official = base_url is None or base_url.rstrip("/") == OPENAI_BASE_URL
    if official and not key:
        raise RpError(
            "model.not_configured",
            f"route {route.spec} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server); or use `--model demo` for the offline demo",
        )
    from .openai_compat import OpenAICompatModel

    return OpenAICompatModel(
        model=route.model,
        base_url=base_url or OPENAI_BASE_URL,
        api_key=key,
        provider="openai",
        # The label is stored with every model request and printed: never with credentials.
        label=f"{route.model} via {'OpenAI' if official else redact_url(base_url or '')}",
        # OpenAI's reasoning models reject ``max_tokens``; most other servers only know it.
        # Its reasoning models also refuse temperature, top_p and the penalties.
        capabilities=Capabilities(
            max_tokens_param="max_completion_tokens" if official else "max_tokens",
            context_window=route_context_window(route),
            supports_sampling_in_thinking=not official,
        ),
        retry=retry,
        sleep=sleep,
        timeout=timeout,
        default_max_tokens=route.max_output_tokens,
    )


def with_route_options(model: ChatModel, route: Route) -> ChatModel:
    """The model with the route's option flags applied over its provider's capabilities."""
    caps = model.capabilities
    if route.tools is not None:
        caps = replace(caps, supports_tools=route.tools)
    if route.json_mode is not None:
        caps = replace(caps, supports_json_mode=route.json_mode)
    model.capabilities = caps
    return model
