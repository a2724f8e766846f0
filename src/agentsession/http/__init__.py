"""The HTTP service of agentsession (FastAPI), and what its client shares with it.

``create_app`` (in :mod:`agentsession.http.app`) is the one composition root; it needs
the ``server`` extra (``pip install 'agentsession[server]'``). :mod:`.protocol` holds
what the server and :mod:`agentsession.client` must agree on (problem types, ETags,
HTTP-only errors) and imports no web framework, so the client works without FastAPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)
