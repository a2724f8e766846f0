"""The query parameters of an inspector page, checked alike on every page.

Each page names the parameters it reads (:class:`Query`); a parameter it does not
read, one given twice, or a value out of its shape or range is a
:class:`~agentsession.errors.ValidationError` naming the parameter, which
:func:`~agentsession.ui.guard.guarded` answers as a 400 page: a bad link never shows a
page that silently ignored part of it. An empty value is the same as an absent one
(a form's blank field).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from fastapi import Request

from ..errors import ValidationError

__all__ = ["MAX_INT", "Query"]

#: The largest whole number a parameter may hold (a signed 64-bit integer: the
#: widest column a seq or version is stored in).
MAX_INT: Final = 2**63 - 1
#: The most characters of a refused value quoted back on the 400 page.
_QUOTED: Final = 40


def _quote(raw: str) -> str:
    return repr(raw if len(raw) <= _QUOTED else raw[:_QUOTED] + "…")


class Query:
    """The query parameters of one request to a page that reads only ``names``.

    Raises:
        ValidationError: (at construction) a parameter not in ``names``, or one given
            more than once; ``field`` is its name.
    """

    def __init__(self, request: Request, names: Collection[str]) -> None:
        params = request.query_params
        for name in params:
            if name not in names:
                raise ValidationError(
                    f"unknown query parameter {_quote(name)}: this page reads "
                    + (", ".join(sorted(names)) or "none"),
                    field=name,
                )
            if len(params.getlist(name)) > 1:
                raise ValidationError(f"query parameter {name!r} given twice", field=name)
        self._values = {name: params[name].strip() for name in params}

    def text(self, name: str) -> str | None:
        """The value of ``name`` (stripped); None when absent or empty."""
        return self._values.get(name) or None

    def number(self, name: str, *, low: int = 0, high: int = MAX_INT) -> int | None:
        """The whole number ``name`` holds, from ``low`` to ``high``; None when absent
        or empty.

        Raises:
            ValidationError: not ASCII digits, or out of the range (``field``: ``name``).
        """
        raw = self._values.get(name, "")
        if not raw:
            return None
        value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 20 else None
        if value is None or not low <= value <= high:
            raise ValidationError(
                f"query parameter {name!r}: {_quote(raw)} is not a whole number "
                f"from {low} to {high}",
                field=name,
            )
        return value
