"""A pytest plugin for openai-agents' own test suite: every ``SQLiteSession`` it builds
is an :class:`~agentsession.adapters.openai_agents.AgentSessionSession` on agentsession's
SQLite store.

Loaded with ``-p openai_agents_shim`` (its folder on ``PYTHONPATH``) by
``test_openai_agents_upstream.py``, in a pytest run inside the unpacked openai-agents
sdist. It replaces the class where the tests import it from (``agents``,
``agents.memory``, ``agents.memory.sqlite_session``) at start-up, before any test module
is imported. Sessions made with the same ``db_path`` share one manager over one SQLite
database (at that path); each ``":memory:"`` session gets a fresh database of its own.
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import agents
import agents.memory
import agents.memory.sqlite_session
import pytest

from agentsession import SessionManager
from agentsession.adapters.openai_agents import AgentSessionSession
from agentsession.stores.sql.store import SQLStore

_WORKDIR = Path(tempfile.mkdtemp(prefix="agentsession-upstream-"))
_TEMPLATE = _WORKDIR / "template.db"
_managers: dict[str, SessionManager] = {}
#: Node ids of the tests that built at least one adapter session, and the running test.
_used: set[str] = set()
_current: list[str] = [""]


def _database(db_path: str) -> SessionManager:
    """The manager of ``db_path`` (created on first use from a migrated template)."""
    if db_path == ":memory:":
        db_path = str(_WORKDIR / f"memory-{len(_managers)}.db")
    manager = _managers.get(db_path)
    if manager is None:
        if not _TEMPLATE.exists():
            SQLStore(f"sqlite:///{_TEMPLATE}", auto_migrate=True).close()
        shutil.copyfile(_TEMPLATE, db_path)
        manager = _managers[db_path] = SessionManager(SQLStore(f"sqlite:///{db_path}"))
    return manager


class SQLiteSession(AgentSessionSession):
    """``SQLiteSession``'s constructor over an adapter session (the table names are
    SQLiteSession's own and mean nothing here). A class, so the tests may subclass it,
    patch its methods and check ``isinstance``."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str | None = None,
        messages_table: str | None = None,
        session_settings: Any = None,
    ) -> None:
        _used.add(_current[0])
        super().__init__(
            session_id,
            backend=_database(str(db_path)),
            user_id="upstream",
            session_settings=session_settings,
        )


for _module in (agents, agents.memory, agents.memory.sqlite_session):
    _module.SQLiteSession = SQLiteSession  # type: ignore[attr-defined,misc]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--session-tests-only``: run only the tests whose code names ``SQLiteSession``."""
    parser.addoption("--session-tests-only", action="store_true")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``--session-tests-only``, deselect the tests whose own code never names
    ``SQLiteSession`` (they cannot reach the adapter)."""
    if not config.getoption("session_tests_only"):
        return
    keep, drop = [], []
    for item in items:
        function = getattr(item, "function", None)
        names_it = function is not None and "SQLiteSession" in inspect.getsource(function)
        (keep if names_it else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Note which test is running, so a session built in it is counted for it."""
    _current[0] = item.nodeid
    try:
        return (yield)
    finally:
        _current[0] = ""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many tests ran on the adapter (``test_openai_agents_upstream`` reads it)."""
    terminalreporter.write_line(f"agentsession adapter used by {len(_used - {''})} tests")


def pytest_unconfigure() -> None:
    """Close the managers and remove their databases."""
    for manager in _managers.values():
        manager.close()
    shutil.rmtree(_WORKDIR, ignore_errors=True)
