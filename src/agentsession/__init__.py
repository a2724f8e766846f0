"""agentsession: durable sessions for AI agents.

A session is more than its messages: working memory (goal, what is done, errors, next
action), the tool calls that really ran, and the runs with their steps. Every change goes
through :class:`SessionManager`, over a store chosen by URL::

    from agentsession import SessionManager

    with SessionManager.from_url("sqlite:///sessions.db", auto_migrate=True) as sm:
        s = sm.create_session(user_id="alice", agent="coding")
        sm.append_message(session_id=s.session_id, user_id="alice",
                          message={"role": "user", "content": "fix the start-up error"})
"""

from .errors import (
    AgentSessionError,
    Conflict,
    ContextBudgetTooSmall,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    NotFound,
    PatchConflict,
    PayloadTooLarge,
    RecordNotFound,
    RunAlreadyRunning,
    RunLeaseExpired,
    RunNotFound,
    RunNotRunning,
    SchemaOutOfDate,
    SessionExists,
    SessionNotActive,
    SessionNotFound,
    StoreBusy,
    StoreError,
    ToolCallExists,
    UnsupportedValue,
    ValidationError,
    VersionConflict,
)
from .models import (
    AuditEvent,
    Context,
    DeleteRecordsResult,
    Message,
    Page,
    PutRecordsResult,
    Record,
    RecordWrite,
    RestoredSession,
    Role,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    SharedMemory,
    Summary,
    ToolCall,
    ToolCallStatus,
    TruncateResult,
    WorkingMemory,
)
from .principal import Principal
from .service import (
    AsyncSessionManager,
    Erasure,
    Limits,
    Policy,
    SessionManager,
    SweepResult,
    request_id_context,
)
from .tokens import Tokenizer

__version__ = "0.1.0"

__all__ = [
    "AgentSessionError",
    "AsyncSessionManager",
    "AuditEvent",
    "Conflict",
    "Context",
    "ContextBudgetTooSmall",
    "DeleteRecordsResult",
    "Erasure",
    "Forbidden",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "Limits",
    "Message",
    "NotFound",
    "Page",
    "PatchConflict",
    "PayloadTooLarge",
    "Policy",
    "Principal",
    "PutRecordsResult",
    "Record",
    "RecordNotFound",
    "RecordWrite",
    "RestoredSession",
    "Role",
    "Run",
    "RunAlreadyRunning",
    "RunLeaseExpired",
    "RunNotFound",
    "RunNotRunning",
    "RunStatus",
    "RunStep",
    "SchemaOutOfDate",
    "Session",
    "SessionExists",
    "SessionManager",
    "SessionNotActive",
    "SessionNotFound",
    "SessionStatus",
    "SharedMemory",
    "StoreBusy",
    "StoreError",
    "Summary",
    "SweepResult",
    "Tokenizer",
    "ToolCall",
    "ToolCallExists",
    "ToolCallStatus",
    "TruncateResult",
    "UnsupportedValue",
    "ValidationError",
    "VersionConflict",
    "WorkingMemory",
    "__version__",
    "request_id_context",
]
