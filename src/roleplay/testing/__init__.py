"""Test doubles that also serve offline demos: fake OpenAI-compatible server, helpers."""
