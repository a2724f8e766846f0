"""Where ``SessionManager`` was defined before the service layer; kept for callers that
import it from here. New code imports from :mod:`agentsession` or
:mod:`agentsession.service`."""

from .service import SessionManager, SweepResult, request_id_context

__all__ = ["SessionManager", "SweepResult", "request_id_context"]
