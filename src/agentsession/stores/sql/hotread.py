"""The lean read path of the SQL store: models built once from decoded rows, and a
read transaction on SQLite with nothing around its ``BEGIN`` / ``COMMIT``.

Two costs dominated a read beside SQLite's own work: validating rows into models (a
session, its tool calls, runs and working memory: pydantic checks every value again)
and the layers of a read transaction (four nested generator context managers). Here:

* :func:`built` makes the model of a row whose values were validated when written and
  come back decoded (:class:`~.columns.UTCDateTime`, :class:`~.columns.JSONText`) as
  exactly what validation would keep, without a second validation: each value of the
  exact type its field holds is taken as it is, an enum's value becomes its member,
  and any other value (a row written by something else) makes the row go through
  ``model_validate``, with its errors. The result equals ``model_validate``'s in
  fields, fields set and values. Messages have their own such builder
  (:meth:`~agentsession.models.Message.from_store_rows`).
* :class:`LeanRead` is the read transaction of
  :meth:`~agentsession.stores.sql.store.SQLStore.transaction` on SQLite: one object,
  entered and left once, over :class:`~.idlereaders.IdleReaders`; what it does is
  what :meth:`~.idlereaders.IdleReaders.transaction` does, in the same order.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.engine import Connection

from .dialect import translate_error
from .execute import end_transaction, observed
from .idlereaders import IdleReaders

__all__ = ["LeanRead", "built"]

M = TypeVar("M", bound=BaseModel)

#: How a field's stored value is checked: ``(name, exact types kept as they are, enum
#: members by value or None, the exact type of a list's items or a dict's values or
#: None, default factory or None)``.
_Check = tuple[str, tuple[type, ...], dict[Any, Enum] | None, type | None, Any]

#: Per model class: its fields' checks, or None when it cannot be built this way (it
#: has validators, private attributes, or a field of a type not handled here).
_SHAPES: dict[type, tuple[_Check, ...] | None] = {}


#: Containers whose items (a list's) or values (a dict's) a check may name.
_CONTAINERS = (list, dict)


def built(cls: type[M], record: Mapping[str, Any]) -> M:
    """The model ``cls.model_validate(record)`` gives, for a row decoded from storage
    (see the module docstring): keys that are no field are ignored, as validation
    ignores them; a field missing takes its default and is not set.

    Raises:
        ValueError: a value that does not validate (pydantic's error).
    """
    if cls in _SHAPES:
        shape = _SHAPES[cls]
    else:
        shape = _SHAPES[cls] = _shape(cls)
    if shape is None:
        return cls.model_validate(record)
    values: dict[str, Any] = {}
    fields_set = set()
    for name, kinds, members, items, factory in shape:
        if name not in record:
            if factory is None:
                return cls.model_validate(record)
            values[name] = factory()
            continue
        value = record[name]
        if members is not None and type(value) is str:
            value = members.get(value, value)
        kind = type(value)
        if (kinds is not _ANY and kind not in kinds) or (
            items is not None and kind in _CONTAINERS and not _all_of(items, value)
        ):
            return cls.model_validate(record)
        values[name] = value
        fields_set.add(name)
    model = object.__new__(cls)
    setattr_ = object.__setattr__
    setattr_(model, "__dict__", values)
    setattr_(model, "__pydantic_fields_set__", fields_set)
    setattr_(model, "__pydantic_extra__", None)
    setattr_(model, "__pydantic_private__", None)
    return model


def _all_of(kind: type, value: list[Any] | dict[str, Any]) -> bool:
    """Whether every item of a list (value of a dict) is of exactly type ``kind``."""
    found = value.values() if type(value) is dict else value
    return all(type(v) is kind for v in found)


def _shape(cls: type[BaseModel]) -> tuple[_Check, ...] | None:
    """The checks of ``cls``'s fields, or None if it must always be validated."""
    decorators = cls.__pydantic_decorators__
    if (
        cls.__private_attributes__
        or cls.model_config.get("extra") not in (None, "ignore")
        or decorators.model_validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.validators
    ):
        return None
    checks: list[_Check] = []
    for name, info in cls.model_fields.items():
        if info.alias is not None and info.alias != name:
            return None
        check = _kinds(info.annotation)
        if check is None:
            return None
        kinds, members, items = check
        factory: Any = None
        if info.default_factory is not None:
            factory = info.default_factory
        elif not info.is_required():
            default = info.default
            factory = lambda default=default: default  # noqa: E731 - one per field
        checks.append((name, kinds, members, items, factory))
    return tuple(checks)


#: The kinds of a field typed ``Any``: validation keeps every value as it is.
_ANY: tuple[type, ...] = (object,)

#: Annotations whose values validation keeps as they are, when of exactly that type.
_PLAIN = {str: str, int: int, float: float, bool: bool, datetime: datetime}


def _kinds(annotation: Any) -> tuple[tuple[type, ...], dict[Any, Enum] | None, type | None] | None:
    """``(exact types kept, enum members by value, list items' exact type)`` of a
    field's annotation, or None when validation may change a value of it."""
    if annotation is Any:
        return _ANY, None, None
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds: list[type] = []
        members: dict[Any, Enum] | None = None
        items: type | None = None
        for arg in args:
            if arg is type(None):
                kinds.append(type(None))
                continue
            inner = _kinds(arg)
            if inner is None or (inner[1] is not None and members is not None):
                return None
            kinds += inner[0]
            members = members or inner[1]
            items = items or inner[2]
        return tuple(kinds), members, items
    if annotation in _PLAIN:
        return (_PLAIN[annotation],), None, None
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return (annotation,), {m.value: m for m in annotation}, None
    origin = typing.get_origin(annotation)
    if origin is dict and args and args[0] is str and args[1] is Any:
        return (dict,), None, None  # JSON objects have text keys
    if origin is dict and args and args[0] is str and args[1] in (str, int):
        return (dict,), None, args[1]
    if origin is list and args and args[0] is Any:
        return (list,), None, None
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return (list,), None, _NOTHING  # only an empty list is kept as it is
    if origin is list and args and typing.get_origin(args[0]) is dict:
        key, value = typing.get_args(args[0])
        if key is str and value is Any:
            return (list,), None, dict
    return None


class _Nothing:
    """No value is of this type: a list of it must be empty."""


_NOTHING = _Nothing


class LeanRead:
    """A read transaction on SQLite (see the module docstring): enter it for the
    transaction object, leave it to COMMIT (ROLLBACK on an error).

    Args:
        readers: the store's idle read connections.
        make: the transaction object for a connection.
        errors: the driver's and SQLAlchemy's errors, raised as store errors
            (:func:`~.dialect.translate_error`).
    """

    __slots__ = ("_conn", "_errors", "_make", "_readers", "_tx", "_watched")

    def __init__(
        self,
        readers: IdleReaders,
        make: Callable[[Connection], Any],
        errors: tuple[type[BaseException], ...],
    ) -> None:
        self._readers = readers
        self._make = make
        self._errors = errors
        self._conn: Connection | None = None
        self._tx: Any = None
        self._watched: Any = None  # the observed path's context manager

    def __enter__(self) -> Any:
        readers, errors = self._readers, self._errors
        try:
            conn = readers.take()
        except errors as exc:
            raise translate_error(exc) from exc
        if observed(conn):
            # Statements must be seen: IdleReaders' own way (a fresh connection and a
            # Core transaction), entered here and left in __exit__.
            readers.give_back(conn)
            self._watched = readers.transaction()
            try:
                conn = self._watched.__enter__()
            except errors as exc:
                raise translate_error(exc) from exc
        else:
            driver = conn.connection.dbapi_connection
            assert driver is not None
            try:
                driver.execute("BEGIN")
            except BaseException as exc:
                readers.give_back(conn)
                if isinstance(exc, errors):
                    raise translate_error(exc) from exc
                raise
        self._conn = conn
        self._tx = self._make(conn)
        return self._tx

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        conn, tx, watched = self._conn, self._tx, self._watched
        self._conn = self._tx = self._watched = None
        assert conn is not None
        tx.close()
        errors = self._errors
        if watched is not None:
            try:
                watched.__exit__(kind, error, trace)
            except errors as exc:
                raise translate_error(exc) from exc
        else:
            try:
                if kind is None:
                    end_transaction(conn, commit=True)
                else:
                    with suppress(Exception):  # the block's error is the one to report
                        end_transaction(conn, commit=False)
            except errors as exc:
                raise translate_error(exc) from exc
            finally:
                self._readers.give_back(conn)
        if kind is not None and issubclass(kind, errors):
            raise translate_error(error) from error
