"""The difference between two versions of a working memory, line by line.

Both documents are written as indented JSON with sorted keys (so a moved key is no
change) and compared with :mod:`difflib`; the inspector colours each line by its kind.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DiffLine", "diff"]


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a diff: ``add`` (only in the newer), ``del`` (only in the older),
    ``same`` (context) or ``hunk`` (where the next lines are)."""

    kind: Literal["add", "del", "same", "hunk"]
    text: str


def _lines(document: dict[str, Any]) -> list[str]:
    text = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return text.splitlines()


def diff(older: dict[str, Any], newer: dict[str, Any], *, context: int = 3) -> list[DiffLine]:
    """The lines that differ between two memory documents, with ``context`` lines
    around each change; empty when they are equal."""
    lines: list[DiffLine] = []
    for line in difflib.unified_diff(_lines(older), _lines(newer), n=context, lineterm=""):
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("same", line[1:]))
    return lines
