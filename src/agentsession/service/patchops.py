"""JSON Patch, RFC 6902, with paths as JSON Pointers (RFC 6901).

Unlike a merge patch (RFC 7396), an op list can store ``null`` (``add`` with
``"value": null``) and replace a whole object (``add``/``replace`` of the key), which
framework state such as Google ADK's needs. :func:`check_ops` rejects a malformed list
before anything is read; :func:`apply_ops` applies a checked list to a document with
the ``jsonpatch`` package, all ops or none.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch
import jsonpointer

from ..errors import PatchConflict, PayloadTooLarge, UnsupportedValue, ValidationError
from ..jsonvalues import MAX_DEPTH, check_json, dumps

__all__ = ["OPS", "apply_ops", "check_ops"]

#: The six operations of RFC 6902 and the members each needs besides ``op`` and ``path``.
OPS: dict[str, tuple[str, ...]] = {
    "add": ("value",),
    "remove": (),
    "replace": ("value",),
    "move": ("from",),
    "copy": ("from",),
    "test": ("value",),
}

#: A JSON Pointer: empty (the whole document) or ``/``-separated reference tokens in
#: which ``~`` is only ever ``~0`` or ``~1`` (RFC 6901, section 3).
_POINTER = re.compile(r"(/([^~/]|~[01])*)*")


def check_ops(ops: Any, *, field: str, limit_bytes: int, max_ops: int) -> list[dict[str, Any]]:
    """Check an RFC 6902 op list and return it normalised: each op holds only
    ``op``, ``path`` and the member its operation takes (``value`` or ``from``);
    other members are ignored, as RFC 6902 section 4 says.

    Args:
        ops: a sequence of op objects (an empty list is a valid patch that changes
            nothing but still counts as a write).
        field: the argument's name in errors, e.g. ``"ops"``; an op is ``ops[2]``.
        limit_bytes: the most the list's UTF-8 JSON may take.
        max_ops: the most ops the list may hold (``Limits.max_patch_ops``).

    Raises:
        ValidationError: not a list of objects, an unknown op, a missing member, a
            malformed JSON Pointer, or a ``move`` into its own child; ``field`` names
            the op's index.
        UnsupportedValue, PayloadTooLarge: a value that is not JSON, or too large.
        ValidationError: more than ``max_ops`` ops.
    """
    if isinstance(ops, str | bytes | Mapping) or not isinstance(ops, Sequence):
        raise ValidationError(f"{field} must be a list of JSON Patch op objects", field=field)
    if len(ops) > max_ops:
        raise ValidationError(
            f"{field} holds {len(ops)} ops; at most {max_ops} per call", field=field
        )
    checked = [_check_op(op, f"{field}[{i}]") for i, op in enumerate(ops)]
    check_json(checked, field=field, limit_bytes=limit_bytes)
    return checked


def _check_op(op: Any, where: str) -> dict[str, Any]:
    """One op of :func:`check_ops`, normalised."""
    if not isinstance(op, Mapping):
        raise ValidationError(f"{where} must be a JSON Patch op object", field=where)
    name = op.get("op")
    if not isinstance(name, str) or name not in OPS:
        raise ValidationError(f"{where}.op must be one of {', '.join(OPS)}", field=f"{where}.op")
    checked: dict[str, Any] = {"op": name, "path": _pointer(op, "path", where)}
    for member in OPS[name]:
        if member not in op:
            raise ValidationError(
                f"{where} ({name}) needs a {member!r} member", field=f"{where}.{member}"
            )
        checked[member] = _pointer(op, member, where) if member == "from" else op[member]
    if name == "move" and checked["path"].startswith(checked["from"] + "/"):
        raise ValidationError(
            f"{where} moves {checked['from']!r} into its own child", field=f"{where}.path"
        )
    return checked


def _pointer(op: Mapping[str, Any], member: str, where: str) -> str:
    """The JSON Pointer in ``op[member]``."""
    value = op.get(member)
    if not isinstance(value, str) or _POINTER.fullmatch(value) is None:
        raise ValidationError(
            f"{where}.{member} must be a JSON Pointer ('' or '/key/0', ~0 for ~, ~1 for /)",
            field=f"{where}.{member}",
        )
    return value


def apply_ops(
    document: Any, ops: Sequence[Mapping[str, Any]], *, field: str, limit_bytes: int
) -> Any:
    """Return ``document`` with the ops applied in order; ``document`` is not modified.

    Size and depth are bounded after every op, not only at the end, so a short op
    list (``copy`` of ``""`` doubles the document) can never build a huge or deeply
    nested value first.

    Args:
        document: any JSON value (a stored one: within ``MAX_DEPTH``).
        ops: an op list as :func:`check_ops` returns it.
        field: the op list's name in errors.
        limit_bytes: the most the document's UTF-8 JSON may take after any op.

    Returns:
        The patched document (a new value sharing nothing with ``document``).

    Raises:
        PatchConflict: an op does not apply to the document as the ops before it left
            it: a missing path for ``remove``/``replace``/``move``/``copy``/``test``, an
            ``add`` under a missing parent or past the end of an array, a failed
            ``test``. Names the op's index.
        PayloadTooLarge: an op makes the document larger than ``limit_bytes``.
        UnsupportedValue: an op nests the document deeper than ``MAX_DEPTH``.
    """
    result = copy.deepcopy(document)
    # An upper bound on the document's size: each op adds at most its written value
    # plus a key; measured exactly only when the bound passes the limit.
    size = len(dumps(result).encode("utf-8"))
    for i, op in enumerate(ops):
        where = f"{field}[{i}]"
        try:
            written = _written(result, op)
            if written is not None:
                depth = op["path"].count("/")
                text = check_json(written[0], field=where, depth=depth)
                if op["op"] != "move":
                    size += len(text.encode("utf-8")) + len(op["path"]) + 4
            # In place on our own copy: one deep copy per call, not one per op.
            result = jsonpatch.JsonPatch([op]).apply(result, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise PatchConflict(
                f"{where} ({op['op']} {op['path']!r}) does not apply: {_reason(e)}",
                field=where,
                op=op["op"],
                path=op["path"],
            ) from None
        except RecursionError:
            raise UnsupportedValue(
                f"{where} nests the document deeper than {MAX_DEPTH} levels", field=where
            ) from None
        if size > limit_bytes:
            size = _checked_size(result, where, limit_bytes)
    return result


def _written(document: Any, op: Mapping[str, Any]) -> tuple[Any] | None:
    """The value ``op`` writes at its path, read before it applies (in a 1-tuple, as it
    may be ``None``); None for ops that write nothing (``remove``, ``test``)."""
    if op["op"] in ("add", "replace"):
        return (op["value"],)
    if op["op"] in ("copy", "move"):
        value = jsonpointer.resolve_pointer(document, op["from"])
        if isinstance(value, jsonpointer.EndOfList):  # "-" names no element to read
            raise jsonpointer.JsonPointerException(f"{op['from']!r} is past the end")
        return (value,)
    return None


def _checked_size(document: Any, where: str, limit_bytes: int) -> int:
    """The exact size of ``document``'s UTF-8 JSON, at most ``limit_bytes``.

    Raises:
        PayloadTooLarge: it is larger; ``where`` names the op that made it so.
    """
    size = len(dumps(document).encode("utf-8"))
    if size > limit_bytes:
        raise PayloadTooLarge(
            f"{where} makes the document {size} bytes of JSON; the limit is {limit_bytes}",
            field=where,
            limit_bytes=limit_bytes,
            size_bytes=size,
        )
    return size


def _reason(error: Exception) -> str:
    """Why an op did not apply, without quoting the document."""
    if isinstance(error, jsonpatch.JsonPatchTestFailed):
        return "the value at the path differs (or is missing)"
    if isinstance(error, jsonpatch.JsonPatchPathNotFound | jsonpointer.JsonPointerException):
        return "the location does not exist"
    return str(error)[:200]
