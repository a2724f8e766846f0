"""Canary strings of every kind a user can store, written through a SessionManager.

The erasure tests write them, erase the user, and look for them where they must not
be: the audit log (free text never goes there), tombstones (nothing of the user), and
after an erasure the store's files (SQLite db/-wal/-shm, Redis AOF, PostgreSQL dump and
heap files).
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, field
from typing import Any

from agentsession import RecordWrite, SessionManager

#: Kinds an admin writes into the user's data, each with an idempotency key (the
#: admin's): their records are the admin's, about the user, and go with the user.
ADMIN_WRITTEN = (
    "admin_title",
    "admin_message",
    "admin_memory",
    "admin_record",
    "admin_summary",
    "admin_tool_result",
    "admin_run_input",
    "admin_step_output",
    "admin_fork_title",
    "admin_shared_memory",
)

#: Kinds of free text: never in the audit log.
FREE_TEXT = (
    "title",
    "external_key",
    "new_title",
    "session_metadata",
    "initial_memory",
    "message_content",
    "message_metadata",
    "message_extra_field",
    "memory",
    "memory_patch",
    "tool_arguments",
    "tool_result",
    "tool_error",
    "run_input",
    "run_metadata",
    "run_output",
    "run_error",
    "step_name",
    "step_input",
    "step_output",
    "step_error",
    "close_reason",
    "expire_reason",
    "record_namespace",
    "record_key",
    "record_data",
    "record_meta",
    "summary_text",
    "summary_author",
    "summary_model",
    "rewound_message",
    "shared_memory",
    "shared_memory_create",
    "shared_memory_append",
    *ADMIN_WRITTEN,
)

#: Kinds kept in the user's ``user`` shared-memory document: erased with the user, but
#: not with one session (the document is the user's, shared by their sessions).
USER_DOCUMENT = (
    "shared_memory",
    "shared_memory_create",
    "shared_memory_append",
    "admin_shared_memory",
)

#: Kinds of identifiers (restricted to A-Z a-z 0-9 . _ : @ + -): they may stand in the
#: live audit log, but not in a tombstone nor anywhere once the user is erased.
IDENTIFIERS = (
    "user_id",
    "agent",
    "tool",
    "call_id",
    "provider_call_id",
    "step_kind",
    "step_status",
    "idempotency_key",
)

#: Kinds stored as bytes: a store may hold them as they are, in base64 (Redis) or in
#: hex (a PostgreSQL dump of ``bytea``), so each form counts as found.
BYTES = ("record_data", "admin_record")


@dataclass
class Canaries:
    """What :func:`write_canaries` stored: kind -> canary text, and where.

    Attributes:
        values: every canary by kind (:data:`FREE_TEXT` and :data:`IDENTIFIERS`).
        user: the owner of every session (itself the ``user_id`` canary).
        session_ids: the sessions written.
        keyed: every keyed write, as ``(caller, scope, idempotency key)``.
    """

    values: dict[str, str]
    user: str
    session_ids: list[str] = field(default_factory=list)
    keyed: list[tuple[str, str, str]] = field(default_factory=list)

    def key(self, caller: str, scope: str) -> str:
        """A new idempotency key for ``caller``'s ``scope`` write (it holds the
        ``idempotency_key`` canary), noted in :attr:`keyed`."""
        key = f"{self.values['idempotency_key']}-{len(self.keyed)}"
        self.keyed.append((caller, scope, key))
        return key

    def free_text(self) -> dict[str, str]:
        """The free-text canaries only."""
        return {k: v for k, v in self.values.items() if k in FREE_TEXT}

    def found_in(self, blob: bytes | str, kinds: dict[str, str] | None = None) -> list[str]:
        """The kinds whose canary occurs in ``blob`` (text, or raw bytes as UTF-8)."""
        data = blob.encode("utf-8") if isinstance(blob, str) else blob
        wanted = self.values if kinds is None else kinds
        return sorted(k for k, v in wanted.items() if any(f in data for f in _forms(k, v)))


def _forms(kind: str, value: str) -> list[bytes]:
    raw = value.encode("utf-8")
    if kind not in BYTES:
        return [raw]
    return [raw, base64.b64encode(raw), raw.hex().encode("ascii")]


def _add(path: str, value: str) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def write_canaries(m: SessionManager, *, admin: str = "root") -> Canaries:
    """Store a canary of every kind, through every write that takes user content, in
    two sessions of a new user: one closed with a reason, one expired with a reason
    and restored. Audited actions covered: created, updated, message appended, memory
    updated, records put, summary added, tool call recorded, run started, step added,
    run finished, rewound, closed, expired, restored. The user's shared-memory document of the
    agent gets a canary through ``update_shared_memory`` and through
    ``shared_memory_ops`` on the create and the append. Then ``admin`` writes into the
    user's data through every keyed write an admin may make for a user
    (:func:`_write_as_admin`)."""
    tag = secrets.token_hex(6)
    v = {kind: f"CANARY-{kind.replace('_', '-')}-{tag}" for kind in FREE_TEXT + IDENTIFIERS}
    user = v["user_id"]
    c = Canaries(values=v, user=user)
    s = m.create_session(
        user_id=user,
        agent=v["agent"],
        title=v["title"],
        metadata={"note": v["session_metadata"]},
        working_memory={"seed": v["initial_memory"]},
        external_key=v["external_key"],
        idempotency_key=c.key(user, "create_session"),
        shared_memory_ops={"user": [_add("/created", v["shared_memory_create"])]},
    )
    kw: dict[str, Any] = {"session_id": s.session_id, "user_id": user}
    c.session_ids.append(s.session_id)
    m.update_session(**kw, title=v["new_title"])
    m.append_messages(
        **kw,
        messages=[
            {
                "role": "user",
                "content": v["message_content"],
                "metadata": {"m": v["message_metadata"]},
                "x_extra": v["message_extra_field"],
            }
        ],
        working_memory_patch={"patched": v["memory_patch"]},
        shared_memory_ops={"user": [_add("/appended", v["shared_memory_append"])]},
    )
    m.update_shared_memory(
        scope="user", agent=v["agent"], user_id=user, ops=[_add("/s", v["shared_memory"])]
    )
    m.update_working_memory(**kw, patch={"goal": v["memory"]})
    record = RecordWrite(
        v["record_namespace"], v["record_key"], v["record_data"].encode(), {"m": v["record_meta"]}
    )
    m.put_records(**kw, records=[record])
    m.add_summary(
        **kw,
        text=v["summary_text"],
        from_seq=1,
        to_seq=1,
        author=v["summary_author"],
        model=v["summary_model"],
    )
    run = m.start_run(**kw, input={"task": v["run_input"]}, metadata={"r": v["run_metadata"]})
    m.record_tool_call(
        **kw,
        tool=v["tool"],
        arguments={"q": v["tool_arguments"]},
        result={"r": v["tool_result"]},
        status="error",
        error=v["tool_error"],
        run_id=run.run_id,
        call_id=v["call_id"],
        provider_call_id=v["provider_call_id"],
    )
    m.add_run_step(
        **kw,
        run_id=run.run_id,
        kind=v["step_kind"],
        name=v["step_name"],
        input={"i": v["step_input"]},
        output={"o": v["step_output"]},
        status=v["step_status"],
        error=v["step_error"],
    )
    m.finish_run(
        **kw,
        run_id=run.run_id,
        status="FAILED",
        error=v["run_error"],
        output={"o": v["run_output"]},
    )
    # A message a rewind hides: kept out of the history, readable by the rewind's number.
    m.append_message(**kw, message={"role": "user", "content": v["rewound_message"]})
    m.rewind_session(**kw, to_seq=1)
    m.close_session(**kw, reason=v["close_reason"])
    other = m.create_session(user_id=user, agent=v["agent"])
    c.session_ids.append(other.session_id)
    m.expire_session(session_id=other.session_id, user_id=user, reason=v["expire_reason"])
    m.restore_session(session_id=other.session_id, user_id=user)
    _write_as_admin(m, c, other.session_id, admin)
    return c


def _write_as_admin(m: SessionManager, c: Canaries, sid: str, admin: str) -> None:
    """``admin`` writes canaries into the user's session ``sid``, a fork of it and the
    user's shared-memory document, each write with an idempotency key of its own (every
    keyed session write, fork and shared-memory write an admin may make for a user)."""
    v = c.values
    kw: dict[str, Any] = {"session_id": sid, "user_id": admin, "admin": True}

    def key(scope: str) -> str:
        return c.key(admin, scope)

    m.update_session(**kw, title=v["admin_title"], idempotency_key=key("update_session"))
    m.append_messages(
        **kw,
        messages=[{"role": "user", "content": v["admin_message"]}] * 3,
        idempotency_key=key("append_messages"),
    )
    m.update_working_memory(
        **kw, patch={"admin": v["admin_memory"]}, idempotency_key=key("update_working_memory")
    )
    record = RecordWrite("admin", "k", v["admin_record"].encode(), {})
    m.put_records(**kw, records=[record], idempotency_key=key("put_records"))
    m.add_summary(
        **kw, text=v["admin_summary"], from_seq=1, to_seq=1, idempotency_key=key("add_summary")
    )
    run = m.start_run(**kw, input={"a": v["admin_run_input"]}, idempotency_key=key("start_run"))
    m.heartbeat_run(
        **kw, run_id=run.run_id, lease_seconds=600, idempotency_key=key("heartbeat_run")
    )
    m.record_tool_call(
        **kw,
        tool=v["tool"],
        arguments={},
        result={"r": v["admin_tool_result"]},
        run_id=run.run_id,
        idempotency_key=key("record_tool_call"),
    )
    m.add_run_step(
        **kw,
        run_id=run.run_id,
        kind="llm",
        output={"o": v["admin_step_output"]},
        idempotency_key=key("add_run_step"),
    )
    m.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED", idempotency_key=key("finish_run"))
    fork = m.fork_session(**kw, title=v["admin_fork_title"], idempotency_key=key("fork_session"))
    c.session_ids.append(fork.session_id)
    m.pop_message(**kw, idempotency_key=key("pop_message"))
    m.truncate_messages(**kw, after_seq=1, idempotency_key=key("truncate_messages"))
    m.rewind_session(**kw, to_seq=0, idempotency_key=key("rewind_session"))
    m.delete_records(**kw, namespace="admin", idempotency_key=key("delete_records"))
    m.expire_session(**kw)  # takes no idempotency key, nor does restore
    m.restore_session(**kw)
    m.close_session(**kw, idempotency_key=key("close_session"))
    m.update_shared_memory(
        scope="user",
        agent=v["agent"],
        user_id=admin,
        target_user_id=c.user,
        admin=True,
        ops=[_add("/admin", v["admin_shared_memory"])],
        idempotency_key=key("update_shared_memory"),
    )
