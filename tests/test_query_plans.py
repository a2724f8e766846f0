"""The SQL store's lookups and listings are served by their indexes, on every SQL database.

Each store call below runs with a statement listener that records the SQL and parameters
the driver receives; each statement is then explained by the database itself (SQLite
``EXPLAIN QUERY PLAN``, PostgreSQL ``EXPLAIN``, MariaDB ``EXPLAIN``) and must name the
intended index, with no scan of the table and no sort of its rows. The tables hold a few
hundred rows per user, analysed. On tables this small PostgreSQL may rightly prefer a
sequential or bitmap scan and a sort of a dozen rows, so it runs with ``enable_seqscan``,
``enable_bitmapscan`` and ``enable_sort`` off: it then shows the plan it takes at scale,
and a statement no index serves in order still sorts (and fails here).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import servers
from agentsession.jsonvalues import canonical_hash
from agentsession.models import Message, Session, SessionStatus, ToolCall, WorkingMemory
from agentsession.stores.sql.store import SQLStore
from sqlcapture import captured_sql

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=1)
USERS = [f"user{u}" for u in range(5)]
AGENTS = [f"agent{a}" for a in range(8)]
TOOLS = [f"tool{t}" for t in range(5)]
SID = "ses_" + "a" * 26  # the session holding the tool calls
CURSOR = (T0 + timedelta(minutes=100), "ses_" + "m" * 26)  # most rows are after it
PARENT = "ses_" + "p" * 26  # the parent of 60 forks, all of user3 (its owner)

Call = Callable[[Any], object]

#: (what, store call, the index each of its statements must use), in statement order.
QUERIES: list[tuple[str, Call, list[str]]] = [
    (
        "find_tool_call",
        lambda tx: tx.find_tool_call(SID, tool="tool1", arguments_hash=canonical_hash({"i": 1})),
        ["ix_tool_calls_session_id_tool_arguments_hash_seq"],
    ),
    (
        "tool history of one tool",
        lambda tx: tx.list_tool_calls(SID, tool="tool2", after_seq=10, limit=50),
        ["ix_tool_calls_session_id_tool_seq"],
    ),
    (
        "provider call id",
        lambda tx: tx.find_tool_call_by_provider_id(SID, "p3"),
        ["ix_tool_calls_session_id_provider_call_id_seq"],
    ),
    (
        "session by external key",
        lambda tx: tx.find_session_by_key("user2", "agent1", "k7"),  # session 7
        ["ix_sessions_user_id_agent_external_key_hash"],
    ),
    (
        "working memory as of a seq",  # 300 versions above it: a seek, not a walk back
        lambda tx: tx.get_working_memory_at(SID, 100),
        ["ix_memory_history_session_id_at_seq_version"],
    ),
]
for user, prefix in (("user1", "ix_sessions_user_id_"), (None, "ix_sessions_")):
    for after in (None, CURSOR):
        common: dict[str, Any] = {"user_id": user, "after": after, "limit": 11, "now": NOW}
        QUERIES += [
            (
                f"sessions {user=} status ACTIVE {after=}",
                lambda tx, kw=common: tx.list_sessions(
                    status=SessionStatus.ACTIVE, agent=None, **kw
                ),
                [f"{prefix}status_updated_at_session_id"],
            ),
            (
                f"sessions {user=} status EXPIRED {after=}",
                lambda tx, kw=common: tx.list_sessions(
                    status=SessionStatus.EXPIRED, agent=None, **kw
                ),
                [f"{prefix}status_updated_at_session_id", f"{prefix}status_expires_at"],
            ),
            (
                f"sessions {user=} agent {after=}",
                lambda tx, kw=common: tx.list_sessions(status=None, agent="agent2", **kw),
                [f"{prefix}agent_updated_at_session_id"],
            ),
        ]
for user in ("user3", None):
    for after in (None, CURSOR):
        kw: dict[str, Any] = {"user_id": user, "after": after, "limit": 11, "now": NOW}
        QUERIES.append(
            (
                f"forks {user=} {after=}",
                lambda tx, kw=kw: tx.list_sessions(
                    status=None, agent=None, parent_session_id=PARENT, **kw
                ),
                ["ix_sessions_parent_session_id_updated_at_session_id"],
            )
        )


# Counts: the listing's indexes, read for their entries only (an unfiltered admin count
# reads every session's entry, by nature, and is left out).
for user, prefix, by_agent in (
    ("user1", "ix_sessions_user_id_", "ix_sessions_user_id_agent_external_key_hash"),
    (None, "ix_sessions_", "ix_sessions_agent_updated_at_session_id"),
):
    kw = {"user_id": user, "now": NOW}
    for status, statements in (
        (SessionStatus.ACTIVE, 1),
        (SessionStatus.CLOSED, 1),
        (SessionStatus.EXPIRED, 2),  # stored EXPIRED, and the due ones
    ):
        QUERIES.append(
            (
                f"count {user=} status {status.value}",
                lambda tx, kw=kw, status=status: tx.count_sessions(status=status, agent=None, **kw),
                [f"{prefix}status_expires_at"] * statements,
            )
        )
    QUERIES.append(
        (
            f"count {user=} agent",
            lambda tx, kw=kw: tx.count_sessions(status=None, agent="agent2", **kw),
            [by_agent],
        )
    )
QUERIES.append(
    (
        "count of one user",
        lambda tx: tx.count_sessions(user_id="user1", status=None, agent=None, now=NOW),
        ["ix_sessions_user_id_status_expires_at"],
    )
)
for user in ("user3", None):
    for status, statements in ((None, 1), (SessionStatus.EXPIRED, 2)):
        kw = {"user_id": user, "now": NOW, "parent_session_id": PARENT}
        QUERIES.append(
            (
                f"count forks {user=} {status=}",
                lambda tx, kw=kw, status=status: tx.count_sessions(status=status, agent=None, **kw),
                ["ix_sessions_parent_session_id_updated_at_session_id"] * statements,
            )
        )


def _session(n: int) -> Session:
    at = T0 + timedelta(seconds=37 * n % 7200)
    # Of 10: ACTIVE without a TTL, ACTIVE with one (every other one due), 4 CLOSED,
    # 4 EXPIRED: each status is a minority of a user's sessions, as each agent is.
    kind = n % 10
    ttl = 3600.0 if kind == 1 else None
    expires = at + timedelta(hours=1 if n % 20 == 1 else 48) if kind == 1 else None
    status = (
        SessionStatus.ACTIVE
        if kind < 2
        else SessionStatus.CLOSED
        if kind < 6
        else (SessionStatus.EXPIRED)
    )
    return Session(
        session_id=SID if n == 0 else f"ses_{n:026d}",
        user_id=USERS[n % len(USERS)],
        agent=AGENTS[n // 5 % len(AGENTS)],
        external_key=f"k{n}" if n % 2 else None,  # half keyed, half not (NULL)
        status=status,
        created_at=at,
        updated_at=at,
        last_active_at=at,
        ttl_seconds=ttl,
        expires_at=expires,
        parent_session_id=PARENT if n % 25 == 3 else None,
        fork_seq=0 if n % 25 == 3 else None,
        # 60 teams of 25 sessions (5 of each user), two environments.
        metadata={"team": f"t{n // 5 % 60}", "env": "prod" if n % 2 else "dev", "n": n},
    )


def _call(seq: int) -> ToolCall:
    arguments = {"i": seq % 7}
    return ToolCall(
        call_id=f"call_{seq}",
        session_id=SID,
        seq=seq,
        provider_call_id=f"p{seq % 10}",
        tool=TOOLS[seq % len(TOOLS)],
        arguments=arguments,
        arguments_hash=canonical_hash(arguments),
        started_at=T0,
        ended_at=T0,
        duration_ms=0.0,
        created_at=T0,
    )


def _fill(store: SQLStore) -> None:
    with store.transaction(write=True) as tx:
        for n in range(1500):
            tx.insert_session(_session(n))
        for seq in range(1, 401):
            tx.insert_tool_call(_call(seq))
        for version in range(1, 401):  # one memory write after each message
            memory = WorkingMemory(session_id=SID, version=version, updated_at=T0, data={})
            tx.put_working_memory(memory, at_seq=version)
    dialect = store.engine.dialect.name
    with store.engine.begin() as conn:
        if dialect == "sqlite":
            conn.exec_driver_sql("ANALYZE")
        elif dialect == "postgresql":
            conn.exec_driver_sql("ANALYZE sessions")
            conn.exec_driver_sql("ANALYZE tool_calls")
            conn.exec_driver_sql("ANALYZE memory_history")
            conn.exec_driver_sql("ANALYZE session_metadata")
        else:
            conn.exec_driver_sql(
                "ANALYZE TABLE sessions, tool_calls, memory_history, session_metadata"
            )


def _sqlite_plan(conn: sa.Connection, sql: str, params: Any) -> list[str]:
    return [str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)]


def _check_sqlite(plan: list[str], index: str) -> None:
    text = "\n".join(plan)
    assert f"INDEX {index} " in text, text
    assert not any(line.startswith("SCAN") for line in plan), text
    assert "TEMP B-TREE" not in text, text


def _postgres_plan(conn: sa.Connection, sql: str, params: Any) -> list[str]:
    for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
        conn.exec_driver_sql(f"SET {setting} = off")
    return [str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {sql}", params)]


def _check_postgres(plan: list[str], index: str) -> None:
    text = "\n".join(plan)
    assert f" {index} " in text + " ", text
    assert "Seq Scan" not in text and "Sort" not in text, text


def _mysql_plan(conn: sa.Connection, sql: str, params: Any) -> list[str]:
    rows = conn.exec_driver_sql(f"EXPLAIN {sql}", params).mappings().all()
    return [f"{r['table']} type={r['type']} key={r['key']} extra={r['Extra']}" for r in rows]


def _check_mysql(plan: list[str], index: str) -> None:
    [line] = plan
    assert f" key={index} " in line, line
    assert " type=ALL " not in line and "filesort" not in line, line


PLANS = {
    "sqlite": (_sqlite_plan, _check_sqlite),
    "postgresql": (_postgres_plan, _check_postgres),
    "mysql": (_mysql_plan, _check_mysql),
    "mariadb": (_mysql_plan, _check_mysql),
}


@pytest.fixture(params=["sqlite", "postgres", "mysql"])
def filled_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLStore]:
    """A store of each SQL family with 1,500 sessions, 400 tool calls and 400 versions of
    one working memory, analysed."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'plans.db'}"
    elif not servers.server_stores_enabled():
        pytest.skip(f"server stores left out ({servers.SERVER_STORES_ENV}=0)")
    else:
        url = str(request.getfixturevalue(f"{request.param}_store_url"))
    store = SQLStore(url, auto_migrate=True)
    try:
        _fill(store)
        yield store
    finally:
        store.close()


def test_lookups_and_listings_use_their_indexes(filled_store: SQLStore) -> None:
    """find_tool_call, one tool's history, the provider id and external key lookups,
    the session listings and counts by (user,) status / agent / parent, the listings with
    and without a cursor: each statement uses its index, scans no table and sorts nothing
    (SQLite, PostgreSQL, MariaDB)."""
    explain, check = PLANS[filled_store.engine.dialect.name]
    for what, call, indexes in QUERIES:
        with captured_sql(filled_store) as seen, filled_store.transaction(write=False) as tx:
            call(tx)
        selects = [(sql, params) for sql, params in seen if sql.lstrip().startswith("SELECT")]
        assert len(selects) == len(indexes), (what, selects)
        with filled_store.engine.connect() as conn:
            for (sql, params), index in zip(selects, indexes, strict=True):
                plan = explain(conn, sql, params)
                try:
                    check(plan, index)
                except AssertionError as exc:
                    raise AssertionError(f"{what}: {sql}\n{exc}") from None


def _fill_texts(store: SQLStore) -> None:
    """Two messages in each of the first 300 sessions; one in 30 holds ``修复启动``."""
    with store.transaction(write=True) as tx:
        for n in range(1, 301):
            sid = f"ses_{n:026d}"
            word = "帮我修复启动失败 requirements.txt" if n % 30 == 0 else f"other words {n}"
            tx.insert_messages(
                [
                    Message(
                        message_id=f"msg_{n:026d}"[:30] if i == 1 else f"msg_{n + 5000:026d}",
                        session_id=sid,
                        seq=i,
                        created_at=T0,
                        role="user",
                        content=f"{word} {i}",
                    )
                    for i in (1, 2)
                ]
            )
    with store.engine.begin() as conn:
        dialect = store.engine.dialect.name
        if dialect == "sqlite":
            conn.exec_driver_sql("ANALYZE")
        else:
            conn.exec_driver_sql(
                f"ANALYZE{'' if dialect == 'postgresql' else ' TABLE'} search_texts"
            )


@pytest.mark.parametrize("query", ["修复启动", "requirements.txt"])
def test_search_reads_the_text_index(filled_store: SQLStore, query: str) -> None:
    """A search of 3 characters or more is answered from the trigram index: SQLite's
    FTS5 ``search_fts`` (MATCH), PostgreSQL's ``pg_trgm`` GIN index (a bitmap scan, the
    only scan a GIN index has; the store reads the matches first, in a materialized
    CTE, so no estimate can turn it into a walk of the caller's texts). MariaDB has no text
    index (docs/guide.md, "Search"): it reads the caller's rows through the sessions'
    ``user_id`` index, checked here too, so it never scans every user's texts."""
    _fill_texts(filled_store)
    dialect = filled_store.engine.dialect.name
    with captured_sql(filled_store) as seen, filled_store.transaction(write=False) as tx:
        rows = tx.search(
            user_id="user0", query=query, agent=None, session_id=None, after=None, limit=21
        )
    assert {r.session_id for r in rows} == {
        f"ses_{n:026d}" for n in range(30, 301, 30) if n % 5 == 0
    }
    [(sql, params)] = [(s, p) for s, p in seen if s.lstrip().startswith(("SELECT", "WITH"))]
    with filled_store.engine.connect() as conn:
        if dialect == "postgresql":
            for setting in ("enable_seqscan", "enable_indexscan"):
                conn.exec_driver_sql(f"SET {setting} = off")
            plan = [str(r[0]) for r in conn.exec_driver_sql(f"EXPLAIN {sql}", params)]
            text = "\n".join(plan)
            assert "Bitmap Index Scan on ix_search_texts_text_trgm" in text, text
            assert "Seq Scan" not in text, text
        elif dialect == "sqlite":
            plan = _sqlite_plan(conn, sql, params)
            text = "\n".join(plan)
            assert "search_fts VIRTUAL TABLE INDEX" in text, text
            assert "SCAN search_texts" not in text and "SCAN sessions" not in text, text
        else:
            plan = [
                f"{r['table']} type={r['type']} key={r['key']}"
                for r in conn.exec_driver_sql(f"EXPLAIN {sql}", params).mappings()
            ]
            text = "\n".join(plan)
            assert "type=ALL" not in text, text


_META_INDEX = "ix_session_metadata_key_value_user_id_session_id"
#: (what, store call, its filters); every statement reads _META_INDEX.
_META_QUERIES: list[tuple[str, Call, dict[str, Any]]] = []
for user in ("user1", None):
    kw = {"user_id": user, "agent": None, "now": NOW}
    _META_QUERIES += [
        (
            f"count {user=} by one key",
            lambda tx, kw=kw: tx.count_sessions(status=None, metadata={"team": "t11"}, **kw),
            {"user_id": user, "team": "t11"},
        ),
        (
            f"count {user=} by two keys",
            lambda tx, kw=kw: tx.count_sessions(
                status=None, metadata={"env": "dev", "team": "t11"}, **kw
            ),
            {"user_id": user, "team": "t11", "env": "dev"},
        ),
        (
            f"count {user=} by one key and agent",
            lambda tx, user=user: tx.count_sessions(
                user_id=user, status=None, agent="agent3", metadata={"team": "t11"}, now=NOW
            ),
            {"user_id": user, "team": "t11", "agent": "agent3"},
        ),
        (
            f"list {user=} by one key",
            lambda tx, kw=kw: tx.list_sessions(
                status=None, metadata={"team": "t11"}, after=None, limit=11, **kw
            ),
            {"user_id": user, "team": "t11", "limit": 11},
        ),
        (
            f"list {user=} by two keys",
            lambda tx, kw=kw: tx.list_sessions(
                status=None, metadata={"env": "dev", "team": "t11"}, after=None, limit=11, **kw
            ),
            {"user_id": user, "team": "t11", "env": "dev", "limit": 11},
        ),
    ]


def test_metadata_filters_read_the_metadata_index(filled_store: SQLStore) -> None:
    """A count or listing filtered by metadata reads the range of the metadata index
    that the filter's first key names (25 of 1,500 sessions; 5 of a user's 300), and
    scans no table: SQLite, PostgreSQL (sequential and bitmap scans off, as above) and
    MariaDB. A listing may sort the matching sessions (the index holds no update time)."""
    for what, call, want in _META_QUERIES:
        _check_metadata_query(filled_store, call, want, what)


def _check_metadata_query(store: SQLStore, call: Call, want: dict[str, Any], what: str) -> None:
    stored = [_session(n) for n in range(1500)]
    found = sum(
        1
        for s in stored
        if want["user_id"] in (None, s.user_id)
        and all(s.metadata[k] == want[k] for k in ("team", "env") if k in want)
        and want.get("agent", s.agent) == s.agent
    )
    found = min(found, want.get("limit", found))
    assert found > 0
    dialect = store.engine.dialect.name
    with captured_sql(store) as seen, store.transaction(write=False) as tx:
        result = call(tx)
    assert (result if isinstance(result, int) else len(result)) == found, what
    selects = [(s, p) for s, p in seen if s.lstrip().startswith("SELECT")]
    # Two keys: one probe of both (the rarest read first), then the count or listing.
    assert len(selects) == (2 if "two keys" in what else 1), (what, selects)
    with store.engine.connect() as conn:
        for sql, params in selects:
            _check_metadata_plan(conn, dialect, sql, params, what)


def _check_metadata_plan(
    conn: sa.Connection, dialect: str, sql: str, params: Any, what: str
) -> None:
    if dialect == "sqlite":
        plan = _sqlite_plan(conn, sql, params)
        text = "\n".join(plan)
        assert f"INDEX {_META_INDEX} " in text, (what, text)
        tables = ("SCAN session", "SCAN meta")  # a probe's own subquery may be scanned
        assert not any(line.lstrip().startswith(tables) for line in plan), (what, text)
    elif dialect == "postgresql":
        plan = _postgres_plan(conn, sql, params)
        text = "\n".join(plan)
        assert _META_INDEX in text, (what, text)
        assert "Seq Scan" not in text, (what, text)
        _check_generic_plan(conn, sql, params, what)
    else:
        plan = _mysql_plan(conn, sql, params)
        text = "\n".join(plan)
        assert f"key={_META_INDEX} " in text, (what, text)
        tables = [line for line in plan if not line.startswith("<derived")]  # a probe's own
        assert not any(" type=ALL " in line for line in tables), (what, text)


def _check_generic_plan(conn: sa.Connection, sql: str, params: dict[str, Any], what: str) -> None:
    """PostgreSQL's generic plan of the statement (the plan of a prepared statement,
    which psycopg makes of a statement run five times) reads the first key's range and
    no table, and reads each other key in a subplan run per entry of that range, by the
    primary key. A join of the other key (a nested loop here) is one the planner may
    turn into a hash join over that key's whole range, as it does at 100,000 sessions:
    the plan that made a two-key count grow with the store."""
    from psycopg import sql as pg_sql

    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    prepared = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    raw = conn.connection.driver_connection
    literals = pg_sql.SQL(", ").join(pg_sql.Literal(params[n]) for n in names).as_string(raw)
    conn.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
    conn.exec_driver_sql(f"PREPARE metadata_plan AS {prepared}")
    try:
        rows = conn.exec_driver_sql(f"EXPLAIN EXECUTE metadata_plan({literals})")
        text = "\n".join(str(row[0]) for row in rows)
    finally:
        conn.exec_driver_sql("DEALLOCATE metadata_plan")
        conn.exec_driver_sql("RESET plan_cache_mode")
    assert _META_INDEX in text, (what, text)
    assert "Hash" not in text and "Seq Scan" not in text, (what, text)
    if " AS meta1" in sql:  # a second key
        assert "SubPlan" in text, (what, text)
        assert "pk_session_metadata on session_metadata meta1" in text, (what, text)
