"""The plugin seam: pluggy hook specifications, in the style of simonw/llm and datasette.

Every roleplay feature, built-in or third-party, is a pluggy plugin: a module (or object) with
functions marked ``@hookimpl`` whose names are the hooks below. Each ``register_*`` hook gets a
``register`` callback and calls it once per contribution::

    from roleplay.hookspecs import hookimpl

    @hookimpl
    def register_tools(register, runtime):
        register(my_tool(runtime.service))

An implementation may take any subset of a hook's arguments (pluggy matches them by name).
Built-in features load as default plugins (``roleplay.plugins.BUILTIN_PLUGINS``), filtered by the
feature manager's enabled set; third-party plugins load from the ``roleplay`` entry-point group::

    [project.entry-points.roleplay]
    my_plugin = "my_package.plugin"

The runtime (``roleplay.core.runtime.RoleplayRuntime.create``) calls the runtime hooks once when it
is built, so what a plugin contributes applies from the next runtime: the next ``rp`` command, or
the next conversation a long-running process opens. This module imports nothing of the project:
any layer may implement a hook.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "roleplay"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -- the runtime: called once per RoleplayRuntime -------------------------------------------------


@hookspec
def register_tools(register: Any, runtime: Any) -> None:
    """Model tools: ``register(tool)`` with a ``roleplay.harness.tools.Tool``. ``runtime`` is the
    ``RoleplayRuntime`` being built (its session service and asset store are ready)."""


@hookspec
def register_projections(register: Any) -> None:
    """Session projections: ``register(projection)`` with a ``roleplay.harness.projections.Projection``."""


@hookspec
def register_session_commands(register: Any) -> None:
    """Harness commands (setup and state commands): ``register(name, handler)``."""


@hookspec
def register_context_sources(register: Any) -> None:
    """Context sources: ``register(provider)`` with a ``roleplay.core.sources.SourceProvider``.
    One provider per source (or family of sources), living next to its domain."""


@hookspec
def register_effect_capabilities(register: Any) -> None:
    """``rp_commit_turn`` effect kinds: ``register(capability)`` with a
    ``roleplay.core.effects.EffectCapability``."""


@hookspec
def register_extension_capabilities(register: Any) -> None:
    """Parent-side commit extensions: ``register(capability)`` with a
    ``roleplay.core.effects.ExtensionCapability``."""


@hookspec
def register_artifact_generators(register: Any, runtime: Any) -> None:
    """Generators that run after a commit passed core validation: ``register(generator)`` with a
    ``roleplay.core.artifacts.ArtifactGenerator``."""


@hookspec
def register_materializers(register: Any) -> None:
    """New-story materializers: ``register(step, order=…)``; steps run by ascending ``order``
    (the native state seed is 100, core's macro-expanded opening 500, the MVU adapter 600)."""


@hookspec
def register_lore_templates(register: Any) -> None:
    """Lorebook template steps: ``register(factory)``; ``factory(state)`` returns a per-run
    ``render(text, lookup) -> text`` or None. Several run in registration order."""


@hookspec
def register_text_transformers(register: Any) -> None:
    """Card text transformers: ``register(transform)`` with ``transform(text) -> text``; several
    run in registration order."""


@hookspec
def register_history_transformers(register: Any) -> None:
    """Prompt-only rewrites of the conversation the Writer reads: ``register(transform)`` with
    ``async transform(history, reader)`` editing a ``roleplay.core.prompt_history.PromptHistory``
    (the log never changes). Several run in registration order."""


@hookspec
def register_guides(register: Any) -> None:
    """Guide skills an Agent-mode parent loads on demand (``rp_guide``): ``register(name)`` with a
    guide shipped in ``roleplay.guides``, or ``register(guide)`` with a ``roleplay.guides.Guide``
    of the plugin's own. A helper guide (its ``parent`` set) comes with its parent."""


@hookspec
def register_play_commands(register: Any) -> None:
    """``rp play`` slash commands: ``register("/name", handler, help)``; ``handler(runtime,
    argument, draft)`` is async and may only change the draft."""


# -- the process: called once when the plugin manager is built --------------------------------


@hookspec
def register_model_providers(register: Any) -> None:
    """Model providers: ``register(provider_info)`` with a
    ``roleplay.harness.models.registry.ProviderInfo`` (an OpenAI-compatible endpoint)."""


@hookspec
def register_demo_policies(register: Any) -> None:
    """Policies of the offline ``demo`` model: ``register(name, policy, first=False)``."""


@hookspec
def register_migrations(register: Any) -> None:
    """A feature's own tables: ``register(owner, migrations)`` with ``owner`` a name (the feature's)
    and ``migrations`` a sequence of ``roleplay.harness.store.migrations.Migration`` objects
    (``number``, ``name``, ``sqlite``, ``postgres``, optionally ``expects``), numbered from 1 per
    owner, recorded in ``feature_migrations`` (``roleplay.assets.schema``). ``rp-core`` registers
    the asset store's and the settings' this way; the harness migrates only the event log."""


# -- the command line -----------------------------------------------------------------------------


@hookspec
def register_commands(cli: Any) -> None:
    """Top-level ``rp`` commands: ``cli.add_command(command)`` on the click group (as llm does)."""


@hookspec
def runtime_ready(runtime: Any) -> None:
    """Called last, with the built ``RoleplayRuntime``: for a contribution no ``register_*`` hook
    covers (a feature's play-loop choices, a cache of its own)."""
