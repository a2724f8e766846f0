"""Runs: start, heartbeat, read, list, add a step, page through the steps, finish."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...models import Page, Run, RunStatus, RunStep
from ...service.policy import Limits
from ..deps import ReadCtx, RunId, WriteCtx, reply, version_etag, write
from ..problems import ERRORS, WRITE_ERRORS
from ..routing import StrictRoute
from ..schemas import (
    PAGE_MAX,
    BoundedCursorQuery,
    FinishRun,
    HeartbeatRun,
    LimitQuery,
    StartRun,
    StepIn,
    seq_query,
)

router = APIRouter(
    prefix="/v1/sessions/{session_id}/runs",
    tags=["runs"],
    responses=ERRORS,
    route_class=StrictRoute,
)

#: Steps per page when no ``limit`` is given (the manager's default page size).
_STEPS = Limits().default_page_size


@router.post("", status_code=201, response_model=Run, responses=WRITE_ERRORS)
async def start_run(ctx: WriteCtx, body: StartRun) -> Response:
    """Start a run (RUNNING); at most one RUNNING run per session (else 409). The ETag
    is the session's new version, as on every write below."""
    run, replayed = await write(
        ctx.manager.start_run(
            **ctx.who,
            input=body.input,
            metadata=body.metadata,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
            lease_seconds=body.lease_seconds,
        )
    )
    etag = version_etag(ctx.session_id, run.session_version)
    return reply(run, status=201, etag=etag, replayed=replayed)


@router.post("/{run_id}/heartbeat", response_model=Run, responses=WRITE_ERRORS)
async def heartbeat_run(ctx: WriteCtx, run_id: RunId, body: HeartbeatRun) -> Response:
    """Extend a RUNNING run's lease to now + ``lease_seconds`` (default: the run's own).
    No version step (the ETag is the session's current version) and no ``If-Match``: a
    heartbeat never makes another writer's precondition stale. A run whose lease
    already lapsed is INTERRUPTED and this answers 409 ``run-lease-expired``."""
    run, replayed = await write(
        ctx.manager.heartbeat_run(
            **ctx.who,
            run_id=run_id,
            lease_seconds=body.lease_seconds,
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(run, etag=version_etag(ctx.session_id, run.session_version), replayed=replayed)


@router.get("", response_model=Page[Run])
async def list_runs(
    ctx: ReadCtx,
    status: RunStatus | None = None,
    after: Annotated[int | None, seq_query()] = None,
    limit: LimitQuery = None,
    cursor: BoundedCursorQuery = None,
) -> Response:
    """A page of runs, oldest first, without their steps (``step_count`` says how many);
    a restore's cursor pages back to older ones."""
    page = await ctx.manager.list_runs(
        **ctx.who, status=status, after=after, limit=limit, cursor=cursor
    )
    return reply(page)


@router.get("/{run_id}", response_model=Run)
async def get_run(ctx: ReadCtx, run_id: RunId) -> Response:
    """One run with its first steps (``len(steps) < step_count``: page on with
    ``GET .../steps?after=<last index>``)."""
    return reply(await ctx.manager.get_run(**ctx.who, run_id=run_id))


@router.get("/{run_id}/steps", response_model=Page[RunStep])
async def list_run_steps(
    ctx: ReadCtx,
    run_id: RunId,
    after: Annotated[int | None, seq_query("A step index (exclusive).")] = None,
    limit: Annotated[
        int | None,
        Query(ge=1, le=PAGE_MAX, description=f"Page size, 1..{PAGE_MAX} (default {_STEPS})."),
    ] = None,
    cursor: BoundedCursorQuery = None,
) -> Response:
    """A page of the run's steps, oldest first; ``next_cursor`` continues, null on the
    last page. Unlike the other listings, ``limit`` is at least 1 (the manager refuses
    an empty page of steps), so the schema states it."""
    page = await ctx.manager.list_run_steps(
        **ctx.who, run_id=run_id, after=after, limit=limit, cursor=cursor
    )
    return reply(page)


@router.post("/{run_id}/steps", status_code=201, response_model=RunStep, responses=WRITE_ERRORS)
async def add_run_step(ctx: WriteCtx, run_id: RunId, body: StepIn) -> Response:
    """Append a step to a RUNNING run."""
    step, replayed = await write(
        ctx.manager.add_run_step(
            **ctx.who,
            run_id=run_id,
            kind=body.kind,
            name=body.name,
            input=body.input,
            output=body.output,
            status=body.status,
            error=body.error,
            started_at=body.started_at,
            ended_at=body.ended_at,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, step.session_version)
    return reply(step, status=201, etag=etag, replayed=replayed)


@router.post("/{run_id}/finish", response_model=Run, responses=WRITE_ERRORS)
async def finish_run(ctx: WriteCtx, run_id: RunId, body: FinishRun) -> Response:
    """End a RUNNING run as SUCCEEDED, FAILED or CANCELLED."""
    run, replayed = await write(
        ctx.manager.finish_run(
            **ctx.who,
            run_id=run_id,
            status=RunStatus(body.status),
            error=body.error,
            output=body.output,
            usage=body.usage,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(run, etag=version_etag(ctx.session_id, run.session_version), replayed=replayed)
