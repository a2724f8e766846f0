"""PostgreSQL and MariaDB pools hold what the service admits, and do not churn.

SQLAlchemy's overflow connections are closed as soon as they come back to a full pool,
so a pool smaller than the concurrency opened and closed a server connection every
few writes under load. The store's pool has no overflow: ``serve``'s pool is sized to
``max_concurrent_requests``, so the connections a burst of concurrent appends opens
are at most the writers, however many bursts follow. Counted on the server
(``pg_stat_database.sessions``, MariaDB's ``Connections`` status).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import servers
from agentsession import SessionManager
from agentsession.errors import ValidationError
from agentsession.settings import Settings
from agentsession.stores.sql.store import SQLStore

USER = "u"
MESSAGE = {"role": "user", "content": "hello"}
WRITERS = 32
#: A request's work outside the store (parsing, encoding: about 1 ms over HTTP), which
#: lets connections sit idle in the pool between writes, as they do under ``serve``.
OUTSIDE_S = 0.002


def _counter(kind: str, server: servers.Server, database: str) -> Callable[[], int]:
    """The server's count of connections made, read after its backends reported."""

    def made() -> int:
        time.sleep(0.3 if kind == "postgres" else 0)  # a backend reports when idle
        return server.connections_made(database)

    return made


def _bursts(manager: SessionManager, sessions: list[str], rounds: int, appends: int) -> None:
    """``rounds`` times: every session's writer appends ``appends`` messages at once."""
    errors: list[BaseException] = []

    def write(session_id: str) -> None:
        try:
            for _ in range(appends):
                manager.append_message(session_id=session_id, user_id=USER, message=MESSAGE)
                time.sleep(OUTSIDE_S)
        except BaseException as exc:
            errors.append(exc)

    for _ in range(rounds):
        threads = [threading.Thread(target=write, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.05)  # between bursts the pool's connections sit idle
    assert not errors, errors[0]


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_concurrent_bursts_open_no_more_connections_than_writers(
    kind: str, request: pytest.FixtureRequest
) -> None:
    server: servers.Server = request.getfixturevalue(f"{kind}_server")
    url: str = request.getfixturevalue(f"{kind}_url")
    database = url.rsplit("/", 1)[1]
    options = Settings(url=url, auto_migrate=True).manager_options()
    assert options["pool_size"] == Settings().max_concurrent_requests
    made = _counter(kind, server, database)
    with SessionManager.from_url(url, **options) as manager:
        sessions = [
            manager.create_session(user_id=USER, agent="a").session_id for _ in range(WRITERS)
        ]
        start = made()
        _bursts(manager, sessions, rounds=5, appends=5)
        opened = made() - start
    # At most one per writer over all the bursts: none is closed to be opened again.
    assert opened <= WRITERS


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_a_pool_smaller_than_the_writers_makes_them_wait_not_connect(
    kind: str, request: pytest.FixtureRequest
) -> None:
    server: servers.Server = request.getfixturevalue(f"{kind}_server")
    url: str = request.getfixturevalue(f"{kind}_url")
    made = _counter(kind, server, url.rsplit("/", 1)[1])
    with SessionManager(SQLStore(url, auto_migrate=True, pool_size=4)) as manager:
        sessions = [manager.create_session(user_id=USER, agent="a").session_id for _ in range(16)]
        start = made()
        _bursts(manager, sessions, rounds=2, appends=5)
        opened = made() - start
        counts = {
            s: manager.get_session(session_id=s, user_id=USER).message_count for s in sessions
        }
    assert opened <= 4
    assert set(counts.values()) == {10}


def test_pool_size_below_one_is_refused_and_settings_pass_it_to_sql_servers() -> None:
    with pytest.raises(ValidationError, match="pool_size"):
        SQLStore("postgresql+psycopg://nobody@127.0.0.1:1/x", pool_size=0)
    with pytest.raises(ValueError, match="pool_size"):
        Settings(pool_size=0)
    assert Settings(url="mysql+pymysql://h/db", pool_size=7).manager_options()["pool_size"] == 7
    assert "pool_size" not in Settings(url="sqlite:///x.db").manager_options()
    assert "pool_size" not in Settings(url="redis://h/0").manager_options()
