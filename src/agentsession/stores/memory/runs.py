"""Runs and their steps on the in-memory store, as a part of its transaction class: the
runs of a session by id (insertion order is ``seq`` order), stored without their steps,
and each run's step list (``steps[i].index == i``)."""

from __future__ import annotations

from ...models import Run, RunStatus, RunStep
from ..base import StoreConflict
from .state import TransactionBase, copy

__all__ = ["RunOps"]


class RunOps(TransactionBase):
    """The run methods of the in-memory transaction (see the store protocol)."""

    def insert_run(self, run: Run) -> None:
        self._writing()
        data = self._data(run.session_id)
        if run.run_id in data.runs:
            raise StoreConflict(f"run {run.run_id!r} exists")
        data.runs[run.run_id] = copy(run).model_copy(update={"steps": [], "step_count": 0})
        data.steps[run.run_id] = []

        def undo() -> None:
            del data.runs[run.run_id]
            del data.steps[run.run_id]

        self._undo.append(undo)

    def update_run(self, run: Run) -> None:
        self._writing()
        data = self._data(run.session_id)
        old = data.runs.get(run.run_id)
        if old is None:
            raise StoreConflict(f"run {run.run_id!r} vanished during the transaction")
        kept = {"steps": [], "step_count": old.step_count}
        data.runs[run.run_id] = copy(run).model_copy(update=kept)
        self._undo.append(lambda: data.runs.__setitem__(run.run_id, old))

    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        self._writing()
        data = self._data(session_id)
        run = data.runs.get(step.run_id)
        if run is None or step.index != run.step_count:
            raise StoreConflict(f"step {step.index} of run {step.run_id!r} is not next")
        self._append(data.steps[step.run_id], copy(step))
        data.runs[step.run_id] = run.model_copy(update={"step_count": step.index + 1})
        self._undo.append(lambda: data.runs.__setitem__(step.run_id, run))

    def get_run(self, session_id: str, run_id: str) -> Run | None:
        data = self._s._sessions.get(session_id)
        if data is None or run_id not in data.runs:
            return None
        return copy(data.runs[run_id])

    def list_run_steps(
        self,
        session_id: str,
        run_id: str,
        *,
        after_index: int | None = None,
        limit: int | None = None,
    ) -> list[RunStep]:
        data = self._s._sessions.get(session_id)
        if data is None or run_id not in data.steps:
            return []
        # steps[i].index == i, so an index range is a slice: O(returned rows).
        start = 0 if after_index is None else after_index + 1
        stop = None if limit is None else start + limit
        return [copy(s) for s in data.steps[run_id][start:stop]]

    def list_runs(
        self,
        session_id: str,
        *,
        status: RunStatus | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        data = self._s._sessions.get(session_id)
        if data is None:
            return []
        rows = [
            r
            for r in data.runs.values()
            if (status is None or r.status == status) and (after_seq is None or r.seq > after_seq)
        ]
        return [copy(r) for r in rows[:limit]]
