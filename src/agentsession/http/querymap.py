"""Query parameters that carry a mapping: ``?metadata.team=a&metadata.env=prod``.

A manager argument that takes a mapping (a metadata filter) has no one query parameter:
each entry is its own, named ``<prefix>.<key>``. :class:`QueryMap` is the FastAPI
dependency that reads them; :class:`~.routing.StrictRoute` accepts any parameter under a
declared prefix (:attr:`QueryMap.query_prefix`), each at most once. The entries are
checked here, so a bad one is a 422 ``request-validation`` naming it, as a bad plain
query parameter is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from fastapi.exceptions import RequestValidationError
from starlette.requests import Request

from ..errors import ValidationError
from ..metafilter import MetadataFilter, check_filter

__all__ = ["QUERY_MAPS", "QueryMap"]


class QueryMap:
    """The dependency reading the query parameters ``<prefix>.<key>`` as a mapping.

    Args:
        prefix: the manager argument's name; its entries are ``<prefix>.<key>=<value>``.
        check: checks the mapping (values are strings) and returns it as the manager
            takes it; raises :class:`~agentsession.errors.ValidationError` naming the
            entry (``field`` ``<prefix>.<key>``) or the whole (``field`` ``<prefix>``).
        description: what the entries mean, for the route's documentation.
    """

    def __init__(
        self,
        prefix: str,
        check: Callable[[dict[str, str]], MetadataFilter | None],
        description: str,
    ) -> None:
        self.query_prefix = f"{prefix}."
        self._check = check
        self.description = description

    def __call__(self, request: Request) -> MetadataFilter | None:
        """The entries of the request's query string (None: none given).

        Raises:
            RequestValidationError: 422, an entry (or their number) the check refuses.
        """
        prefix = self.query_prefix
        entries = {
            name[len(prefix) :]: value
            for name, value in request.query_params.multi_items()
            if name.startswith(prefix)
        }
        try:
            return self._check(entries)
        except ValidationError as exc:
            where = exc.field or prefix.rstrip(".")
            error = {"loc": ("query", where[:80]), "msg": str(exc), "type": "value_error"}
            raise RequestValidationError([error]) from None


#: The manager arguments that travel as a mapping of query parameters, by name.
QUERY_MAPS: Final[dict[str, QueryMap]] = {
    "metadata": QueryMap(
        "metadata",
        check_filter,
        "`metadata.<key>=<value>` (repeatable with different keys, at most 8): only "
        "sessions whose metadata has each key with this value, exactly; a stored number "
        "or boolean matches its text (`3`, `true`).",
    )
}
