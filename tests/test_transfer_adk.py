"""``agentsession import google-adk``: the databases ``make bench`` builds with ADK's
own services (benchmarks/peers.py ``ADKSqlite`` and ``ADKDatabase``) move into ours
whole, read back through the ADK adapter equal to the source's ``get_session``; the
source is never written; a re-run adds nothing."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="google-adk not installed: pip install -e '.[dev]'")

from google.adk.events import Event, EventActions
from google.adk.sessions import BaseSessionService
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types
from typer.testing import CliRunner

import agentsession.transfer
from agentsession import AsyncSessionManager, SessionManager
from agentsession.adapters.adk import AgentSessionService
from agentsession.cli.app import build_app
from agentsession.errors import ValidationError
from agentsession.transfer.adk import list_source, open_source


def peers_module() -> Any:
    """benchmarks/peers.py as a module."""
    benchmarks = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, benchmarks)
    try:
        import peers
    finally:
        sys.path.remove(benchmarks)
    return peers


async def fill(peer: Any) -> None:
    """Three sessions of two users with 12 events each, state of every scope, and a
    tool call and its response."""
    for n, user in enumerate(["bench-user", "bench-owner", "bench-user"]):
        handle = await peer.new_session(user)
        await peer.append_batch(handle, 0, 10)
        await peer.update_memory(handle, n)
        call = types.FunctionCall(id=f"call-{n}", name="lookup", args={"q": n})
        answer = types.FunctionResponse(id=f"call-{n}", name="lookup", response={"n": n})
        for part, delta in [
            (types.Part(function_call=call), {"app:seen": n, "user:last": {"n": n}}),
            (types.Part(function_response=answer), {"flag": None}),
        ]:
            await peer.svc.append_event(
                handle,
                Event(
                    invocation_id=f"tool-{n}",
                    author="assistant",
                    content=types.Content(role="model", parts=[part]),
                    actions=EventActions(state_delta=delta),
                ),
            )


async def snapshot(service: BaseSessionService, app: str) -> list[Any]:
    """Every session of ``app``, whole, as ``get_session`` answers, in a stable order."""
    listed = (await service.list_sessions(app_name=app)).sessions
    full = [
        await service.get_session(app_name=app, user_id=s.user_id, session_id=s.id) for s in listed
    ]
    return sorted(
        [
            (
                s.user_id,
                s.id,
                s.state,
                s.last_update_time,
                [e.model_dump(mode="json") for e in s.events],
            )
            for s in full
            if s is not None
        ],
        key=lambda row: (row[0], row[1]),
    )


def digest(path: Path) -> str:
    """The SHA-256 of every file of the database (the file, its -wal and -shm)."""
    h = hashlib.sha256()
    for file in sorted(path.parent.glob(path.name + "*")):
        h.update(file.name.encode() + file.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize("kind", ["ADKSqlite", "ADKDatabase"])
def test_the_benchmarks_adk_database_moves_into_ours(tmp_path: Path, kind: str) -> None:
    peers = peers_module()
    peer = getattr(peers, kind)(tmp_path, peers.WAL_NORMAL)

    async def build() -> None:
        opened = peer.open()
        if asyncio.iscoroutine(opened):
            await opened
        await fill(peer)
        await peer.close()

    asyncio.run(build())
    source = str(peer.path) if kind == "ADKSqlite" else f"sqlite+aiosqlite:///{peer.path}"

    async def expected() -> list[Any]:
        service = open_source(source)
        try:
            return await snapshot(service, peers.APP)
        finally:
            await service.close()

    want = asyncio.run(expected())
    assert len(want) == 3 and all(len(row[4]) == 13 for row in want)
    assert {row[2]["app:seen"] for row in want} == {2}  # app state shared, last write wins
    before = digest(peer.path)
    url = f"sqlite:///{tmp_path / 'ours.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    runner = CliRunner()
    args = ["import", "google-adk", source, "--app", peers.APP, "--url", url, "--json"]
    done = runner.invoke(build_app(), args)
    assert done.exit_code == 0, done.output
    # The state is written where replaying the deltas did not give the source's: here
    # the app: key a later session changed.
    assert json.loads(done.output) | {"states": 0} == {
        "sessions": 3,
        "created": 3,
        "events": 39,
        "states": 0,
        "failed": [],
    }

    async def ours() -> list[Any]:
        async with AsyncSessionManager.from_url(url) as manager:
            return await snapshot(AgentSessionService(manager), peers.APP)

    assert asyncio.run(ours()) == want
    again = runner.invoke(build_app(), args)
    assert again.exit_code == 0, again.output
    assert json.loads(again.output) == {
        "sessions": 3,
        "created": 0,
        "events": 0,
        "states": 0,
        "failed": [],
    }
    assert asyncio.run(ours()) == want
    assert digest(peer.path) == before  # the source was only read


def test_a_missing_source_file_is_a_clear_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ours.db'}"
    args = ["import", "google-adk", str(tmp_path / "nope.db"), "--app", "a", "--url", url]
    done = CliRunner().invoke(build_app(), args)
    assert done.exit_code == 2 and "no such database file" in done.output
    assert not (tmp_path / "nope.db").exists()


async def adk_file(path: Path, *, url: bool = False) -> None:
    """A ``SqliteSessionService`` file at ``path`` (a ``DatabaseSessionService`` one with
    ``url``) with one session of app ``a``."""
    service: BaseSessionService = (
        DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
        if url
        else SqliteSessionService(str(path))
    )
    await service.create_session(app_name="a", user_id="u", session_id="s", state={"k": 1})
    await service.close()


async def listed(source: str) -> list[str]:
    """The ids of app ``a``'s sessions in ``source``, read through :func:`open_source`."""
    service = open_source(source)
    try:
        return [s.id for s in await list_source(service, ["a"])]
    finally:
        await service.close()


def test_a_source_path_with_url_characters_is_that_file_read_only(tmp_path: Path) -> None:
    path = tmp_path / "a#b?c%41 d.db"
    asyncio.run(adk_file(path))
    before = digest(path)
    assert asyncio.run(listed(str(path))) == ["s"]
    assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("query", ["?timeout=5", "?mode=rwc", "?x=1"])
@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+aiosqlite"])
def test_a_sqlite_url_with_a_query_is_opened_read_only(
    tmp_path: Path, scheme: str, query: str
) -> None:
    path = tmp_path / "adk.db"
    asyncio.run(adk_file(path, url=True))
    before = digest(path)
    assert asyncio.run(listed(f"{scheme}:///{path}{query}")) == ["s"]
    assert digest(path) == before


def test_a_database_without_adk_tables_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "mine.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE mine (x)")
    before = digest(path)
    for source in (str(path), f"sqlite:///{path}?timeout=5"):
        with pytest.raises(ValidationError, match="not an ADK session database"):
            open_source(source)

    async def through_the_service() -> None:  # how a server database is opened
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{path}")
        try:
            await list_source(service, ["a"])
        finally:
            await service.close()

    with pytest.raises(ValidationError, match="not an ADK session database"):
        asyncio.run(through_the_service())
    assert digest(path) == before


def cli_import(tmp_path: Path, source: str) -> Any:
    """``import google-adk source --app a`` into a SQLite store in ``tmp_path``."""
    url = f"sqlite:///{tmp_path / 'ours.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    args = ["import", "google-adk", source, "--app", "a", "--url", url]
    return CliRunner().invoke(build_app(), args)


def test_an_unreadable_source_is_a_one_line_error(tmp_path: Path) -> None:
    mine = tmp_path / "mine.db"
    with contextlib.closing(sqlite3.connect(mine)) as db:
        db.execute("CREATE TABLE mine (x)")
    for source, words in [
        (f"sqlite:///{tmp_path / 'nope.db'}", "no such database file"),
        (str(mine), "not an ADK session database"),
        ("postgresql+psycopg://u:secret@127.0.0.1:1/x", "cannot read postgresql+psycopg://u:***@"),
        ("nodb+nodriver://x", "Invalid database URL"),
    ]:
        done = cli_import(tmp_path, source)
        assert done.exit_code == 2, (source, done.output)
        assert words in done.output and "Traceback" not in done.output, done.output
        assert "secret" not in done.output


def test_a_sqlite_url_with_a_query_imports(tmp_path: Path) -> None:
    path = tmp_path / "adk.db"
    asyncio.run(adk_file(path, url=True))
    done = cli_import(tmp_path, f"sqlite:///{path}?x=1")
    assert done.exit_code == 0 and done.output.startswith("1 session (1 new)"), done.output


def test_without_google_adk_the_import_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agentsession.transfer.adk", None)  # as if not installed
    monkeypatch.delattr(agentsession.transfer, "adk", raising=False)
    done = cli_import(tmp_path, str(tmp_path / "adk.db"))
    assert done.exit_code == 2, done.output
    assert "pip install 'agentsession[adk]'" in done.output


def test_a_wal_source_leaves_its_folder_as_it_was(tmp_path: Path) -> None:
    """A SQLite source in WAL mode, alone or with a writer holding its ``-wal`` open,
    imported or refused (the other service's file given as a path): nothing is
    created beside it."""
    folder = tmp_path / "src"
    folder.mkdir()
    path, other = folder / "adk.db", folder / "adkdb.db"
    asyncio.run(adk_file(path))
    asyncio.run(adk_file(other, url=True))
    for file in (path, other):
        with contextlib.closing(sqlite3.connect(file)) as db:
            db.execute("PRAGMA journal_mode=WAL")
    sources = [(str(path), 0), (str(other), 2), (f"sqlite:///{path}", 2)]
    for source, code in sources:
        before = sorted(p.name for p in folder.iterdir())
        done = cli_import(tmp_path, source)
        assert done.exit_code == code, done.output
        assert sorted(p.name for p in folder.iterdir()) == before == ["adk.db", "adkdb.db"]
    with contextlib.closing(sqlite3.connect(path)) as writer:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE mine (x)")
        writer.commit()
        before = sorted(p.name for p in folder.iterdir())
        assert "adk.db-wal" in before
        for source, code in sources:
            done = cli_import(tmp_path, source)
            assert done.exit_code == code, done.output
            assert sorted(p.name for p in folder.iterdir()) == before


def test_a_file_of_the_other_adk_service_says_what_to_pass(tmp_path: Path) -> None:
    """A DatabaseSessionService file given as a path, and a SqliteSessionService file
    given as a URL, are refused (exit 2) naming what to pass instead."""
    sqlite_file, database_file = tmp_path / "adk.db", tmp_path / "adkdb.db"
    asyncio.run(adk_file(sqlite_file))
    asyncio.run(adk_file(database_file, url=True))
    for source, words in [
        (
            str(database_file),
            f"is a DatabaseSessionService database: pass sqlite+aiosqlite:///{database_file}",
        ),
        (f"sqlite+aiosqlite:///{sqlite_file}", "is a SqliteSessionService database: pass its path"),
    ]:
        done = cli_import(tmp_path, source)
        assert done.exit_code == 2 and words in done.output, done.output


def test_a_directory_source_and_an_app_without_sessions_are_said(tmp_path: Path) -> None:
    """A directory as the source is exit 2 ``is a directory``; an app with no sessions
    in the source is a warning line (exit 0)."""
    done = cli_import(tmp_path, str(tmp_path))
    assert done.exit_code == 2 and "is a directory" in done.output, done.output
    path = tmp_path / "adk.db"
    asyncio.run(adk_file(path))
    url = f"sqlite:///{tmp_path / 'ours.db'}"
    args = ["import", "google-adk", str(path), "--app", "a", "--app", "nosuchapp", "--url", url]
    done = CliRunner().invoke(build_app(), args)
    assert done.exit_code == 0, done.output
    assert "warning: no sessions of app 'nosuchapp'" in done.output
    assert "app 'a'" not in done.output
