"""Observations of the library's own work, for whoever listens (the service's metrics).

The library notes what it does at a few points: a store call's duration (each call of
the async manager), a group commit's batch size (SQLite), a busy retry of a write.
Nothing listens by default and a note then costs one empty-list check; the HTTP
service's metrics (:mod:`agentsession.http.metrics`) add a listener. A note never
carries content: names, numbers and operation names only.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Listener", "listen", "note", "unlisten"]

#: A listener: ``(name, value, label)`` with ``label`` an operation name or "".
Listener = Callable[[str, float, str], None]

_listeners: list[Listener] = []


def listen(listener: Listener) -> None:
    """Call ``listener`` with every note from now on (once, however often added)."""
    if listener not in _listeners:
        _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    """Stop calling ``listener`` (nothing if it does not listen)."""
    if listener in _listeners:
        _listeners.remove(listener)


def note(name: str, value: float = 1.0, label: str = "") -> None:
    """Tell every listener: ``name`` is one of ``store_call_seconds`` (``label``: the
    operation), ``group_commit_batch`` (the writes one COMMIT carried),
    ``busy_retry`` (``label``: ``write`` or ``read``)."""
    for listener in _listeners:
        listener(name, value, label)
