"""Shared fixtures: the registry of stores the contract and HTTP tests run against.

``STORES`` maps a backend name to a factory returning a fresh, empty store; the
``store`` fixture closes it afterwards. A factory's parameters are fixture names, filled
in like a fixture's (``tmp_path``, or a server fixture such as ``postgres_store_url``).
A backend whose server or driver is missing is skipped with its reason printed by ``-ra``
and in the "server stores" summary at the end.

Which stores a test runs on depends on what it checks (``tests/contract/README.md``):

* by default, every store in ``STORES``: the test exercises what a store must do;
* marked ``store_independent``, only ``MANAGER_STORES`` (memory and SQLite): the rule
  lives in the manager or the HTTP layer and no store can change the outcome (argument
  validation, ownership checks, value rejection before any write, HTTP mapping).
* marked ``servers_slow``, every store, but the ``SERVERS`` variants are ``slow`` (only
  ``make test-all``): a test of seconds per store whose memory and SQLite variants stay
  in ``make test`` (a large workload); every test in ``tests/adapters`` is one (an
  adapter only calls the manager, whose stores the contract suite checks).

The SQL stores are cheap to set up: the schema is migrated once per test session (per
xdist worker), and each test gets a copy of the migrated SQLite file, or the session's
PostgreSQL/MariaDB database emptied of rows.

The server stores (``postgres``, ``mysql``, ``redis``) are registered unless the environment
variable ``AGENTSESSION_TEST_SERVERS=0`` asks for a quick local run.
"""

from __future__ import annotations

import inspect
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import servers
from agentsession import SessionManager
from agentsession.crypto import ContentCipher, Keyring, MemoryKeyStore
from agentsession.stores.base import SessionStore
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.schema import metadata
from agentsession.stores.sql.store import SQLStore
from frozen_clock import FrozenClock


def pytest_configure(config: pytest.Config) -> None:
    """Load the throwaway servers' fixtures (``postgres_url``, ``mysql_url``,
    ``redis_url``...) and their "server stores" summary at the end of the run."""
    config.pluginmanager.register(servers, "agentsession_test_servers")


@pytest.hookimpl(tryfirst=True)  # before ``-m "not slow"`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` the server-store variants of ``servers_slow`` tests, then put slow
    tests first (the longest-first rule of scheduling): with ``make test-all``'s two
    xdist workers, the minutes-long ones (the long fuzz run, kill -9 cycles, scale-out)
    start at once and the short ones fill the gaps, instead of one long test starting
    last and running alone. Order within each group is kept."""
    for item in items:
        marked = item.get_closest_marker("servers_slow") is not None
        on_servers = (marked or item.path.is_relative_to(ADAPTER_TESTS)) and (
            _store_of(item) in SERVERS
        )
        if on_servers or _keyring_variant_is_slow(item):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _keyring_variant_is_slow(item: pytest.Item) -> bool:
    """Whether ``item`` runs a keyring variant only ``make test-all`` runs: every one
    but SQLite's (the embedded default) outside the adapter tests (an adapter only
    calls the manager), nor of a test marked ``keyring_slow`` (sealing megabytes is
    most of its time). The sealed layer is the same over every store, so ``make test``
    keeps one variant of it and stays within its time."""
    name = _store_of(item) or ""
    if not name.endswith(KEYRING):
        return False
    heavy = item.get_closest_marker("keyring_slow") is not None
    return heavy or item.path.is_relative_to(ADAPTER_TESTS) or name != "sqlite" + KEYRING


def _store_of(item: pytest.Item) -> str | None:
    """The ``store`` parameter of a test item, if it has one."""
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("store")


# -- migrated SQL databases, set up once per session -------------------------------------


class MigratedDatabase:
    """A database migrated once per session; :meth:`emptied` deletes every row (the
    schema and ``alembic_version`` stay) so each test starts from an empty store."""

    def __init__(self, url: str) -> None:
        SQLStore(url, auto_migrate=True).close()
        self.url = url
        self._engine = sa.create_engine(url, pool_size=1)

    def emptied(self) -> str:
        # DELETE, children first: on these few rows it is ~10x cheaper than TRUNCATE
        # (PostgreSQL) or a CREATE DATABASE + migration per test.
        with self._engine.begin() as conn:
            for table in reversed(metadata.sorted_tables):
                conn.execute(table.delete())
        return self.url

    def close(self) -> None:
        self._engine.dispose()


def _migrated(server: servers.Server) -> Iterator[MigratedDatabase]:
    name, url = server.create_database()
    db = MigratedDatabase(url)
    try:
        yield db
    finally:
        db.close()
        server.drop_database(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session, copied by each test's ``sqlite`` store."""
    path = tmp_path_factory.mktemp("sqlite-template") / "sessions.db"
    SQLStore(f"sqlite:///{path}", auto_migrate=True).close()
    return path


@pytest.fixture(scope="session")
def postgres_migrated(postgres_server: servers.Server) -> Iterator[MigratedDatabase]:
    """The session's migrated PostgreSQL database."""
    yield from _migrated(postgres_server)


@pytest.fixture(scope="session")
def mysql_migrated(mysql_server: servers.Server) -> Iterator[MigratedDatabase]:
    """The session's migrated MariaDB/MySQL database."""
    yield from _migrated(mysql_server)


@pytest.fixture
def postgres_store_url(postgres_migrated: MigratedDatabase) -> str:
    """URL of a migrated PostgreSQL database with no rows."""
    return postgres_migrated.emptied()


@pytest.fixture
def mysql_store_url(mysql_migrated: MigratedDatabase) -> str:
    """URL of a migrated MariaDB/MySQL database with no rows."""
    return mysql_migrated.emptied()


# -- the registry ------------------------------------------------------------------------


def _memory() -> SessionStore:
    return MemoryStore()


def _sqlite(sqlite_template: Path, tmp_path: Path) -> SessionStore:
    db = tmp_path / "sessions.db"
    shutil.copyfile(sqlite_template, db)
    return SQLStore(f"sqlite:///{db}", auto_migrate=True)


def _postgres(postgres_store_url: str) -> SessionStore:
    return SQLStore(postgres_store_url, auto_migrate=True)


def _mysql(mysql_store_url: str) -> SessionStore:
    return SQLStore(mysql_store_url, auto_migrate=True)


def _redis(redis_url: str) -> SessionStore:
    pytest.importorskip("redis", reason="redis-py not installed: pip install -e '.[dev]'")
    from agentsession.stores.redis.store import RedisStore

    return RedisStore(redis_url)


#: Every store the contract suite runs against. New stores add themselves here.
STORES: dict[str, Callable[..., SessionStore]] = {"memory": _memory, "sqlite": _sqlite}
if servers.server_stores_enabled():
    STORES.update(postgres=_postgres, mysql=_mysql, redis=_redis)

#: The suffix of a store's keyring variant (``sqlite+keyring``): the same store wrapped
#: in a SealedStore, every content value sealed (docs/security.md, "Encryption at rest").
#: Every test of the suite runs on it too, but ``store_independent`` ones.
KEYRING = "+keyring"

#: The stores of ``store_independent`` tests: one in-process store of each family.
MANAGER_STORES = ("memory", "sqlite")
#: The stores on throwaway servers, whose variants of a ``servers_slow`` test are ``slow``.
SERVERS = ("postgres", "mysql", "redis")
#: Every adapter test is ``servers_slow``: an adapter only calls the manager (or the
#: client), whose every store the contract suite proves in ``make test``.
ADAPTER_TESTS = Path(__file__).resolve().parent / "adapters"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``store`` over ``STORES``, or ``MANAGER_STORES`` for a test marked
    ``store_independent``."""
    if "store" not in metafunc.fixturenames:
        return
    names = sorted(STORES)
    if metafunc.definition.get_closest_marker("store_independent") is not None:
        names = [name for name in names if name in MANAGER_STORES]
    else:
        names += [name + KEYRING for name in names]
    metafunc.parametrize("store", names, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest) -> Iterator[SessionStore]:
    """A fresh, empty store of the kind ``pytest_generate_tests`` chose."""
    name = str(request.param)
    factory = STORES[name.removesuffix(KEYRING)]
    fixtures = {
        name: request.getfixturevalue(name) for name in inspect.signature(factory).parameters
    }
    s = factory(**fixtures)
    if name.endswith(KEYRING):
        keyring = request.getfixturevalue("tmp_path") / "store.keyring"
        s = SealedStore(s, ContentCipher(Keyring.create(keyring, key_store=MemoryKeyStore())))
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def clock() -> FrozenClock:
    """A frozen clock shared with the ``manager`` fixture."""
    return FrozenClock()


@pytest.fixture
def manager(store: SessionStore) -> SessionManager:
    """A SessionManager over each store, on the real clock."""
    return SessionManager(store)


@pytest.fixture
def frozen_manager(store: SessionStore, clock: FrozenClock) -> SessionManager:
    """A SessionManager over each store whose clock only moves when the test says so."""
    return SessionManager(store, clock=clock)
