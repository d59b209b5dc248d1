"""Harness tests use the store fixtures of ``tests/conftest.py``."""
