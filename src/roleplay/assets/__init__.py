"""Shared asset library: cards, lorebooks, personas, presets, writing styles."""
