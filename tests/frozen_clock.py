"""A clock for tests that only moves when told to (own module: test files import it,
and ``conftest`` is not importable by name when several conftest files exist)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FrozenClock:
    """A clock for tests: returns the same aware UTC instant until advanced."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``."""
        self.now += timedelta(seconds=seconds)
