"""The Google ADK session service under ADK's own Runner (examples/adk_agent.py: a tool
call, ``output_key="temp:..."``, a tool writing state; then a new manager, and (slow) a
new process, continue the session from the SQLite file), and differentially against ADK's own
``InMemorySessionService`` on random operation sequences."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="google-adk not installed: pip install -e '.[dev]'")

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.platform import time as platform_time
from google.adk.sessions import BaseSessionService, InMemorySessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from agentsession import AsyncSessionManager, SessionManager
from agentsession.adapters.adk import AgentSessionService
from agentsession.stores.base import SessionStore

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "adk_agent.py"


def load_example() -> ModuleType:
    """examples/adk_agent.py as a module."""
    spec = importlib.util.spec_from_file_location("adk_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def stored(example: ModuleType, db: Path) -> Session | None:
    """The example's session as a fresh service over the file reads it."""
    async with AsyncSessionManager.from_url(f"sqlite:///{db}") as manager:
        return await AgentSessionService(manager).get_session(
            app_name=example.APP, user_id=example.USER, session_id=example.SESSION
        )


def test_a_runner_turn_then_a_new_manager_continues_the_session(tmp_path: Path) -> None:
    """Each turn opens the file anew: the second Runner restores the session."""
    example = load_example()
    db = tmp_path / "sessions.db"
    assert asyncio.run(example.turn(str(db), "buy milk")) == "I remember: buy milk (3 turns seen)"
    session = asyncio.run(stored(example, db))
    assert session is not None
    assert session.state == {"last": "buy milk", "user:items": ["buy milk"]}  # no temp:
    assert [e.author for e in session.events] == ["user", "notes", "notes", "notes"]
    assert all("temp:answer" not in e.actions.state_delta for e in session.events)
    calls = session.events[1].get_function_calls()
    assert [(c.name, c.args) for c in calls] == [("remember", {"item": "buy milk"})]
    # The model sees the first turn's 4 events, then this turn's user message and tool
    # exchange.
    answer = asyncio.run(example.turn(str(db), "call mom"))
    assert answer == "I remember: buy milk, call mom (7 turns seen)"
    session = asyncio.run(stored(example, db))
    assert session is not None and len(session.events) == 8
    assert session.state == {"last": "call mom", "user:items": ["buy milk", "call mom"]}


@pytest.mark.slow
def test_the_example_continues_in_a_new_process_and_the_cli_shows_it(tmp_path: Path) -> None:
    """examples/adk_agent.py run twice (two processes, one SQLite file), then
    ``agentsession sessions list`` shows the session by its ADK id."""
    db = tmp_path / "sessions.db"
    for text, answer in [
        ("buy milk", "I remember: buy milk (3 turns seen)"),
        ("call mom", "I remember: buy milk, call mom (7 turns seen)"),
    ]:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), str(db), text],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"answer": answer}
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "--url",
            f"sqlite:///{db}",
            "--json",
            "sessions",
            "list",
            "--user",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)
    items = listed["items"] if isinstance(listed, dict) else listed
    assert [(s["external_key"], s["message_count"]) for s in items] == [("notes-1", 8)]


# -- differential: random operation sequences against InMemorySessionService ------------

APPS, USERS, IDS = ("a1", "a 2"), ("u1", "u2"), ("s1", "s2", " s1", "s3\n", None)
VALUES: list[Any] = [0, 1.5, "x", "", None, True, False, [1, None], {"k": {"n": None}}, {}]


def random_delta(rng: random.Random) -> dict[str, Any]:
    """A state delta of 0-3 keys, of every prefix and value kind."""
    prefixes = ("", "app:", "user:", "temp:")
    return {
        rng.choice(prefixes) + rng.choice("abc"): rng.choice(VALUES)
        for _ in range(rng.randint(0, 3))
    }


def normalized(session: Session | None) -> Any:
    """What must agree between the services: ids, state, events, update time."""
    if session is None:
        return None
    return (
        session.app_name,
        session.user_id,
        session.id,
        session.state,
        [e.model_dump(mode="json") for e in session.events],
        session.last_update_time,
    )


async def apply(svc: BaseSessionService, op: tuple[Any, ...], generated: dict[int, str]) -> Any:
    """Run one operation; its normalized result or its error's type name."""
    kind, app, user, *args = op
    try:
        if kind == "create":
            sid, state, n = args
            created = await svc.create_session(
                app_name=app, user_id=user, session_id=sid, state=state
            )
            if sid is None:
                generated[n] = created.id
                return normalized(created.model_copy(update={"id": f"generated-{n}"}))
            return normalized(created)
        if kind == "list":
            listed = await svc.list_sessions(app_name=app, user_id=user)
            names = {v: f"generated-{k}" for k, v in generated.items()}
            return [
                (s.user_id, names.get(s.id, s.id), s.state, s.last_update_time)
                for s in listed.sessions
            ]
        sid = args[0] if isinstance(args[0], str) else generated.get(args[0], "missing")
        if kind == "get":
            config = args[1]
            got = await svc.get_session(app_name=app, user_id=user, session_id=sid, config=config)
            return normalized(
                got
                if got is None or isinstance(args[0], str)
                else got.model_copy(update={"id": "generated"})
            )
        if kind == "delete":
            return await svc.delete_session(app_name=app, user_id=user, session_id=sid)
        if kind == "user_state":
            return await svc.get_user_state(app_name=app, user_id=user)
        session = await svc.get_session(app_name=app, user_id=user, session_id=sid)
        if session is None:  # append to a deleted session: a copy made before
            session = Session(app_name=app, user_id=user, id=sid.strip())
        event: Event = args[1].model_copy(deep=True)
        returned = await svc.append_event(session, event)
        return (normalized(session)[3], returned.model_dump(mode="json"))
    except (AlreadyExistsError, SessionNotFoundError) as exc:
        return type(exc).__name__


def random_op(rng: random.Random, n: int) -> tuple[Any, ...]:
    """One random operation (``n``: its number, naming a generated session id)."""
    app, user = rng.choice(APPS), rng.choice(USERS)
    sid: Any = rng.choice(IDS)
    if sid is None:
        sid = rng.randrange(n + 1)  # a generated id, maybe of a session never made
    kind = rng.choices(
        ["create", "get", "list", "delete", "user_state", "append"], [4, 3, 1, 1, 1, 8]
    )[0]
    if kind == "create":
        return ("create", app, user, None if isinstance(sid, int) else sid, random_delta(rng), n)
    if kind == "get":
        recent, after = rng.randint(0, 4), 2e6 + rng.randint(0, 40)
        config = rng.choice(
            [
                None,
                GetSessionConfig(num_recent_events=recent),
                GetSessionConfig(after_timestamp=after),
                GetSessionConfig(num_recent_events=recent, after_timestamp=after),
            ]
        )
        return ("get", app, user, sid, config)
    if kind == "list":
        return ("list", app, rng.choice([*USERS, None]))
    if kind in ("delete", "user_state"):
        return (kind, app, user, sid)
    text = rng.choice(["hi", "", None])
    event = Event(
        invocation_id=f"inv-{n}",
        author=rng.choice(["user", "agent"]),
        content=types.Content(role="user", parts=[types.Part(text=text)] if text else []),
        actions=EventActions(state_delta=random_delta(rng)),
        timestamp=2e6 + n / 10,
        partial=rng.random() < 0.1 or None,
    )
    return ("append", app, user, sid, event)


@pytest.mark.store_independent
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_random_operations_match_the_in_memory_service(store: SessionStore, seed: int) -> None:
    rng = random.Random(seed)
    ops = [random_op(rng, n) for n in range(250)]

    async def body() -> None:
        ours = AgentSessionService(AsyncSessionManager(SessionManager(store)))
        theirs = InMemorySessionService()
        generated: tuple[dict[int, str], dict[int, str]] = ({}, {})
        for i, op in enumerate(ops):
            results = []
            for svc, ids in ((theirs, generated[0]), (ours, generated[1])):
                platform_time.set_time_provider(_clock_at(i))
                results.append(await apply(svc, op, ids))
            assert results[1] == results[0], (i, op)
        platform_time.reset_time_provider()
        ours.close()

    asyncio.run(body())


def _clock_at(i: int) -> Any:
    """A time provider answering the same instant for operation ``i`` on both services."""
    return lambda: 1_000_000.0 + i
