"""Roleplay core: the run, context build, Writer, commit, surface-owned entities, and the two boundary modules through which roleplay code reaches the harness."""
