"""The hook specifications: one ``register`` callback per kind of contribution, names and
arguments checked by pluggy when a plugin registers."""

from __future__ import annotations

import inspect

import pluggy
import pytest

from roleplay import hookspecs
from roleplay.hookspecs import hookimpl

HOOKS = {
    "register_tools": ["register", "runtime"],
    "register_projections": ["register"],
    "register_session_commands": ["register"],
    "register_context_sources": ["register"],
    "register_effect_capabilities": ["register"],
    "register_extension_capabilities": ["register"],
    "register_artifact_generators": ["register", "runtime"],
    "register_materializers": ["register"],
    "register_lore_templates": ["register"],
    "register_text_transformers": ["register"],
    "register_history_transformers": ["register"],
    "register_guides": ["register"],
    "register_play_commands": ["register"],
    "register_model_providers": ["register"],
    "register_demo_policies": ["register"],
    "register_migrations": ["register"],
    "register_commands": ["cli"],
    "runtime_ready": ["runtime"],
}


def manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def test_every_hook_and_its_arguments() -> None:
    specs = {name: fn for name, fn in vars(hookspecs).items() if getattr(fn, f"{hookspecs.PROJECT}_spec", None) is not None}
    assert {name: list(inspect.signature(fn).parameters) for name, fn in specs.items()} == HOOKS
    assert all(fn.__doc__ for fn in specs.values())  # each says what ``register`` takes


def test_an_implementation_may_take_fewer_arguments_and_results_are_collected() -> None:
    class Plugin:
        @hookimpl
        def register_tools(self, register):  # type: ignore[no-untyped-def]
            register("a tool")

    pm = manager()
    pm.register(Plugin())
    got: list[str] = []
    pm.hook.register_tools(register=got.append, runtime=None)
    assert got == ["a tool"]


def test_an_implementation_with_an_unknown_argument_is_refused_on_registration() -> None:
    class Broken:
        @hookimpl
        def register_tools(self, register, store):  # type: ignore[no-untyped-def]
            pass

    with pytest.raises(pluggy.PluginValidationError):
        manager().register(Broken())
