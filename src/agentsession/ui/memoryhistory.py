"""The working-memory versions of a session, newest first, found through the memory
as of a seq (``get_working_memory(at_seq=N)``) alone.

The memory as of seq N is the newest version written while the history ended at or
before N (docs/semantics.md, "Working-memory history"), so its version never goes down
as N grows: the seqs where it changes are found by bisection, each in about
``log2(message_count)`` reads. A page lists at most :data:`VERSIONS_PAGE` versions
(about 150 small reads for a 20,000-message history), and the oldest seq it reached
is the cursor for older ones. Each version is named by the first seq it was in effect
at, the seq the Memory view shows it as of.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..models import WorkingMemory

__all__ = ["VERSIONS_PAGE", "MemoryVersion", "memory_versions"]

#: The most versions one page of the history lists.
VERSIONS_PAGE: Final = 10


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """A working-memory version and the first seq it was in effect at."""

    seq: int
    memory: WorkingMemory


def memory_versions(
    as_of: Callable[[int], WorkingMemory], newest_seq: int, limit: int = VERSIONS_PAGE
) -> tuple[list[MemoryVersion], int | None]:
    """The versions in effect at seqs ``0..newest_seq``, newest first, at most
    ``limit``; and the seq to pass as ``newest_seq`` for older ones (None: none left).

    Args:
        as_of: the memory as of a seq (``get_working_memory(at_seq=...)``).
        newest_seq: the newest seq to look at (the session's ``message_count``).
    """
    cache: dict[int, WorkingMemory] = {}

    def at(seq: int) -> WorkingMemory:
        if seq not in cache:
            cache[seq] = as_of(seq)
        return cache[seq]

    found: list[MemoryVersion] = []
    high = newest_seq
    while high >= 0 and len(found) < limit:
        version = at(high).version
        low, first = 0, high  # the version differs below ``low`` is unknown yet
        while low < first:
            mid = (low + first) // 2
            if at(mid).version == version:
                first = mid
            else:
                low = mid + 1
        found.append(MemoryVersion(first, at(high)))
        high = first - 1
    return found, (high if high >= 0 else None)
