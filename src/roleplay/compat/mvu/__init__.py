"""``rp-compat-mvu``: MVU / MVU Zod variable cards → native ``rp.state`` v2, without running scripts.

Entry points:

* :func:`inspect_card` → :class:`MvuReport`: detection findings, the ``story`` namespace
  (definition + initial value, or a disabled namespace with diagnostics), and per greeting the
  namespace after its ``<initvar>`` and literal commands plus the cleaned opening text;
* :func:`select_opening`: the opening a session chose;
* :func:`render_template` / :class:`TemplateHook`: the read-only EJS subset and display macros at
  lorebook activation;
* the building blocks (:func:`detect`, :func:`parse_data`, :func:`derive_from_data`,
  :func:`from_json_schema`, :func:`derive_rules`, :func:`extract_commands`,
  :func:`apply_commands`) for callers that need one step.

Diagnostics are :class:`roleplay.errors.Problem` objects with ``mvu.*`` codes; ``details`` always
carries ``severity`` and the source location.
"""

from .adapter import (
    MvuReport,
    NamespaceBuild,
    OpeningReport,
    inspect_card,
    select_opening,
)
from .commands import Command, extract_commands, parse_value
from .detect import Finding, detect, is_mvu
from .diagnostics import Loc, severity
from .initvar import InitVarResult, greeting_initvar, load_initvar
from .openings import apply_commands, clean_opening_text
from .parsing import Parsed, parse_data
from .rules import RulesResult, derive_rules
from .schema import Derived, derive_from_data, from_json_schema
from .sources import Book, CardSource, read_book, read_card
from .templates import TemplateHook, TemplateResult, render_template

__all__ = [
    "Book",
    "CardSource",
    "Command",
    "Derived",
    "Finding",
    "InitVarResult",
    "Loc",
    "MvuReport",
    "NamespaceBuild",
    "OpeningReport",
    "Parsed",
    "RulesResult",
    "TemplateHook",
    "TemplateResult",
    "apply_commands",
    "clean_opening_text",
    "derive_from_data",
    "derive_rules",
    "detect",
    "extract_commands",
    "from_json_schema",
    "greeting_initvar",
    "inspect_card",
    "is_mvu",
    "load_initvar",
    "parse_data",
    "parse_value",
    "read_book",
    "read_card",
    "render_template",
    "select_opening",
    "severity",
]
