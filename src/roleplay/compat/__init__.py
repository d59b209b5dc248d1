"""Adapters that turn community formats into native engine structures.

Each adapter is pure (text and JSON in, native definitions, values and diagnostics out) and owns
no storage: what it produces is handed to the native packages (``roleplay.state``, lorebooks),
which take over from there. Nothing here ever executes code found in a card or a lorebook.
"""
