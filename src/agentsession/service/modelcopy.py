"""A cheaper ``model_copy(update=...)`` for the write path's own models.

Every write copies its session row (the new count, then the new version) and its
answer (the session's new version): pydantic's ``model_copy`` runs ``__copy__`` (a
shallow copy of every private attribute through the ``copy`` module) and costs about
as much as validating the model afresh. :func:`updated` makes the same object directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["updated"]

M = TypeVar("M", bound=BaseModel)


def updated(model: M, update: Mapping[str, Any]) -> M:
    """``model.model_copy(update=update)`` for an ``update`` of declared fields: the
    same values, fields set, extra fields (a copy of the dict) and private attributes,
    without validation (as ``model_copy``).

    Raises:
        KeyError: a key of ``update`` is not a declared field of the model (use
            ``model_copy``, which puts those among the extra fields).
    """
    cls = type(model)
    fields = cls.model_fields
    for key in update:
        if key not in fields:
            raise KeyError(f"{cls.__name__} has no field {key!r}")
    copy = cls.__new__(cls)
    setattr_ = object.__setattr__
    setattr_(copy, "__dict__", {**model.__dict__, **update})
    setattr_(copy, "__pydantic_fields_set__", model.__pydantic_fields_set__ | update.keys())
    extra = model.__pydantic_extra__
    setattr_(copy, "__pydantic_extra__", None if extra is None else dict(extra))
    private = model.__pydantic_private__
    if private is not None:  # as __copy__: the unset ones are left out
        private = {k: v for k, v in private.items() if v is not PydanticUndefined}
    setattr_(copy, "__pydantic_private__", private)
    return copy
