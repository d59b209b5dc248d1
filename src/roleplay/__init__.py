"""roleplay: event-sourced engine for long-form AI roleplay."""

__version__ = "0.1.0"
