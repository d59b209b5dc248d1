"""The HTTP API (``rp serve``): every capability of the library over HTTP, streamed over SSE.

``app.create_app`` builds the FastAPI application around one shared runtime; ``serve`` is the
``rp serve`` command. Routes live in one module per resource group (``routes_*.py``).
"""
