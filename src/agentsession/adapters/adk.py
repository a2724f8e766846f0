"""Google ADK's session service over agentsession: :class:`AgentSessionService`.

A drop-in for ADK's ``DatabaseSessionService`` / ``InMemorySessionService``; the switch is
the import and the constructor::

    from agentsession.adapters.adk import AgentSessionService
    runner = Runner(app_name="shop", agent=agent,
                    session_service=AgentSessionService(AsyncSessionManager.from_url(url)))

Mapping (docs/adapters.md has the table and the pitfalls):

* ``app_name`` is the agent and ``user_id`` the owner (both through
  :func:`~agentsession.ids.encode_name`, so any string fits); the ADK ``session_id``
  (stripped of surrounding white space; a blank one becomes a new uuid4 hex) is the
  session's external key. A second session with one id raises ``AlreadyExistsError``.
* Session state (keys without a prefix) is the working memory's ``adk.state``, written
  with JSON Patch ``add`` ops: a value replaces the stored one whole (a dict is not
  merged) and ``None`` is stored. ``adk.last_update_time`` is the newest event's own
  ``timestamp`` (a JSON number, never a datetime, so it comes back to the bit).
  ``app:`` and ``user:`` state live in the shared memory of the agent (``app`` scope)
  and of the user and agent (``user`` scope), written in the transaction of the event
  that changes them, and are merged back under their prefixes by every read.
  ``temp:`` state is applied to the caller's ``Session`` only: it is stripped from the
  stored event and never stored.
* Each non-partial event is one message: the event whole under ``event``
  (``model_dump(mode="json", exclude_none=True)``, so it reads back equal), beside
  ``role`` (``tool`` for function responses, ``user`` for the user's own words, else
  ``assistant``), ``content`` (its text), ``tool_calls`` (its function calls) and
  ``tool_call_id`` (its first function response's id), for agentsession's viewer and
  windows. The idempotency key is a hash of the session and the canonical event JSON:
  an equal re-delivery within the store's ``idempotency_retention_seconds`` is
  answered once, as ``InMemorySessionService`` does (a later one is stored again).
* Names no session can have (an empty app name or user id, an id over 256 characters
  or with control characters) read as missing: ``get_session`` None,
  ``delete_session`` a no-op, ``list_sessions`` empty, ``get_user_state`` ``{}``;
  ``create_session`` refuses them with ``ValidationError``.
* Ours, not ADK's: :meth:`AgentSessionService.restore_session` re-opens a session that
  agentsession's lifecycle closed or expired (an append to one raises
  ``SessionNotActive``).
* Optimistic locking: a ``Session`` this service hands out carries our session id and
  its version in ``_storage_update_marker`` (``"<session_id>:<version>"``), and an
  append passes the version as ``expected_version``: a stale copy raises
  ``StaleSessionError``, and so does a copy of a deleted session whose id a new session
  took. Exactly one of two racing copies wins; appends on one ``Session`` object are
  serialized (one ``asyncio.Lock`` per session id in this service), so concurrent
  appends on it all store, as ADK's own services do. A ``Session`` without a marker
  (built by hand) appends unchecked.

Backends: a :class:`~agentsession.AsyncSessionManager` (the main path, share one per
process) or a :class:`~agentsession.SessionManager` (wrapped into an
``AsyncSessionManager`` of the service's own). Not the HTTP client: an ADK session
service serves every user of an app (``user_id`` per call, ``list_sessions`` across
users) and writes ``app:`` state that all users share, which needs an admin principal; a
client acts as its API key's one user, so half the interface could not work over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events import Event
from google.adk.platform import time as platform_time
from google.adk.sessions import BaseSessionService, Session, State
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.genai import types
from pydantic_core import to_jsonable_python
from typing_extensions import override

from ..errors import SessionExists, SessionNotFound, ValidationError, VersionConflict
from ..ids import decode_name, encode_name
from ..models import Message, Role
from ..models import Session as StoredSession
from ..service import AsyncSessionManager, SessionManager
from ..service.context import write_report

__all__ = ["AgentSessionService", "event_of_message", "message_of_event"]

#: The working-memory key the adapter keeps its document under.
_NS = "adk"
#: The caller named on reads that span users (the service is trusted: admin).
_SERVICE_USER = "agentsession-adk"
#: Re-reads of a session that changed while it was read, before answering the last.
_READ_TRIES = 3


class AgentSessionService(BaseSessionService):
    """An ADK session service stored in agentsession (see the module docstring).

    Args:
        backend: an AsyncSessionManager (share one per process), or a SessionManager
            (wrapped into an AsyncSessionManager of this service's own, with its own
            worker threads; :meth:`close` lets them go). The caller owns it.

    Raises:
        TypeError: ``backend`` is neither.
    """

    def __init__(self, backend: SessionManager | AsyncSessionManager) -> None:
        if isinstance(backend, SessionManager):
            self._owned: AsyncSessionManager | None = AsyncSessionManager(backend)
            self._manager = self._owned
        elif isinstance(backend, AsyncSessionManager):
            self._owned, self._manager = None, backend
        else:
            raise TypeError(
                "backend must be a SessionManager or an AsyncSessionManager (an ADK "
                f"session service serves every user of an app), not {type(backend).__name__}"
            )
        # One lock per (app, user, session id) with its holders and waiters counted:
        # an entry goes when its count drops to 0, so the dicts stay as small as the
        # appends in flight.
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._holders: Counter[tuple[str, str, str]] = Counter()

    def close(self) -> None:
        """Let go of the worker threads started around a sync manager; the manager stays
        open (its caller owns it) and the service stays usable."""
        if self._owned is not None:
            self._owned.stop_threads()

    # -- BaseSessionService ----------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session with ``state`` (its ``app:`` / ``user:`` keys go to the shared
        scopes, ``temp:`` keys are dropped), stamped with the current time.

        Args:
            app_name: the app; user_id: the owner (any non-empty strings).
            state: the initial state, prefixed keys included (JSON values); None = empty.
            session_id: the caller's id; None or blank = a new uuid4 hex.

        Returns:
            The session with merged state, no events, and its version as marker.

        Raises:
            AlreadyExistsError: this user has a session with this id in this app.
            agentsession.ValidationError: an empty app name or user id, or an id the
                store refuses (over 256 characters, control characters).
        """
        key = (session_id or "").strip() or uuid.uuid4().hex
        deltas = _split_delta(to_jsonable_python(state or {}))
        now = platform_time.get_time()  # as ADK's own services stamp a new session
        document = {"user_id": user_id, "state": deltas["session"], "last_update_time": now}
        shared = _shared_ops(deltas)
        try:
            stored = await self._manager.create_session(
                user_id=encode_name(user_id),
                agent=encode_name(app_name),
                external_key=key,
                working_memory={_NS: document},
                shared_memory_ops=shared or None,
                admin=True,
            )
        except SessionExists as exc:
            raise AlreadyExistsError(f"Session with id {key} already exists.") from exc
        scoped = await self._scoped_state(app_name, user_id)
        return _session(app_name, user_id, key, document, scoped, [], _marker(stored))

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with merged state and its events, oldest first.

        Args:
            app_name: the app; user_id: the session's owner.
            session_id: stripped of surrounding white space.
            config: ``num_recent_events`` = only the newest k events (0 = none);
                ``after_timestamp`` = the newest events with ``timestamp >=`` it (back to
                the first older one); both = the newest k, then that cut.

        Returns:
            The session (``state`` merged with its ``app:`` / ``user:`` state, the
            marker of the version read), or None when there is none: missing, deleted,
            or a name or id no session can have (empty, over 256 characters, control
            characters), as ADK's own services answer.

        Raises:
            agentsession.AgentSessionError: as the store raises (unavailable...).
        """
        stored = await self._find(app_name, user_id, session_id)
        if stored is None:
            return None
        owner = stored.user_id
        for attempt in range(_READ_TRIES):
            try:
                memory = await self._manager.get_working_memory(
                    session_id=stored.session_id, user_id=owner
                )
                events = await self._events(stored.session_id, owner, config)
                again = await self._manager.get_working_memory(
                    session_id=stored.session_id, user_id=owner
                )
            except SessionNotFound:
                return None
            if again.session_version == memory.session_version or attempt == _READ_TRIES - 1:
                break  # events and state of one version (else: an append came between)
        scoped = await self._scoped_state(app_name, user_id)
        document = _document(memory.data, stored)
        key = session_id.strip()  # the external key it was found by
        marker = _marker(stored, memory.session_version)
        return _session(app_name, user_id, key, document, scoped, events, marker)

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions of a user, or of every user.

        Args:
            app_name: the app; user_id: the owner, None = every user.

        Returns:
            The sessions without events, each with merged state and a marker, oldest
            ``last_update_time`` first (ties: by user id, then session id); empty for
            a name no session can have (an empty app name or user id). A session filed
            under an owner name that is not an encoded one lists under that name as it
            is.
        """
        if not app_name or user_id == "":
            return ListSessionsResponse()  # a name no session can have
        agent = encode_name(app_name)
        sessions: list[Session] = []
        scoped: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        while True:
            page = await self._manager.list_sessions(
                user_id=encode_name(user_id) if user_id is not None else _SERVICE_USER,
                agent=agent,
                cursor=cursor,
                all_users=user_id is None,
                admin=True,
                limit=self._manager.manager.limits.max_page_size,
            )
            for stored in page.items:
                if stored.external_key is None:
                    continue  # not an ADK session: written by other means
                try:
                    memory = await self._manager.get_working_memory(
                        session_id=stored.session_id, user_id=stored.user_id
                    )
                except SessionNotFound:
                    continue  # deleted while listed
                document = _document(memory.data, stored)
                owner = str(document.get("user_id", user_id or _decoded(stored.user_id)))
                if owner not in scoped:
                    scoped[owner] = await self._scoped_state(app_name, owner)
                marker = _marker(stored, memory.session_version)
                sessions.append(
                    _session(
                        app_name, owner, stored.external_key, document, scoped[owner], [], marker
                    )
                )
            cursor = page.next_cursor
            if cursor is None:
                break
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session for good (a missing one, or a name or id no session can
        have, is a no-op).

        Args:
            app_name: the app; user_id: the owner; session_id: stripped of surrounding
                white space.
        """
        stored = await self._find(app_name, user_id, session_id)
        if stored is None:
            return
        with contextlib.suppress(SessionNotFound):  # deleted concurrently: the same
            await self._manager.delete_session(session_id=stored.session_id, user_id=stored.user_id)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's ``user:`` state in this app.

        Args:
            app_name: the app; user_id: the user.

        Returns:
            Its keys without the prefix, ``{}`` when none was written (or for an empty
            app name or user id).
        """
        if not app_name or not user_id:
            return {}  # a name no user can have
        doc = await self._manager.get_shared_memory(
            scope="user", agent=encode_name(app_name), user_id=encode_name(user_id)
        )
        return dict(doc.data)

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` and its state delta in one transaction, then apply both to
        ``session`` (a partial event is returned unstored; ``temp:`` state is applied
        to ``session`` only). Appends on one ``session`` object run one at a time.

        Args:
            session: a session this service handed out (its marker is checked), or one
                built by hand (no marker: unchecked); updated in place.
            event: the event; an equal re-delivery within the store's
                ``idempotency_retention_seconds`` is stored once.

        Returns:
            The event, its ``temp:`` delta stripped.

        Raises:
            StaleSessionError: ``session`` is an older copy than the stored session, or a
                copy of a deleted session whose id a new session took.
            SessionNotFoundError: the session does not exist (deleted).
            agentsession.SessionNotActive: the session was closed or expired (by
                agentsession's lifecycle, not by ADK); :meth:`restore_session` re-opens it.
            agentsession.UnsupportedValue: the event or its state delta holds a value JSON
                cannot keep exactly (NaN, infinity, an int over 64 bits, a lone
                surrogate).
            agentsession.PayloadTooLarge: the event is over ``limits.max_message_bytes``
                (or a state document over its limit).
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        async with self._session_lock(session):  # the marker is read and set under it
            stored = await self._find(session.app_name, session.user_id, session.id)
            if stored is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            expected = _expected_version(session, stored)
            message = message_of_event(event)
            delta = _split_delta(to_jsonable_python(event.actions.state_delta or {}))
            ops = [_add(("state", k), v) for k, v in delta["session"].items()]
            ops.append(_add(("last_update_time",), event.timestamp))
            try:
                with write_report() as report:
                    await self._manager.append_messages(
                        session_id=stored.session_id,
                        user_id=stored.user_id,
                        messages=[message],
                        working_memory_ops=ops,
                        shared_memory_ops=_shared_ops(delta) or None,
                        expected_version=expected,
                        admin=True,
                        idempotency_key=_idempotency_key(stored.session_id, message),
                    )
            except VersionConflict as exc:
                raise StaleSessionError(
                    f"Session {session.id} changed since this copy was read (version "
                    f"{exc.current_version}, this copy {expected}); read it again."
                ) from exc
            except SessionNotFound as exc:
                raise SessionNotFoundError(f"Session {session.id} not found.") from exc
            if report.replayed:
                return event  # an equal re-delivery: stored and applied the first time
            session.last_update_time = event.timestamp
            session._storage_update_marker = _marker(stored, report.session_version)
            return self._commit_event_to_session(session, event)

    async def restore_session(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> Session | None:
        """Re-open a session agentsession's lifecycle closed, or expired within
        ``policy.expired_restore_window_seconds``, so appends go on (ours: not in ADK's
        interface, whose own services never close a session). An active one stays as it
        is. A tool call the close left unanswered gets a synthetic result, which reads
        back as a text event of author ``model``.

        Args:
            app_name: the app; user_id: the owner; session_id: stripped of surrounding
                white space.

        Returns:
            The session read again (its marker current), or None when there is none.

        Raises:
            agentsession.IllegalTransition: EXPIRED past the restore window.
        """
        stored = await self._find(app_name, user_id, session_id)
        if stored is None:
            return None
        try:
            await self._manager.restore_session(
                session_id=stored.session_id, user_id=stored.user_id, message_limit=1, admin=True
            )
        except SessionNotFound:
            return None
        return await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id)

    async def put_state(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        state: Mapping[str, Any],
        last_update_time: float,
    ) -> bool:
        """Make a session's merged state ``state`` and its ``last_update_time`` this
        one, in one transaction (not in ADK's interface: for imports). Keys without a
        prefix replace the session state whole; ``app:`` / ``user:`` keys are set in
        the shared scopes (others there stay); ``temp:`` keys are dropped.

        Args:
            app_name: the app; user_id: the owner; session_id: the ADK id.
            state: the merged state wanted, prefixed keys included (JSON values).
            last_update_time: seconds since the epoch, stored as given.

        Returns:
            True when written; False when the session does not exist (nothing written).

        Raises:
            agentsession.ValidationError / PayloadTooLarge: a state the store refuses.
        """
        stored = await self._find(app_name, user_id, session_id)
        if stored is None:
            return False
        deltas = _split_delta(to_jsonable_python(dict(state)))
        ops = [_add(("state",), deltas["session"]), _add(("last_update_time",), last_update_time)]
        try:
            await self._manager.update_working_memory(
                session_id=stored.session_id,
                user_id=stored.user_id,
                ops=ops,
                shared_memory_ops=_shared_ops(deltas) or None,
                admin=True,
            )
        except SessionNotFound:
            return False
        return True

    # -- helpers ---------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _session_lock(self, session: Session) -> AsyncIterator[None]:
        """Hold the lock of ``session``'s (app, user, id) for the block."""
        key = (session.app_name, session.user_id, session.id.strip())
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._holders[key] -= 1
            if self._holders[key] == 0:
                del self._holders[key], self._locks[key]

    async def _find(self, app_name: str, user_id: str, session_id: str) -> StoredSession | None:
        """Our session behind an ADK id (stripped), or None (also for names and ids no
        session can have: empty, over 256 characters, control characters)."""
        key = session_id.strip() if session_id else session_id
        if not key or not app_name or not user_id:
            return None
        try:
            return await self._manager.get_session_by_key(
                user_id=encode_name(user_id), agent=encode_name(app_name), external_key=key
            )
        except (SessionNotFound, ValidationError):
            return None

    async def _scoped_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The ``app:`` and ``user:`` state of a user of an app, prefixed."""
        agent, owner = encode_name(app_name), encode_name(user_id)
        app = await self._manager.get_shared_memory(
            scope="app", agent=agent, user_id=owner, admin=True
        )
        user = await self._manager.get_shared_memory(scope="user", agent=agent, user_id=owner)
        return {State.APP_PREFIX + k: v for k, v in app.data.items()} | {
            State.USER_PREFIX + k: v for k, v in user.data.items()
        }

    async def _events(self, sid: str, owner: str, config: GetSessionConfig | None) -> list[Event]:
        """The events a ``config`` selects, oldest first: pages walked backwards from
        the newest, up to ``num_recent_events``, stopping at the first event older
        than ``after_timestamp``."""
        count = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        newest_first: list[Event] = []
        cursor: str | None = None
        page_size = self._manager.manager.limits.max_page_size
        while count is None or len(newest_first) < count:
            size = page_size if count is None else min(count - len(newest_first), page_size)
            page = await self._manager.get_messages(
                session_id=sid, user_id=owner, limit=size, cursor=cursor, align_tool_calls=False
            )
            for message in reversed(page.items):
                event = event_of_message(message)
                if after is not None and event.timestamp < after:
                    return newest_first[::-1]
                newest_first.append(event)
            cursor = page.next_cursor
            if cursor is None:
                break
        return newest_first[::-1]


def message_of_event(event: Event) -> dict[str, Any]:
    """The message that stores one ADK event.

    Args:
        event: a (non-partial) ADK event.

    Returns:
        ``{"role", "event": <the event's JSON>}`` plus ``content`` (its text parts
        joined by newlines, when it has any), ``tool_calls`` (one chat-completions call
        per function call part, arguments as JSON text) and ``tool_call_id`` (its first
        function response's id): a message dict for ``append_messages``.
    """
    parts = (event.content.parts if event.content is not None else None) or []
    texts = [p.text for p in parts if p.text is not None and not p.thought]
    calls = [p.function_call for p in parts if p.function_call is not None]
    responses = [p.function_response for p in parts if p.function_response is not None]
    role = Role.TOOL if responses else Role.USER if event.author == "user" else Role.ASSISTANT
    message: dict[str, Any] = {"role": role.value}
    if texts:
        message["content"] = "\n".join(texts)
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id or "",
                "type": "function",
                "function": {"name": c.name or "", "arguments": json.dumps(c.args or {})},
            }
            for c in calls
        ]
    if responses and responses[0].id:
        message["tool_call_id"] = responses[0].id
    message["event"] = event.model_dump(mode="json", exclude_none=True)
    return message


def event_of_message(message: Message) -> Event:
    """The event a message stores.

    Args:
        message: a stored message.

    Returns:
        The event :func:`message_of_event` stored, equal to the one appended. A message
        appended by other means (no ``event``) becomes a text event: author ``user``
        for a user message, else ``model``, stamped with its ``created_at``.

    Raises:
        pydantic.ValidationError: an ``event`` member that is not an ADK event.
    """
    stored = message.payload().get("event")
    if isinstance(stored, Mapping):
        return Event.model_validate(stored)
    user = message.role is Role.USER
    text = message.content if isinstance(message.content, str) else None
    return Event(
        id=message.message_id,
        invocation_id="",
        author="user" if user else "model",
        content=types.Content(
            role="user" if user else "model",
            parts=[types.Part(text=text)] if text is not None else [],
        ),
        timestamp=message.created_at.timestamp(),
    )


def _split_delta(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A state (delta) by scope: ``app`` / ``user`` (prefix removed) and ``session``;
    ``temp:`` keys dropped."""
    deltas: dict[str, dict[str, Any]] = {"app": {}, "user": {}, "session": {}}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            deltas["app"][key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            deltas["user"][key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            deltas["session"][key] = value
    return deltas


def _pointer(*keys: str) -> str:
    """An RFC 6901 JSON Pointer to ``keys``."""
    return "".join("/" + k.replace("~", "~0").replace("/", "~1") for k in keys)


def _add(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A JSON Patch op that sets the adapter document's member at ``path`` to ``value``
    (a whole-value replace; ``None`` is stored as null)."""
    return {"op": "add", "path": _pointer(_NS, *path), "value": value}


def _shared_ops(deltas: Mapping[str, Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The shared-memory ops of a split delta: ``{"app": [...], "user": [...]}``, scopes
    without changes left out."""
    return {
        scope: [{"op": "add", "path": _pointer(k), "value": v} for k, v in deltas[scope].items()]
        for scope in ("app", "user")
        if deltas[scope]
    }


def _idempotency_key(sid: str, message: Mapping[str, Any]) -> str:
    """``adk:`` + SHA-256 of the session id and the canonical event JSON."""
    canonical = json.dumps(message["event"], sort_keys=True, separators=(",", ":"))
    return "adk:" + hashlib.sha256(f"{sid}\n{canonical}".encode()).hexdigest()


def _marker(stored: StoredSession, version: int | None = None) -> str | None:
    """The ``_storage_update_marker`` of ``stored`` at ``version`` (default: its own):
    ``"<our session id>:<version>"``, so a copy of a deleted session never matches a new
    session that took its ADK id."""
    version = stored.version if version is None else version
    return None if version is None else f"{stored.session_id}:{version}"


def _expected_version(session: Session, stored: StoredSession) -> int | None:
    """The ``expected_version`` of an append of ``session`` (None: no marker, unchecked).

    Raises:
        StaleSessionError: the marker is of another session (one deleted since, whose
            id ``stored`` took) or is not one this service writes.
    """
    marker = session._storage_update_marker
    if marker is None:
        return None
    owner, _, version = marker.rpartition(":")
    if owner != stored.session_id or not version.isdigit():
        raise StaleSessionError(
            f"Session {session.id} is a copy of another session (deleted since, or not "
            "read through this service); read it again."
        )
    return int(version)


def _decoded(owner: str) -> str:
    """The ADK user id behind our owner name (a hashed name, whose text is not in it,
    as it is)."""
    try:
        return decode_name(owner)
    except ValidationError:
        return owner


def _document(data: Mapping[str, Any], stored: StoredSession) -> dict[str, Any]:
    """The adapter's document in a working memory; for a session written by other
    means, an empty state stamped with the session's last update."""
    document = data.get(_NS)
    if isinstance(document, dict):
        return document
    return {"state": {}, "last_update_time": stored.updated_at.timestamp()}


def _session(
    app_name: str,
    user_id: str,
    key: str,
    document: Mapping[str, Any],
    scoped: Mapping[str, Any],
    events: list[Event],
    marker: str | None,
) -> Session:
    """An ADK ``Session`` of the adapter's document, scoped state merged in."""
    session = Session(
        id=key,
        app_name=app_name,
        user_id=user_id,
        state=dict(document.get("state") or {}) | dict(scoped),
        events=events,
        last_update_time=float(document.get("last_update_time") or 0.0),
    )
    session._storage_update_marker = marker
    return session
