"""Runs and their steps on the SQL store: the ``runs`` and ``run_steps`` tables.

Kept apart from :mod:`.store` so each module stays one job; the store's transaction
class takes :class:`RunOps` as a base, as it takes one class per aggregate. A run is
read and written as its row only: ``step_count`` is kept by each step insert, a
compare-and-set on the count (the step must be next), and steps are read in pages over
their primary key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ...models import Run, RunStatus, RunStep
from ..base import StoreConflict
from .dialect import translated
from .execute import CompiledStatement, StatementCache
from .schema import run_steps, runs

__all__ = ["RunOps"]


def _run_row(run: Run) -> dict[str, Any]:
    """The run's columns except ``step_count``, which only a step insert changes."""
    row = run.model_dump(exclude={"steps", "step_count", "session_version"})
    row["status"] = run.status.value
    return row


def _runs_select(status: bool, after: bool, limit: bool) -> sa.Select[Any]:
    """A session's runs in seq order, with the bounds named (bound per call)."""
    stmt = sa.select(runs).where(runs.c.session_id == sa.bindparam("session_id"))
    if status:
        stmt = stmt.where(runs.c.status == sa.bindparam("status"))
    if after:
        stmt = stmt.where(runs.c.seq > sa.bindparam("after_seq"))
    stmt = stmt.order_by(runs.c.seq)
    return stmt.limit(sa.bindparam("limit")) if limit else stmt


def _run_select() -> sa.Select[Any]:
    return sa.select(runs).where(
        runs.c.session_id == sa.bindparam("session_id"), runs.c.run_id == sa.bindparam("run_id")
    )


class RunOps:
    """The run methods of the SQL transaction (see the store protocol). The host class
    provides the connection, its compiled statements and the way to run them, the
    write check and the errors to translate. The reads of restores and run checks run
    compiled statements (:mod:`.execute`)."""

    _conn: Connection
    _sql: StatementCache
    _execute: Callable[[CompiledStatement, dict[str, Any]], Any]
    _writing: Callable[[], None]
    _translatable: tuple[type[BaseException], ...]

    @translated
    def insert_run(self, run: Run) -> None:
        self._writing()
        self._conn.execute(sa.insert(runs), {**_run_row(run), "step_count": 0})

    @translated
    def update_run(self, run: Run) -> None:
        self._writing()
        row = _run_row(run)
        stmt = (
            sa.update(runs)
            .where(runs.c.session_id == row.pop("session_id"), runs.c.run_id == row.pop("run_id"))
            .values(row)
        )
        if self._conn.execute(stmt).rowcount != 1:
            raise StoreConflict(f"run {run.run_id!r} vanished during the transaction")

    @translated
    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        self._writing()
        # Compare-and-set on the count: the step must be next, and the run must exist.
        bump = (
            sa.update(runs)
            .where(
                runs.c.session_id == session_id,
                runs.c.run_id == step.run_id,
                runs.c.step_count == step.index,
            )
            .values(step_count=runs.c.step_count + 1)
        )
        if self._conn.execute(bump).rowcount != 1:
            raise StoreConflict(f"step {step.index} of run {step.run_id!r} is not next")
        row = step.model_dump(exclude={"session_version"})
        row["step_index"] = row.pop("index")
        row["session_id"] = session_id
        self._conn.execute(sa.insert(run_steps), row)

    @translated
    def get_run(self, session_id: str, run_id: str) -> Run | None:
        stmt = self._sql.cached("get_run", _run_select)
        rows = stmt.rows(self._execute(stmt, {"session_id": session_id, "run_id": run_id}))
        return _run_of(stmt.record(rows[0])) if rows else None

    @translated
    def list_run_steps(
        self,
        session_id: str,
        run_id: str,
        *,
        after_index: int | None = None,
        limit: int | None = None,
    ) -> list[RunStep]:
        if limit is not None and limit <= 0:
            return []
        stmt = sa.select(run_steps).where(
            run_steps.c.session_id == session_id, run_steps.c.run_id == run_id
        )
        if after_index is not None:
            stmt = stmt.where(run_steps.c.step_index > after_index)
        stmt = stmt.order_by(run_steps.c.step_index).limit(limit)
        steps = []
        for row in self._conn.execute(stmt):
            data = row._asdict()
            data["index"] = data.pop("step_index")
            del data["session_id"]
            steps.append(RunStep.model_validate(data))
        return steps

    @translated
    def list_runs(
        self,
        session_id: str,
        *,
        status: RunStatus | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if limit is not None and limit <= 0:
            return []
        bounds = (status is not None, after_seq is not None, limit is not None)
        stmt = self._sql.cached(("list_runs", *bounds), lambda: _runs_select(*bounds))
        params = {
            "session_id": session_id,
            "status": None if status is None else status.value,
            "after_seq": after_seq,
            "limit": limit,
        }
        rows = stmt.rows(self._execute(stmt, params))
        return [_run_of(stmt.record(row)) for row in rows]


def _run_of(row: dict[str, Any]) -> Run:
    """The run of a row; ``usage_entries`` NULL (a run of before the ledger) is none."""
    if row["usage_entries"] is None:
        row["usage_entries"] = []
    return Run.model_validate(row)
