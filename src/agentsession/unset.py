"""The sentinel of an optional argument the caller did not pass, distinct from an explicit
None: shared by the manager and the client, so neither imports the other."""

from __future__ import annotations

from typing import Any

__all__ = ["UNSET"]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: Marks an optional argument the caller did not pass (distinct from an explicit None).
UNSET: Any = _Unset()
