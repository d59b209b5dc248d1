"""Artifact generators: optional extensions produced *after* a commit has passed core validation.

The spec (事务与事件 5, ``rp-reply-options``): "only after all core validation passes does Core
run the optional artifact generators, in order"; a generator works from "the same frozen final
body"; "ordinary failures only produce a diagnostic and drop that extension", never blocking the
core commit. ``rp.reply-options`` is the reference generator (a one-shot structured sub-agent
call) and lives with its feature; this module is the ordered runner.

A generator returns the extension value for its key, or ``None`` for "nothing to add". Ordinary
failures, each a :class:`Diagnostic` with ``sourceId`` = the generator key and the extension
dropped:

=========================  =======================================================
``artifact.failed``        the generator raised :class:`RpError` (its code in details)
``artifact.timeout``       it ran past its ``timeout``
``artifact.invalid``       its value does not match its ``schema``
``artifact.too_large``     its value is over ``max_bytes`` (canonical JSON, UTF-8)
``artifact.crashed``       it raised anything else (a bug must not cost the reply either)
=========================  =======================================================

Cancellation (the run's abort) is the one thing that propagates. Timeouts use the event loop's
timer, which decides only *whether* a value is kept and is never written into the log.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from roleplay.canonical import canonical_json
from roleplay.core.run_context import RpRunDeps
from roleplay.core.types import CommitContext, Diagnostic
from roleplay.errors import RpError, ValidationError, pointer_from_parts

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_BYTES = 16_384


@dataclass(frozen=True)
class ArtifactInput:
    """What a generator may read. Everything is final: the commit is already decided."""

    body: str
    commit: CommitContext
    effects: tuple[Any, ...]
    extensions: Mapping[str, Any]  # parent-side extensions and earlier generators' outputs
    run: RpRunDeps | None = None  # what the run lent its tools (None outside a roleplay run)


Generate = Callable[[ArtifactInput], "Any | Awaitable[Any]"]


@dataclass(frozen=True)
class ArtifactGenerator:
    key: str  # the extension key it produces, e.g. "rp.reply-options"
    generate: Generate
    schema: dict[str, Any] | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES


class ArtifactRegistry:
    """Generators in registration order (the order they run in)."""

    def __init__(self, generators: Iterable[ArtifactGenerator] = ()) -> None:
        self._gens: dict[str, ArtifactGenerator] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for gen in generators:
            self.register(gen)

    def register(self, gen: ArtifactGenerator) -> None:
        if not isinstance(gen.key, str) or not gen.key:
            raise ValidationError("artifacts.invalid_key", "an artifact generator key is a non-empty string", pointer="/key")
        if gen.key in self._gens:
            raise ValidationError("artifacts.duplicate", f"artifact generator {gen.key!r} is already registered", pointer="/key")
        if gen.schema is not None:
            try:
                Draft202012Validator.check_schema(gen.schema)
            except SchemaError as exc:
                raise ValidationError(
                    "artifacts.invalid_schema",
                    f"artifact {gen.key!r}: {exc.message}",
                    pointer="/schema" + pointer_from_parts(list(exc.path)),
                ) from None
            self._validators[gen.key] = Draft202012Validator(gen.schema)
        self._gens[gen.key] = gen

    def keys(self) -> list[str]:
        return list(self._gens)

    def generators(self) -> list[ArtifactGenerator]:
        return list(self._gens.values())

    async def run(
        self,
        body: str,
        commit: CommitContext,
        effects: Iterable[Any],
        extensions: Mapping[str, Any],
        run: RpRunDeps | None = None,
    ) -> tuple[dict[str, Any], list[Diagnostic]]:
        """``(final extensions, diagnostics)``. A generator's value replaces a parent-side value
        under the same key: the generator is the authority for the extension it owns."""
        final = dict(extensions)
        diagnostics: list[Diagnostic] = []
        frozen_effects = tuple(effects)
        for gen in self._gens.values():
            view = ArtifactInput(body, commit, frozen_effects, MappingProxyType(dict(final)), run)
            value, problem = await self._one(gen, view)
            if problem is not None:
                diagnostics.append(problem)
                final.pop(gen.key, None)  # a failed generator drops its extension entirely
            elif value is not None:
                final[gen.key] = value
        return final, diagnostics

    async def _one(self, gen: ArtifactGenerator, view: ArtifactInput) -> tuple[Any, Diagnostic | None]:
        async def call() -> Any:
            value = gen.generate(view)
            return await value if inspect.isawaitable(value) else value

        try:
            value = await (asyncio.wait_for(call(), gen.timeout) if gen.timeout else call())
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            return None, Diagnostic("artifact.timeout", f"{gen.key} did not finish within {gen.timeout:g}s; dropped", gen.key)
        except RpError as exc:
            return None, Diagnostic("artifact.failed", f"{gen.key} failed: {exc.message}; dropped", gen.key, {"error": exc.to_dict()})
        except Exception as exc:  # noqa: BLE001 - an extension must never cost the user the reply
            return None, Diagnostic("artifact.crashed", f"{gen.key} crashed: {type(exc).__name__}: {exc}; dropped", gen.key)
        if value is None:
            return None, None
        try:
            size = len(canonical_json(value).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            return None, Diagnostic("artifact.invalid", f"{gen.key} produced a value that is not plain JSON: {exc}; dropped", gen.key)
        if size > gen.max_bytes:
            return None, Diagnostic(
                "artifact.too_large",
                f"{gen.key} produced {size} bytes (limit {gen.max_bytes}); dropped",
                gen.key,
                {"bytes": size, "limit": gen.max_bytes},
            )
        validator = self._validators.get(gen.key)
        if validator is not None:
            errors = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
            if errors:
                first = errors[0]
                return None, Diagnostic(
                    "artifact.invalid",
                    f"{gen.key} produced an invalid value: {first.message}; dropped",
                    gen.key,
                    {"pointer": pointer_from_parts(list(first.absolute_path))},
                )
        return value, None
