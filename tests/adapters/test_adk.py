"""The Google ADK session service on memory and SQLite: ADK's session-service contract
restated one test per behaviour (named after ADK's own), plus stale writers, racing
appends, appends to deleted sessions, and the module importing without google-adk."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

import pytest

pytest.importorskip("google.adk", reason="google-adk not installed: pip install -e '.[dev]'")

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event, EventActions
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from agentsession import AsyncSessionManager, SessionManager, SessionNotActive, UnsupportedValue
from agentsession.adapters.adk import AgentSessionService
from agentsession.ids import encode_name
from agentsession.stores.base import SessionStore

pytestmark = pytest.mark.store_independent

T = TypeVar("T")
APP = "my_app"


def run(coro: Awaitable[T]) -> T:
    """Run one coroutine to its end on a fresh event loop."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())


@pytest.fixture
def service(store: SessionStore) -> Iterator[AgentSessionService]:
    """The service over an AsyncSessionManager of the store."""
    svc = AgentSessionService(AsyncSessionManager(SessionManager(store)))
    yield svc
    svc.close()


def event(
    author: str = "user",
    text: str | None = "hi",
    *,
    delta: dict[str, Any] | None = None,
    timestamp: float | None = None,
    **fields: Any,
) -> Event:
    """An event with text ``text`` and state delta ``delta``."""
    parts = [types.Part(text=text)] if text is not None else []
    extra: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp}
    return Event(
        invocation_id="inv",
        author=author,
        content=types.Content(role="user" if author == "user" else "model", parts=parts),
        actions=EventActions(state_delta=delta or {}),
        **extra,
        **fields,
    )


async def append(svc: AgentSessionService, session: Session, *events: Event) -> None:
    """Append ``events`` in order."""
    for e in events:
        await svc.append_event(session, e)


async def reload(svc: AgentSessionService, s: Session, **config: Any) -> Session:
    """``s`` read back (it must exist)."""
    got = await svc.get_session(
        app_name=s.app_name,
        user_id=s.user_id,
        session_id=s.id,
        config=GetSessionConfig(**config) if config else None,
    )
    assert got is not None
    return got


def test_get_empty_session(service: AgentSessionService) -> None:
    got = run(service.get_session(app_name=APP, user_id="u", session_id="nope"))
    assert got is None


def test_create_get_session(service: AgentSessionService) -> None:
    async def body() -> None:
        created = await service.create_session(app_name=APP, user_id="u", state={"k": "v"})
        assert created.id and created.events == []
        assert time.time() - 5 < created.last_update_time <= time.time()
        got = await reload(service, created)
        assert got == created  # private marker and last_update_time included
        await service.delete_session(app_name=APP, user_id="u", session_id=created.id)
        assert await service.get_session(app_name=APP, user_id="u", session_id=created.id) is None
        await service.delete_session(app_name=APP, user_id="u", session_id=created.id)  # no-op

    run(body())


def test_create_and_list_sessions(service: AgentSessionService) -> None:
    async def body() -> None:
        ids = [f"s{i}" for i in range(5)]
        for i, sid in enumerate(ids):
            await service.create_session(app_name=APP, user_id="u", session_id=sid, state={"n": i})
        await service.create_session(app_name=APP, user_id="other", session_id="x")
        listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        assert sorted(s.id for s in listed) == ids
        assert all(s.events == [] and s.state["n"] == int(s.id[1:]) for s in listed)

    run(body())


def test_list_sessions_ordered_by_last_update_time(service: AgentSessionService) -> None:
    async def body() -> None:
        a, _b, c = [
            await service.create_session(app_name=APP, user_id="u", session_id=n) for n in "abc"
        ]
        await append(service, a, event(timestamp=c.last_update_time + 10))
        listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        assert [s.id for s in listed] == ["b", "c", "a"]

    run(body())


def test_list_sessions_all_users(service: AgentSessionService) -> None:
    async def body() -> None:
        for user, sid in [("u1", "a"), ("u2", "b"), ("user with spaces", "c")]:
            await service.create_session(app_name=APP, user_id=user, session_id=sid)
        await service.create_session(app_name="other app", user_id="u1", session_id="z")
        listed = (await service.list_sessions(app_name=APP)).sessions
        assert sorted((s.user_id, s.id) for s in listed) == [
            ("u1", "a"),
            ("u2", "b"),
            ("user with spaces", "c"),
        ]

    run(body())


def test_app_state_is_shared_by_all_users_of_app(service: AgentSessionService) -> None:
    async def body() -> None:
        s1 = await service.create_session(app_name=APP, user_id="u1", state={"app:k": 1})
        s2 = await service.create_session(app_name=APP, user_id="u2")
        assert s2.state == {"app:k": 1}
        await append(service, s2, event(delta={"app:k": 2}))
        assert (await reload(service, s1)).state == {"app:k": 2}
        other = await service.create_session(app_name="other", user_id="u1")
        assert other.state == {}

    run(body())


def test_user_state_is_shared_only_by_user_sessions(service: AgentSessionService) -> None:
    async def body() -> None:
        s1 = await service.create_session(app_name=APP, user_id="u1", state={"user:k": 1})
        s2 = await service.create_session(app_name=APP, user_id="u1")
        s3 = await service.create_session(app_name=APP, user_id="u2")
        assert s2.state == {"user:k": 1} and s3.state == {}
        await append(service, s2, event(delta={"user:k": 2}))
        assert (await reload(service, s1)).state == {"user:k": 2}
        assert (await reload(service, s3)).state == {}

    run(body())


def test_session_state_is_not_shared(service: AgentSessionService) -> None:
    async def body() -> None:
        s1 = await service.create_session(app_name=APP, user_id="u", state={"k": 1})
        s2 = await service.create_session(app_name=APP, user_id="u")
        await append(service, s1, event(delta={"j": 2}))
        assert (await reload(service, s1)).state == {"k": 1, "j": 2}
        assert (await reload(service, s2)).state == {}

    run(body())


def test_dict_valued_state_delta_replaces_stored_value(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(
            app_name=APP, user_id="u", state={"profile": {"name": "al", "age": 3}}
        )
        await append(service, s, event(delta={"profile": {"name": "bob"}}))
        assert (await reload(service, s)).state == {"profile": {"name": "bob"}}

    run(body())


def test_none_valued_state_delta_is_stored_not_dropped(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"flag": True})
        await append(service, s, event(delta={"flag": None}))
        assert (await reload(service, s)).state == {"flag": None}

    run(body())


def test_boolean_state_survives_unrelated_state_delta(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"ok": False})
        await append(service, s, event(delta={"other": 1}))
        state = (await reload(service, s)).state
        assert state == {"ok": False, "other": 1} and state["ok"] is False

    run(body())


def test_app_state_dict_valued_delta_replaces_stored_value(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(
            app_name=APP, user_id="u", state={"app:cfg": {"a": 1, "b": 2}}
        )
        await append(service, s, event(delta={"app:cfg": {"a": 9}}))
        assert (await reload(service, s)).state == {"app:cfg": {"a": 9}}

    run(body())


def test_user_state_none_valued_delta_is_stored_not_dropped(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"user:k": 1})
        await append(service, s, event(delta={"user:k": None}))
        assert (await reload(service, s)).state == {"user:k": None}
        assert await service.get_user_state(app_name=APP, user_id="u") == {"k": None}

    run(body())


def test_temp_state_is_not_persisted_in_state_or_events(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"temp:x": 0})
        assert s.state == {}
        await append(service, s, event(delta={"temp:t": 1, "k": 2}))
        assert s.state == {"temp:t": 1, "k": 2}  # the caller's copy sees it
        got = await reload(service, s)
        assert got.state == {"k": 2}
        assert got.events[0].actions.state_delta == {"k": 2}

    run(body())


def test_temp_state_visible_across_sequential_events(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        await append(service, s, event(delta={"temp:step": "one"}))
        await append(service, s, event(delta={"k": 1}))
        assert s.state == {"temp:step": "one", "k": 1}
        assert (await reload(service, s)).state == {"k": 1}

    run(body())


def test_get_session_respects_user_id(service: AgentSessionService) -> None:
    async def body() -> None:
        s1 = await service.create_session(app_name=APP, user_id="u1", session_id="same")
        s2 = await service.create_session(app_name=APP, user_id="u2", session_id="same")
        await append(service, s1, event(text="for u1"))
        assert len((await reload(service, s1)).events) == 1
        assert (await reload(service, s2)).events == []
        await service.delete_session(app_name=APP, user_id="u2", session_id="same")
        assert await service.get_session(app_name=APP, user_id="u1", session_id="same")

    run(body())


def test_create_session_with_existing_id_raises_error(service: AgentSessionService) -> None:
    async def body() -> None:
        await service.create_session(app_name=APP, user_id="u", session_id="dup")
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name=APP, user_id="u", session_id=" dup ")

    run(body())


def test_padded_session_id_reads_and_deletes(service: AgentSessionService) -> None:
    async def body() -> None:
        created = await service.create_session(app_name=APP, user_id="u", session_id="order-42\n")
        assert created.id == "order-42"
        got = await service.get_session(app_name=APP, user_id="u", session_id=" order-42")
        assert got == created
        await service.delete_session(app_name=APP, user_id="u", session_id="order-42\t")
        assert await service.get_session(app_name=APP, user_id="u", session_id="order-42") is None

    run(body())


def test_append_event_bytes(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        blob = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\x00\xff"))
        e = Event(
            invocation_id="i", author="user", content=types.Content(role="user", parts=[blob])
        )
        await append(service, s, e)
        got = await reload(service, s)
        assert got.events == [e]
        part = got.events[0].content.parts[0]  # type: ignore[union-attr,index]
        assert part.inline_data.data == b"\x89PNG\x00\xff"  # type: ignore[union-attr]

    run(body())


def test_append_event_complete(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        call = types.FunctionCall(id="call-1", name="lookup", args={"q": "x", "n": [1, None]})
        e = Event(
            invocation_id="inv-1",
            author="agent",
            branch="root.agent",
            content=types.Content(role="model", parts=[types.Part(function_call=call)]),
            actions=EventActions(
                state_delta={"k": 1},
                artifact_delta={"f.txt": 2},
                transfer_to_agent="other",
                escalate=True,
            ),
            long_running_tool_ids={"call-1"},
            turn_complete=True,
            error_code="E",
            error_message="msg",
            interrupted=False,
            custom_metadata={"a": [1, {"b": None}]},
            usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=3),
            timestamp=1730613600.123456789,
        )
        await append(service, s, e)
        got = await reload(service, s)
        assert got == s
        assert got.events == [e]

    run(body())


def test_append_event_with_requested_tool_confirmations(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        confirmation = ToolConfirmation(hint="sure?", payload={"amount": 5})
        e = event(author="agent")
        e.actions.requested_tool_confirmations = {"call-1": confirmation}
        await append(service, s, e)
        got = await reload(service, s)
        assert got.events[0].actions.requested_tool_confirmations == {"call-1": confirmation}

    run(body())


def test_session_last_update_time_updates_on_event(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        stamp = s.last_update_time + 10
        await append(service, s, event(timestamp=stamp))
        assert s.last_update_time == stamp
        assert (await reload(service, s)).last_update_time == stamp
        listed = (await service.list_sessions(app_name=APP, user_id="u")).sessions
        assert listed[0].last_update_time == stamp

    run(body())


def test_get_session_with_config(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        events = [event(text=str(i), timestamp=1000.0 + i) for i in range(6)]
        await append(service, s, *events)
        assert (await reload(service, s, num_recent_events=0)).events == []
        assert (await reload(service, s, num_recent_events=3)).events == events[3:]
        assert (await reload(service, s, after_timestamp=1002.0)).events == events[2:]
        both = await reload(service, s, num_recent_events=2, after_timestamp=1002.0)
        assert both.events == events[4:]
        assert (await reload(service, s, num_recent_events=10)).events == events

    run(body())


def test_partial_events_are_not_persisted(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        await append(service, s, event(partial=True, delta={"k": 1}))
        got = await reload(service, s)
        assert got.events == [] and got.state == {}

    run(body())


def test_get_user_state_empty(service: AgentSessionService) -> None:
    assert run(service.get_user_state(app_name=APP, user_id="nobody")) == {}


def test_get_user_state_returns_unprefixed_keys(service: AgentSessionService) -> None:
    async def body() -> None:
        await service.create_session(
            app_name=APP, user_id="u", state={"user:a": 1, "app:b": 2, "c": 3, "temp:d": 4}
        )
        assert await service.get_user_state(app_name=APP, user_id="u") == {"a": 1}

    run(body())


def test_get_user_state_reflects_appended_deltas(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"user:a": 1})
        await append(service, s, event(delta={"user:a": {"x": 1}, "user:b": True}))
        assert await service.get_user_state(app_name=APP, user_id="u") == {"a": {"x": 1}, "b": True}

    run(body())


def test_get_user_state_is_scoped_to_user_and_app(service: AgentSessionService) -> None:
    async def body() -> None:
        await service.create_session(app_name=APP, user_id="u1", state={"user:a": 1})
        await service.create_session(app_name="other", user_id="u2", state={"user:a": 2})
        assert await service.get_user_state(app_name=APP, user_id="u2") == {}
        assert await service.get_user_state(app_name="other", user_id="u1") == {}
        assert await service.get_user_state(app_name="other", user_id="u2") == {"a": 2}

    run(body())


def test_get_user_state_outlives_the_session(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u", state={"user:a": 1})
        await service.delete_session(app_name=APP, user_id="u", session_id=s.id)
        assert await service.get_user_state(app_name=APP, user_id="u") == {"a": 1}
        fresh = await service.create_session(app_name=APP, user_id="u")
        assert fresh.state == {"user:a": 1}

    run(body())


def test_get_session_keeps_exact_epoch_across_a_repeated_local_hour(
    service: AgentSessionService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:

        async def body() -> None:
            s = await service.create_session(app_name=APP, user_id="u")
            # 01:00 EDT and 01:30 EST on 2024-11-03: one local hour, twice.
            first, second = event(timestamp=1730613600.0), event(timestamp=1730615400.0)
            await append(service, s, first, second)
            got = await reload(service, s)
            assert [e.timestamp for e in got.events] == [1730613600.0, 1730615400.0]
            assert got.last_update_time == 1730615400.0

        run(body())
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


# -- optimistic locking and deleted sessions ------------------------------------------------


def test_a_stale_writer_gets_stale_session_error(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        stale = await reload(service, s)
        await append(service, s, event(text="first"))
        with pytest.raises(StaleSessionError):
            await append(service, stale, event(text="second"))
        assert [e.content.parts[0].text for e in (await reload(service, s)).events] == ["first"]  # type: ignore[union-attr,index]

    run(body())


def test_of_two_concurrent_appends_on_copies_exactly_one_succeeds(
    service: AgentSessionService,
) -> None:
    async def body() -> None:
        for i in range(8):
            s = await service.create_session(app_name=APP, user_id="u", session_id=f"race-{i}")
            copies = [await reload(service, s), await reload(service, s)]
            results = await asyncio.gather(
                *(service.append_event(c, event(text=f"w{n}")) for n, c in enumerate(copies)),
                return_exceptions=True,
            )
            failed = [r for r in results if isinstance(r, BaseException)]
            assert len(failed) == 1 and isinstance(failed[0], StaleSessionError), results
            assert len((await reload(service, s)).events) == 1

    run(body())


def test_a_copy_of_a_deleted_session_does_not_write_into_one_reusing_its_id(
    service: AgentSessionService,
) -> None:
    async def body() -> None:
        old = await service.create_session(app_name=APP, user_id="u", session_id="s")
        await append(service, old, event(text="old"))
        await service.delete_session(app_name=APP, user_id="u", session_id="s")
        new = await service.create_session(app_name=APP, user_id="u", session_id="s")
        await append(service, new, event(text="new"))  # both now at the same version
        with pytest.raises(StaleSessionError):
            await append(service, old, event(text="leak", delta={"secret": "leak"}))
        got = await reload(service, new)
        assert [e.content.parts[0].text for e in got.events] == ["new"]  # type: ignore[union-attr,index]
        assert got.state == {}

    run(body())


def test_concurrent_appends_on_one_session_object_all_store(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        results = await asyncio.gather(
            *(service.append_event(s, event(text=f"p{n}", delta={f"k{n}": n})) for n in range(4)),
            return_exceptions=True,
        )
        assert not [r for r in results if isinstance(r, BaseException)], results
        got = await reload(service, s)
        assert len(got.events) == 4 and got.state == {f"k{n}": n for n in range(4)}
        assert got == s  # the object saw every append, marker included
        assert not service._locks and not service._holders  # no lock outlives its appends

    run(body())


def test_append_to_a_deleted_session_raises_session_not_found(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        await service.delete_session(app_name=APP, user_id="u", session_id=s.id)
        with pytest.raises(SessionNotFoundError):
            await append(service, s, event())

    run(body())


def test_an_equal_redelivery_is_stored_once(service: AgentSessionService) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        e = event(delta={"n": 1})
        await append(service, s, e)
        await append(service, s, e.model_copy(deep=True))
        twin = event(delta={"n": 1})
        twin.id = e.id  # same id, other timestamp: a distinct event, kept
        await append(service, s, twin)
        assert [x.id for x in (await reload(service, s)).events] == [e.id, e.id]

    run(body())


def test_reads_of_names_and_ids_no_session_can_have_answer_empty(
    service: AgentSessionService,
) -> None:
    async def body() -> None:
        for app, user, sid in [
            (APP, "u", "a\nb"),
            (APP, "u", "x" * 300),
            ("", "u", "s"),
            (APP, "", "s"),
        ]:
            assert await service.get_session(app_name=app, user_id=user, session_id=sid) is None
            await service.delete_session(app_name=app, user_id=user, session_id=sid)
            assert await service.get_user_state(app_name=app, user_id=user) == {}
        assert (await service.list_sessions(app_name="")).sessions == []
        assert (await service.list_sessions(app_name=APP, user_id="")).sessions == []

    run(body())


def test_a_session_written_by_other_means_lists_under_the_decoded_user_id(
    store: SessionStore,
) -> None:
    manager = AsyncSessionManager(SessionManager(store))
    svc = AgentSessionService(manager)

    async def body() -> None:
        owner = encode_name("u 2")
        mine = await manager.create_session(
            user_id=owner, agent=APP, external_key="foreign", admin=True
        )
        await manager.append_messages(
            session_id=mine.session_id, user_id=owner, messages=[{"role": "user", "content": "hi"}]
        )
        listed = (await svc.list_sessions(app_name=APP)).sessions
        assert [(s.user_id, s.id) for s in listed] == [("u 2", "foreign")]
        got = await svc.get_session(app_name=APP, user_id="u 2", session_id="foreign")
        assert got is not None and got.events[0].content.parts[0].text == "hi"  # type: ignore[union-attr,index]

    run(body())
    svc.close()


def test_a_sync_manager_backend_and_a_bad_backend(store: SessionStore) -> None:
    svc = AgentSessionService(SessionManager(store))
    s = run(svc.create_session(app_name=APP, user_id="u", state={"k": 1}))
    assert run(svc.get_session(app_name=APP, user_id="u", session_id=s.id)) == s
    svc.close()
    with pytest.raises(TypeError, match="SessionManager or an AsyncSessionManager"):
        AgentSessionService(object())  # type: ignore[arg-type]


def test_the_adapter_is_not_imported_without_google_adk() -> None:
    """``import agentsession`` and the other adapters need no google-adk."""
    code = (
        "import sys; sys.modules['google.adk'] = None\n"
        "import agentsession, agentsession.adapters.openai_agents, "
        "agentsession.adapters.langchain\n"
        "try:\n    import agentsession.adapters.adk\nexcept ImportError:\n    print('no adk')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no adk"


def test_an_append_to_a_closed_session_is_refused_until_restored(store: SessionStore) -> None:
    manager = AsyncSessionManager(SessionManager(store))
    svc = AgentSessionService(manager)

    async def body() -> None:
        s = await svc.create_session(app_name=APP, user_id="u", session_id="s")
        await append(svc, s, event(text="before"))
        mine = await manager.get_session_by_key(user_id="u", agent=APP, external_key="s")
        await manager.close_session(session_id=mine.session_id, user_id="u")
        with pytest.raises(SessionNotActive):
            await append(svc, s, event(text="closed"))
        restored = await svc.restore_session(app_name=APP, user_id="u", session_id="s")
        assert restored is not None and len(restored.events) == 1
        await append(svc, restored, event(text="after"))
        got = await reload(svc, restored)
        assert [e.content.parts[0].text for e in got.events] == ["before", "after"]  # type: ignore[union-attr,index]
        assert await svc.restore_session(app_name=APP, user_id="u", session_id="none") is None

    run(body())
    svc.close()


def test_tuples_and_sets_come_back_as_lists_and_nan_is_refused(
    service: AgentSessionService,
) -> None:
    async def body() -> None:
        s = await service.create_session(app_name=APP, user_id="u")
        await append(service, s, event(delta={"t": (1, 2), "s": {3}}))
        assert (await reload(service, s)).state == {"t": [1, 2], "s": [3]}
        for bad in (float("nan"), float("inf"), 2**64, "\ud800"):
            with pytest.raises(UnsupportedValue):
                await append(service, s, event(delta={"bad": bad}))
        assert len((await reload(service, s)).events) == 1  # nothing stored

    run(body())
