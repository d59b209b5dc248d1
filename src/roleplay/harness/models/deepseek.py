"""DeepSeek: the OpenAI-compatible provider plus the flags its API needs.

Sources for every flag: api-docs.deepseek.com (Models & Pricing, Thinking Mode, Function Calling,
Strict mode (Beta), Error Codes) as summarised in the project's stack research §2, cross-checked
with pydantic-ai's DeepSeek profile. Limits change between model generations, so they live in the
registry, not here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .failures import RetryPolicy
from .types import Capabilities

if TYPE_CHECKING:  # the SDK is imported only when a DeepSeek model is built
    from .openai_compat import OpenAICompatModel, Sleep

DEEPSEEK_BASE_URL = "https://api.deepseek.com"
# Strict function calling ("strict": true) is only honoured on the beta endpoint.
DEEPSEEK_BETA_BASE_URL = "https://api.deepseek.com/beta"

DEEPSEEK_CAPABILITIES = Capabilities(
    # The Chat Completions API is text-only.
    supports_images=False,
    # Thinking mode + tools: "the reasoning_content must be fully passed back to the API in all
    # subsequent requests", otherwise HTTP 400; sending it empty is accepted.
    requires_reasoning_on_tool_turns=True,
    reasoning_field="reasoning_content",
    strict_tools_need_beta_base_url=True,
    # "Thinking mode does not support this tool_choice" for required/named choices.
    supports_tool_choice_in_thinking=False,
    thinking_via_extra_body=True,
    # The API knows low/high/max; the documented mapping of other common effort words.
    reasoning_effort_map={
        "minimal": "low",
        "low": "low",
        "medium": "high",
        "high": "high",
        "xhigh": "high",
        "max": "max",
        "ultra": "max",
    },
    # ``max_completion_tokens`` is silently ignored by DeepSeek.
    max_tokens_param="max_tokens",
    # Temperature, penalties (and top_p) "are accepted but ignored in thinking mode".
    supports_sampling_in_thinking=False,
    # Overflow is a plain 400 invalid_request_error, recognisable only by its message.
    context_overflow_pattern=r"maximum context length is (\d+) tokens",
)

# Models whose default is non-thinking: the deprecated alias of V4-Flash without thinking.
_NON_THINKING_MODELS = frozenset({"deepseek-chat"})


def deepseek_model(
    model: str = "deepseek-flash",
    *,
    api_key: str | None,
    base_url: str | None = None,
    beta_base_url: str | None = None,
    retry: RetryPolicy | None = None,
    sleep: Sleep | None = None,
    timeout: float = 300.0,
    default_max_tokens: int | None = None,
    context_window: int | None = None,
) -> OpenAICompatModel:
    """``context_window`` is the model's window from the registry (or a route's override); it
    lives there, not in ``DEEPSEEK_CAPABILITIES``, because it changes between model generations."""
    base = base_url or DEEPSEEK_BASE_URL
    # A custom base (a proxy, the fake server) gets its beta path derived from it; the real API's
    # beta URL is known.
    beta = beta_base_url or (DEEPSEEK_BETA_BASE_URL if base_url is None else None)
    from .openai_compat import OpenAICompatModel

    return OpenAICompatModel(
        model=model,
        base_url=base,
        api_key=api_key,
        provider="deepseek",
        label=f"DeepSeek {model}",
        capabilities=replace(DEEPSEEK_CAPABILITIES, context_window=context_window),
        thinking_default=model not in _NON_THINKING_MODELS,
        beta_base_url=beta,
        retry=retry,
        sleep=sleep,
        timeout=timeout,
        default_max_tokens=default_max_tokens,
    )
