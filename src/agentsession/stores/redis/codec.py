"""How the Redis store names a session's keys and writes a model as JSON, for every part
of its transaction."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from ...jsonvalues import dumps, loads

__all__ = ["copy", "dec", "enc", "prefix"]

M = TypeVar("M", bound=BaseModel)


def prefix(sid: str) -> str:
    """The prefix of every key of session ``sid``: ``as:{sid}:`` (a Redis hash tag)."""
    return f"as:{{{sid}}}:"


def enc(model: BaseModel) -> str:
    """``model`` as the JSON text the store keeps."""
    return dumps(model.model_dump(mode="json"))


def dec(cls: type[M], text: str) -> M:
    """The ``cls`` the JSON ``text`` holds."""
    return cls.model_validate(loads(text))


def copy(model: M) -> M:
    """A deep copy of ``model``: what a read returns of this transaction's writes."""
    return model.model_copy(deep=True)
