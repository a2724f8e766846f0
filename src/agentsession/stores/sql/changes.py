"""The change feed on the SQL store: which audit events are final, and reading them.

The feed is the ``audit_events`` table read in ``seq`` order. A seq is handed out when
the event is inserted, not when its transaction commits, so on a server with concurrent
writers a transaction can commit seq 7 after another committed seq 8: a reader that
had seen 8 and resumed after it would skip 7 for good. A read therefore returns only
events up to a *horizon*, the newest seq below which no running transaction can still
commit an event (docs/semantics.md, "Change feed"):

* SQLite has one writer at a time: every committed seq is final (no horizon).
* PostgreSQL: an audit event's transaction has its transaction id (xid) before its
  seq, because the insert asks for the xid first (:func:`audit_insert`). So when a read
  sees the newest committed seq N in a snapshot, every transaction that could still
  commit a seq below N was running in that snapshot (its ``pg_snapshot_xip``), and once
  the oldest running transaction (``pg_snapshot_xmin``) is past all of them, N is final.
  Writers pay nothing; a reader waits for the transactions running when it looked, up
  to ``wait_seconds``, else keeps the last horizon it knew.
* MariaDB/MySQL show running transactions only with the PROCESS privilege, so a write
  transaction takes a shared lock on the one row of ``change_feed_gate`` as it inserts
  its first audit event (:func:`gated_audit_insert`) and holds it to its end. A reader
  takes that lock exclusively, which waits for the writers holding it, reads the newest
  seq, and lets go: while it holds it no writer can get a seq, and every seq handed out
  before belongs to a transaction that has ended. New writers wait behind the reader
  for that moment; its lock wait is capped at a second, after which it keeps the last
  horizon it knew.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ...errors import StoreBusy
from ...models import AuditEvent
from .dialect import translate_error, translated
from .schema import audit_events, change_feed_gate

__all__ = ["ChangeOps", "FeedHorizon", "audit_insert", "gated_audit_insert"]

#: How long a PostgreSQL reader waits for the transactions running when it looked.
WAIT_SECONDS = 1.0


def audit_insert(dialect: sa.engine.Dialect) -> sa.Insert:
    """The insert of one audit event (every column a bind parameter but ``seq``).

    On PostgreSQL the values are selected from a subquery that asks for the
    transaction's xid first (``OFFSET 0`` keeps it from being folded in), so the seq
    default is drawn after the transaction has its xid (see the module docstring).
    """
    columns = [c for c in audit_events.c if c.key != "seq"]
    if dialect.name != "postgresql":
        return sa.insert(audit_events).values({c.key: sa.bindparam(c.key) for c in columns})
    xid = sa.select(sa.func.pg_current_xact_id().label("xid")).offset(0).subquery("x")
    values = sa.select(*(sa.bindparam(c.key, type_=c.type).label(c.key) for c in columns))
    return sa.insert(audit_events).from_select([c.key for c in columns], values.select_from(xid))


def gated_audit_insert(dialect: sa.engine.Dialect) -> sa.Insert | None:
    """On MariaDB/MySQL, the insert of a transaction's first audit event: the same
    values selected from the gate row ``LOCK IN SHARE MODE``, so the shared lock is
    taken before the seq is drawn, and held to the end, with no statement of its own
    (it inserts no row if the gate row is missing). None on other databases."""
    if dialect.name != "mysql":
        return None
    columns = [c for c in audit_events.c if c.key != "seq"]
    gate = change_feed_gate
    values = (
        sa.select(*(sa.bindparam(c.key, type_=c.type).label(c.key) for c in columns))
        .select_from(gate)
        .where(gate.c.id == sa.literal_column("1"))
        .with_for_update(read=True)
    )
    return sa.insert(audit_events).from_select([c.key for c in columns], values)


class FeedHorizon:
    """The horizon of one store's feed (see the module docstring); thread-safe.

    Args:
        engine: the store's engine.
        errors: the driver errors to translate.
    """

    def __init__(self, engine: Engine, errors: tuple[type[BaseException], ...]) -> None:
        self._engine = engine
        self._errors = errors
        self._known = 0  # the newest horizon found: horizons never go back
        self._lock = threading.Lock()
        readers: dict[str, Callable[[Connection], int | None]] = {
            "postgresql": self._postgresql,
            "mysql": self._mysql,
        }
        self._read = readers.get(engine.dialect.name)
        if self._read is self._mysql:
            self._run(self._ensure_gate)

    def newest(self) -> int | None:
        """The newest seq a read may return; None when every committed one may be
        (SQLite). A reader that cannot learn it in time gets the last one known.

        Raises:
            StoreError: the database failed (not a lock wait, which is waited out).
        """
        if self._read is None:
            return None
        try:
            found = self._run(self._read)
        except StoreBusy:
            found = None
        with self._lock:
            if found is not None and found > self._known:
                self._known = found
            return self._known

    def _run(self, step: Callable[[Connection], int | None]) -> int | None:
        try:
            with self._engine.connect() as conn:
                return step(conn)
        except self._errors as exc:
            raise translate_error(exc) from exc

    @staticmethod
    def _ensure_gate(conn: Connection) -> None:
        """Put the gate row back if it is missing (it is made by the migration)."""
        conn.exec_driver_sql("INSERT IGNORE INTO change_feed_gate (id) VALUES (1)")
        conn.commit()

    @staticmethod
    def _postgresql(conn: Connection) -> int | None:
        newest, running = conn.exec_driver_sql(
            "SELECT (SELECT max(seq) FROM audit_events),"
            " (SELECT max(x)::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x)"
        ).one()
        if running is not None:
            deadline = time.monotonic() + WAIT_SECONDS
            pause = 0.0005
            oldest = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"
            while int(conn.exec_driver_sql(oldest).scalar_one()) <= int(running):
                if time.monotonic() > deadline:
                    return None
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
        return int(newest or 0)

    @staticmethod
    def _mysql(conn: Connection) -> int | None:
        conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = 1")
        try:
            locked = conn.exec_driver_sql(
                "SELECT id FROM change_feed_gate WHERE id = 1 FOR UPDATE"
            ).first()
            newest = conn.exec_driver_sql("SELECT max(seq) FROM audit_events").scalar()
            conn.commit()
        finally:
            conn.rollback()
            conn.exec_driver_sql("SET SESSION innodb_lock_wait_timeout = DEFAULT")
        if locked is None:  # no gate: nothing says which seqs are final
            FeedHorizon._ensure_gate(conn)
            return None
        return int(newest or 0)


class ChangeOps:
    """The feed read of the SQL transaction. The host class provides the connection
    and the errors to translate."""

    _conn: Connection
    _translatable: tuple[type[BaseException], ...]

    @translated
    def list_changes(
        self,
        *,
        after: int,
        upto: int | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> list[AuditEvent]:
        """Audit events with ``after < seq <= upto`` (None: no bound), of ``user_ids``
        (None: any) and ``session_id`` (None: any), by seq, at most ``limit``."""
        a = audit_events
        stmt = sa.select(a).where(a.c.seq > after)
        if upto is not None:
            stmt = stmt.where(a.c.seq <= upto)
        if user_ids is not None:
            stmt = stmt.where(a.c.user_id.in_(list(user_ids)))
        if session_id is not None:
            stmt = stmt.where(a.c.session_id == session_id)
        stmt = stmt.order_by(a.c.seq).limit(limit)
        return [AuditEvent.model_validate(row._asdict()) for row in self._conn.execute(stmt)]

    @translated
    def newest_change(self, *, upto: int | None) -> int | None:
        """The newest audit seq at or below ``upto`` (None: no bound); None if none."""
        stmt = sa.select(sa.func.max(audit_events.c.seq))
        if upto is not None:
            stmt = stmt.where(audit_events.c.seq <= upto)
        newest = self._conn.execute(stmt).scalar()
        return None if newest is None else int(newest)
