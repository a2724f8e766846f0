"""The OpenAPI document as the server reads requests: :func:`install_openapi`.

FastAPI writes an optional parameter (``str | None = None``) as
``anyOf: [{type: string}, {type: null}]``. A header or query parameter is text or
absent, never JSON ``null``: a client following that schema sends the text ``null``,
which the server reads as the string ``"null"``. The document states the parameter's
own schema instead; leaving the parameter out is how to send "none".
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

__all__ = ["install_openapi", "without_null_parameters"]


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``/openapi.json``) answer the tidied document,
    built once on first use."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = without_null_parameters(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def without_null_parameters(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (changed in place and returned) with the ``null`` alternative
    dropped from every parameter's ``anyOf``; the other alternative's keywords move
    up next to the parameter's own (``description``, ``pattern``...)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                parameter["schema"] = _without_null(parameter.get("schema", {}))
    return document


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    alternatives = [a for a in schema.get("anyOf", []) if a != {"type": "null"}]
    if "anyOf" not in schema or len(alternatives) != 1:
        return schema
    own = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**alternatives[0], **own}
