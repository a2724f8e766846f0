"""The inspector: server-rendered pages to look at sessions in a browser.

Served by ``agentsession serve`` at ``/ui/`` (:func:`install_ui`) and locally by
``agentsession ui --url URL``. Modules: :mod:`.app` (mounting, login, logout, static
files), :mod:`.auth` (the session cookie, CSRF, one-time tickets), :mod:`.views` (the
pages), :mod:`.timeline` (a page of history by message format), :mod:`.memorydiff`,
:mod:`.pages` (Jinja2 and the security headers), :mod:`.guard` (errors as pages),
:mod:`.query` (query parameters, checked alike).
See docs/inspector.md.
"""

from __future__ import annotations

from .app import install_ui, local_tickets
from .auth import Tickets

__all__ = ["Tickets", "install_ui", "local_tickets"]
