"""JSON Merge Patch, RFC 7396.

A patch object is merged key by key into the target: ``null`` deletes a key, an object
merges recursively, anything else (arrays included) replaces. A patch that is not an
object replaces the whole target (RFC 7396, section 2).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied; neither argument is modified.

    Args:
        target: any JSON value (the current document).
        patch: any JSON value (the RFC 7396 merge patch).

    Returns:
        A new JSON value sharing no mutable structure with either argument.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result
