"""Session records: put a batch, read one, list (deleting by namespace and key prefix
is a route built from the table of operations, :mod:`.table`).

``data`` travels as RFC 4648 base64 (standard alphabet, padded) both ways; invalid
base64 is a 422 (:func:`..schemas.decode_base64`) and nothing is written.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response

from ...errors import RecordNotFound
from ...fieldlimits import RECORD_KEY_CHARS, RECORD_NAMESPACE_CHARS
from ...models import PutRecordsResult, Record, RecordWrite
from ..deps import ReadCtx, WriteCtx, reply, version_etag, write
from ..problems import ERRORS, WRITE_ERRORS
from ..routing import StrictRoute
from ..schemas import (
    QUERY,
    RECORD_KEY,
    RECORD_NAMESPACE,
    Items,
    LimitQuery,
    PutRecords,
    RecordOut,
    decode_base64,
)

router = APIRouter(
    prefix="/v1/sessions/{session_id}/records",
    tags=["records"],
    responses=ERRORS,
    route_class=StrictRoute,
)

NamespaceQuery = Annotated[str | None, QUERY["namespace"]]
#: ``prefix``, ``after``, ``before``: text like a key, possibly empty.
KeyBound = Annotated[str | None, QUERY["prefix"]]


def record_json(record: Record) -> dict[str, Any]:
    """A record as its JSON answer (:class:`RecordOut`): the bytes in base64."""
    return {
        **record.model_dump(mode="json", exclude={"data"}),
        "data": base64.b64encode(record.data).decode("ascii"),
    }


@router.put("", response_model=PutRecordsResult, responses=WRITE_ERRORS)
async def put_records(ctx: WriteCtx, body: PutRecords) -> Response:
    """Insert or replace records in one version step: ``{"written",
    "session_version"}``, the ETag the session's version after it (the current one when
    nothing was written). ``if_absent`` keeps an existing record untouched."""
    writes = [
        RecordWrite(
            namespace=r.namespace,
            key=r.key,
            data=decode_base64(r.data),
            meta=r.meta or {},
            if_absent=r.if_absent,
        )
        for r in body.records
    ]
    result, replayed = await write(
        ctx.manager.put_records(
            **ctx.who,
            records=writes,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, result.session_version)
    return reply(result, etag=etag, replayed=replayed)


@router.get("", response_model=Items[RecordOut])
async def list_records(
    ctx: ReadCtx,
    namespace: NamespaceQuery = None,
    prefix: KeyBound = None,
    after: KeyBound = None,
    before: KeyBound = None,
    limit: LimitQuery = None,
    order: Literal["asc", "desc"] = "asc",
) -> Response:
    """``{"items": [record...]}`` ordered by (namespace, key) in code-point order
    (``order=desc`` reverses it); ``prefix``, ``after`` and ``before`` (exclusive)
    bound the key; no ``namespace`` = every namespace."""
    records = await ctx.manager.list_records(
        **ctx.who,
        namespace=namespace,
        prefix=prefix,
        after=after,
        before=before,
        limit=limit,
        descending=order == "desc",
    )
    return reply({"items": [record_json(r) for r in records]})


@router.get("/one", response_model=RecordOut)
async def get_record(
    ctx: ReadCtx,
    key: Annotated[str, Query(min_length=1, max_length=RECORD_KEY_CHARS, pattern=RECORD_KEY)],
    namespace: Annotated[
        str, Query(max_length=RECORD_NAMESPACE_CHARS, pattern=RECORD_NAMESPACE)
    ] = "",
) -> Response:
    """One record; 404 (the standard not-found problem) if there is none."""
    record = await ctx.manager.get_record(**ctx.who, namespace=namespace, key=key)
    if record is None:
        raise RecordNotFound(namespace=namespace, key=key)
    return reply(record_json(record))
