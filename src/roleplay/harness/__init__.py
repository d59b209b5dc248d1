"""Generic agent harness: event log, sessions, surface, projections, agent loop. Knows nothing of roleplay."""
