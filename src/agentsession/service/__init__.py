"""The service layer: the use cases of agentsession over a store port.

:class:`SessionManager` (and its asyncio twin :class:`AsyncSessionManager`) is the one
entry point; every write goes through the write pipeline (a unit of work per call).
The layers are drawn in docs/architecture.md.
"""

from .aio import AsyncSessionManager
from .context import WriteReport, request_id_context, write_report
from .erasure import Erasure
from .lifecycle import SweepResult
from .manager import SessionManager
from .policy import Limits, Policy

__all__ = [
    "AsyncSessionManager",
    "Erasure",
    "Limits",
    "Policy",
    "SessionManager",
    "SweepResult",
    "WriteReport",
    "request_id_context",
    "write_report",
]
