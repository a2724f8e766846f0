""":class:`SessionAPI`: the SessionManager methods the agent engine and the demo call.

Both :class:`~agentsession.service.SessionManager` (the store in this process) and
:class:`~agentsession.client.SessionClient` (the HTTP service) satisfy it structurally,
so the same engine and demo code runs against either. Only the keyword arguments the
callers use are declared; both implementations accept more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from .models import (
    Context,
    Message,
    Page,
    RestoredSession,
    Run,
    RunStatus,
    RunStep,
    Session,
    Summary,
    ToolCall,
    ToolCallStatus,
    WorkingMemory,
)

__all__ = ["SessionAPI"]


class SessionAPI(Protocol):
    """What the agent engine and the demo need from a session store (see the module)."""

    def create_session(
        self, *, user_id: str, agent: str = ..., title: str | None = ...
    ) -> Session: ...

    def get_session(self, *, session_id: str, user_id: str) -> Session: ...

    def close_session(
        self, *, session_id: str, user_id: str, reason: str | None = ...
    ) -> Session: ...

    def restore_session(self, *, session_id: str, user_id: str) -> RestoredSession: ...

    def append_message(
        self, *, session_id: str, user_id: str, message: Mapping[str, Any]
    ) -> Message: ...

    def append_messages(
        self, *, session_id: str, user_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> list[Message]: ...

    def get_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        limit: int | None = ...,
        after: int | None = ...,
        cursor: str | None = ...,
    ) -> Page[Message]: ...

    def get_working_memory(self, *, session_id: str, user_id: str) -> WorkingMemory: ...

    def update_working_memory(
        self, *, session_id: str, user_id: str, patch: Mapping[str, Any] | None = ...
    ) -> WorkingMemory: ...

    def record_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str,
        arguments: Mapping[str, Any] | None = ...,
        result: Any = ...,
        status: ToolCallStatus | str = ...,
        error: str | None = ...,
        started_at: datetime | None = ...,
        ended_at: datetime | None = ...,
        run_id: str | None = ...,
        call_id: str | None = ...,
        provider_call_id: str | None = ...,
    ) -> ToolCall: ...

    def get_tool_history(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str | None = ...,
        after: int | None = ...,
        limit: int | None = ...,
        cursor: str | None = ...,
    ) -> Page[ToolCall]: ...

    def find_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str | None = ...,
        arguments: Mapping[str, Any] | None = ...,
        provider_call_id: str | None = ...,
    ) -> ToolCall | None: ...

    def start_run(
        self,
        *,
        session_id: str,
        user_id: str,
        input: Any = ...,
        metadata: Mapping[str, Any] | None = ...,
        lease_seconds: float | None = ...,
    ) -> Run: ...

    def heartbeat_run(
        self, *, session_id: str, user_id: str, run_id: str, lease_seconds: float | None = ...
    ) -> Run: ...

    def add_run_step(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        kind: str,
        name: str | None = ...,
        input: Any = ...,
        output: Any = ...,
        status: str = ...,
        error: str | None = ...,
        started_at: datetime | None = ...,
        ended_at: datetime | None = ...,
    ) -> RunStep: ...

    def finish_run(
        self,
        *,
        session_id: str,
        user_id: str,
        run_id: str,
        status: RunStatus | str,
        error: str | None = ...,
        output: Any = ...,
        usage: Mapping[str, int] | None = ...,
        model: str | None = ...,
        usage_by_model: Mapping[str, Mapping[str, int]] | None = ...,
    ) -> Run: ...

    def get_run(self, *, session_id: str, user_id: str, run_id: str) -> Run: ...

    def list_runs(
        self,
        *,
        session_id: str,
        user_id: str,
        after: int | None = ...,
        limit: int | None = ...,
        cursor: str | None = ...,
    ) -> Page[Run]: ...

    def build_context(
        self, *, session_id: str, user_id: str, budget_tokens: int, explain: bool = ...
    ) -> Context: ...

    def add_summary(
        self,
        *,
        session_id: str,
        user_id: str,
        text: str,
        from_seq: int,
        to_seq: int,
        author: str | None = ...,
        model: str | None = ...,
    ) -> Summary: ...
