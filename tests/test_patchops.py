"""JSON Patch (RFC 6902) as :mod:`agentsession.service.patchops` applies it, against a
reference model written here from the RFC's text, on random documents and op lists."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentsession.errors import PatchConflict, ValidationError
from agentsession.service.patchops import apply_ops, check_ops


class _Conflict(Exception):
    """The reference model's "this op does not apply"."""


def _tokens(pointer: str) -> list[str]:
    """RFC 6901 section 4: split on ``/``, then ``~1`` -> ``/`` before ``~0`` -> ``~``."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _index(token: str, size: int) -> int:
    """An existing array index (no leading zeros, RFC 6901 section 4)."""
    if not token.isdigit() or (token != "0" and token.startswith("0")) or int(token) >= size:
        raise _Conflict(token)
    return int(token)


def _get(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(token, len(doc))]
        else:
            raise _Conflict(token)
    return doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    """RFC 6902 section 4.1; returns the document (the root may be replaced)."""
    if not tokens:
        return value
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        at = len(parent) if last == "-" else _index(last, len(parent) + 1)
        parent.insert(at, value)
    else:
        raise _Conflict(last)
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    """RFC 6902 section 4.2 (the whole document cannot be removed)."""
    if not tokens:
        raise _Conflict("")
    parent, last = _get(doc, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(last, len(parent))]
    else:
        raise _Conflict(last)
    return doc


def _canon(value: Any) -> str:
    """JSON equality that tells true from 1 (RFC 6902 section 4.6)."""
    return json.dumps(value, sort_keys=True)


def _reference(doc: Any, ops: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for op in ops:
        path = _tokens(op["path"])
        name = op["op"]
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif name == "remove":
            doc = _remove(doc, path)
        elif name == "replace":
            _get(doc, path)
            doc = (
                _add(_remove(doc, path), path, copy.deepcopy(op["value"]))
                if path
                else (copy.deepcopy(op["value"]))
            )
        elif name == "move":
            source = _tokens(op["from"])
            value = _get(doc, source)
            doc = _add(_remove(doc, source), path, value)
        elif name == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, _tokens(op["from"]))))
        elif _canon(_get(doc, path)) != _canon(op["value"]):
            raise _Conflict(op["path"])
    return doc


_KEYS = st.sampled_from(["a", "b", "0", "x/y", "t~"])
_SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["s", ""])
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


_TOKENS = st.sampled_from(["a", "b", "0", "x/y", "t~", "1", "-", "01"])
_POINTERS = st.lists(_TOKENS, min_size=1, max_size=2).map(
    lambda tokens: "".join("/" + _escape(t) for t in tokens)
)


@st.composite
def _ops(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]))
    op: dict[str, Any] = {"op": name, "path": draw(_POINTERS)}
    if name in ("add", "replace", "test"):
        op["value"] = draw(_VALUES)
    if name in ("move", "copy"):
        op["from"] = draw(_POINTERS)
    return op


@settings(max_examples=400, deadline=None)
@given(
    doc=st.dictionaries(_KEYS, _VALUES, min_size=2, max_size=5),
    ops=st.lists(_ops(), min_size=1, max_size=4),
)
def test_ops_match_the_reference_model(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Same result, or both refuse: a move into its own child is malformed (checked
    before reading), any other op that does not fit the document a conflict."""
    original = copy.deepcopy(doc)
    if any(o["op"] == "move" and o["path"].startswith(o["from"] + "/") for o in ops):
        try:
            check_ops(ops, field="ops", limit_bytes=10**6, max_ops=100)
        except ValidationError:
            return
        raise AssertionError("a move into its own child was accepted")
    checked = check_ops(ops, field="ops", limit_bytes=10**6, max_ops=100)
    try:
        want = _reference(doc, ops)
    except _Conflict:
        try:
            apply_ops(doc, checked, field="ops", limit_bytes=10**6)
        except PatchConflict:
            assert doc == original
            return
        raise AssertionError(f"applied ops the reference refuses: {ops}") from None
    assert _canon(apply_ops(doc, checked, field="ops", limit_bytes=10**6)) == _canon(want)
    assert doc == original  # the input is never modified
