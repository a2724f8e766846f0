"""Who a call acts as: the principal, and the ownership rule.

The caller of a :class:`~agentsession.service.SessionManager` method is its principal
(``user_id=`` and ``admin=`` keywords, or the API key of an HTTP request); the owner of a
session is ``session.user_id``. A principal may act on a session it owns, and an admin
principal on any session (docs/semantics.md, "Ownership").

A principal may also be limited to some agents (an API key made with ``--agent``):
a session of another agent is then reported exactly like another user's, and every
listing reads only the allowed agents' sessions (docs/security.md, "Keys limited to
agents"). The service builds its principals from ``user_id=``/``admin=``, so the limit
travels with the call in a context variable (:func:`limited_to_agents`), set once by
whoever authenticated the caller (the HTTP service for every request).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal

from .errors import Forbidden

__all__ = ["SCOPES", "Principal", "Scope", "allowed_agents", "limit_agents", "limited_to_agents"]

#: What a key may do: ``read`` only reads, ``write`` reads and writes.
Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")

#: The agents the current call may touch (None: every agent); see limited_to_agents.
_AGENTS: ContextVar[frozenset[str] | None] = ContextVar("agentsession_agents", default=None)


def allowed_agents() -> frozenset[str] | None:
    """The agents the current call is limited to (None: not limited)."""
    return _AGENTS.get()


def limit_agents(agents: Iterable[str] | None) -> None:
    """Limit the rest of the current context (a request's task, and the threads it
    hands calls to with a copy of its context) to ``agents`` (None: no limit)."""
    _AGENTS.set(None if agents is None else frozenset(agents))


@contextmanager
def limited_to_agents(agents: Iterable[str] | None) -> Iterator[None]:
    """Within the block, every :class:`~agentsession.service.SessionManager` call acts
    as a principal limited to ``agents`` (None: no limit): sessions of other agents
    are not found, creating one is :class:`~agentsession.errors.Forbidden`, listings
    read only these agents' sessions."""
    token = _AGENTS.set(None if agents is None else frozenset(agents))
    try:
        yield
    finally:
        _AGENTS.reset(token)


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a call.

    Attributes:
        user_id: the caller's user id (1-128 chars of ``A-Za-z0-9._:@+-``).
        admin: a trusted caller that may act on every user's sessions.
        scope: ``write`` (default) may call every operation; ``read`` only the
            operations that change nothing (docs/security.md, "Scopes").
        agents: the only agents whose sessions and shared documents it may touch;
            None (default: the limit of the current context, see
            :func:`limited_to_agents`) for every agent.
    """

    user_id: str
    admin: bool = False
    scope: Scope = "write"
    agents: frozenset[str] | None = field(default_factory=allowed_agents)

    def may_act_for(self, owner: str) -> bool:
        """Whether this principal may act on what ``owner`` (a user id) owns: its own
        things, or anyone's as an admin. Another user's session is reported exactly like a
        missing one, never as forbidden."""
        return self.admin or owner == self.user_id

    def may_see(self, owner: str, agent: str) -> bool:
        """Whether this principal may act on a session of ``owner`` and ``agent``: as
        :meth:`may_act_for`, and the agent one it is limited to. Anything else is
        reported exactly like a missing session."""
        return self.may_act_for(owner) and (self.agents is None or agent in self.agents)

    def check_agent(self, agent: str) -> None:
        """Refuse to create or touch something of ``agent`` outside this principal's agents.

        Raises:
            Forbidden: the principal is limited to other agents.
        """
        if self.agents is not None and agent not in self.agents:
            raise Forbidden(f"this key is limited to the agents {_named(self.agents)}")

    def check_every_agent(self, what: str) -> None:
        """Refuse ``what`` (a change to what every agent's sessions share: the user's
        budget, the erasure of the user's data) to a principal limited to agents.

        Raises:
            Forbidden: the principal is limited to some agents.
        """
        if self.agents is not None:
            raise Forbidden(f"{what} reaches every agent: this key is limited to some")

    def agent_filter(self, agent: str | None) -> str | None:
        """The agent filter a listing, count, search or usage read runs with: ``agent``
        as given when the principal may read every agent; else the named agent if it
        is one of the principal's, or its only agent when none is named.

        Raises:
            Forbidden: a named agent outside the principal's agents, or no agent named
                by a principal limited to several (name one per call).
        """
        if self.agents is None:
            return agent
        if agent is None:
            if len(self.agents) != 1:
                raise Forbidden(
                    f"this key is limited to the agents {_named(self.agents)}: name one (agent=)"
                )
            return next(iter(self.agents))
        self.check_agent(agent)
        return agent


def _named(agents: frozenset[str]) -> str:
    return ", ".join(sorted(agents))
