"""Runs and their steps on the Redis store, as a part of its transaction class.

Key layout (``{sid}`` as in :mod:`.store`)::

    as:{sid}:runs           hash    run_id -> Run JSON (without steps and step_count)
    as:{sid}:runs:seq       zset    score = seq, member = run_id
    as:{sid}:steps:<run_id> list    RunStep JSON in index order; its length (LLEN, O(1))
                                    is the run's step_count, so it never drifts

Writes are buffered like every other write and read back with the stored rows; the
commit script checks a step list still has the length its new step was numbered after.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...jsonvalues import dumps
from ...models import Run, RunStatus, RunStep
from ..base import StoreConflict
from .codec import copy, dec, enc, prefix
from .errors import translated
from .replies import texts as _texts

if TYPE_CHECKING:
    import redis

__all__ = ["RunOps"]


def _enc_run(run: Run) -> str:
    # The step list's length is the count (see the key layout); steps live in the list.
    return dumps(run.model_dump(mode="json", exclude={"steps", "step_count"}))


class RunOps:
    """The run methods of the Redis transaction (see the store protocol). The host class
    provides the client, the write buffer and the session checks."""

    _r: redis.Redis
    _writing: Callable[[], None]
    _require_session: Callable[[str], None]
    _stored: Callable[[str], bool]
    _do: Callable[..., None]
    _check: Callable[..., None]
    _runs: dict[str, dict[str, Run]]
    _new_runs: set[tuple[str, str]]
    _steps: dict[tuple[str, str], list[RunStep]]

    def _run_rows(self, session_id: str, run_ids: Sequence[str]) -> list[Run | None]:
        """The runs (``step_count`` set, no steps) in one round trip, whatever their
        number: the hash fields and the lengths of their step lists."""
        pending = self._runs.get(session_id, {})
        stored: list[str | None] = [None] * len(run_ids)
        lengths = [0] * len(run_ids)
        if self._stored(session_id) and run_ids:
            p = prefix(session_id)
            pipe = self._r.pipeline(transaction=False)
            pipe.hmget(p + "runs", list(run_ids))
            for run_id in run_ids:
                pipe.llen(f"{p}steps:{run_id}")
            stored, *lengths = pipe.execute()
        out: list[Run | None] = []
        for run_id, raw, length in zip(run_ids, stored, lengths, strict=True):
            run = pending.get(run_id) or (None if raw is None else dec(Run, raw))
            if run is not None:
                stored_count = 0 if (session_id, run_id) in self._new_runs else length
                count = stored_count + len(self._steps.get((session_id, run_id), []))
                run = copy(run).model_copy(update={"step_count": count})
            out.append(run)
        return out

    @translated
    def insert_run(self, run: Run) -> None:
        self._writing()
        sid = run.session_id
        self._require_session(sid)
        pending = self._runs.setdefault(sid, {})
        if run.run_id in pending or self._run_rows(sid, [run.run_id])[0] is not None:
            raise StoreConflict(f"run {run.run_id!r} exists")
        bare = copy(run).model_copy(update={"steps": [], "step_count": 0})
        p = prefix(sid)
        if self._stored(sid):
            self._check("HNX", p + "runs", run.run_id)
        self._do("HSET", p + "runs", run.run_id, _enc_run(bare))
        self._do("ZADD", p + "runs:seq", run.seq, run.run_id)
        pending[run.run_id] = bare
        self._new_runs.add((sid, run.run_id))

    @translated
    def update_run(self, run: Run) -> None:
        self._writing()
        sid = run.session_id
        pending = self._runs.setdefault(sid, {})
        new = (sid, run.run_id) in self._new_runs
        if not new and self._run_rows(sid, [run.run_id])[0] is None:
            raise StoreConflict(f"run {run.run_id!r} vanished during the transaction")
        bare = copy(run).model_copy(update={"steps": [], "step_count": 0})
        p = prefix(sid)
        if not new:
            self._check("HX", p + "runs", run.run_id)
        self._do("HSET", p + "runs", run.run_id, _enc_run(bare))
        pending[run.run_id] = bare

    @translated
    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        self._writing()
        self._require_session(session_id)
        run = self._run_rows(session_id, [step.run_id])[0]
        if run is None or step.index != run.step_count:
            raise StoreConflict(f"step {step.index} of run {step.run_id!r} is not next")
        key = f"{prefix(session_id)}steps:{step.run_id}"
        mine = self._steps.setdefault((session_id, step.run_id), [])
        if self._stored(session_id) and (session_id, step.run_id) not in self._new_runs:
            self._check("LLEN", key, str(step.index - len(mine)))
        self._do("RPUSH", key, enc(step))
        mine.append(copy(step))

    @translated
    def get_run(self, session_id: str, run_id: str) -> Run | None:
        return self._run_rows(session_id, [run_id])[0]

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
        start = 0 if after_index is None else after_index + 1
        rows: list[RunStep] = []
        if self._stored(session_id) and (session_id, run_id) not in self._new_runs:
            stop = -1 if limit is None else start + limit - 1
            key = f"{prefix(session_id)}steps:{run_id}"
            rows = [dec(RunStep, t) for t in _texts(self._r.lrange(key, start, stop))]
        rows += [copy(s) for s in self._steps.get((session_id, run_id), []) if s.index >= start]
        return rows if limit is None else rows[:limit]

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
        pending = self._runs.get(session_id, {})
        ids: list[str] = []
        if self._stored(session_id):
            low = "-inf" if after_seq is None else f"({after_seq}"
            num = limit if status is None and not pending and limit is not None else None
            start = None if num is None else 0
            key = prefix(session_id) + "runs:seq"
            ids = _texts(self._r.zrangebyscore(key, low, "+inf", start=start, num=num))
        seen = set(ids)
        ids += [
            i
            for i, r in pending.items()
            if i not in seen and (after_seq is None or r.seq > after_seq)
        ]
        chosen = sorted(
            (r for r in self._run_rows(session_id, ids) if r is not None), key=lambda r: r.seq
        )
        chosen = [r for r in chosen if status is None or r.status == status]
        return chosen if limit is None else chosen[:limit]
