"""Who a call acts as: the principal, and the ownership rule.

The caller of a :class:`~agentsession.service.SessionManager` method is its principal
(``user_id=`` and ``admin=`` keywords, or the API key of an HTTP request); the owner of a
session is ``session.user_id``. A principal may act on a session it owns, and an admin
principal on any session (docs/semantics.md, "Ownership").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["SCOPES", "Principal", "Scope"]

#: What a key may do: ``read`` only reads, ``write`` reads and writes.
Scope = Literal["read", "write"]
SCOPES: tuple[Scope, ...] = ("read", "write")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of a call.

    Attributes:
        user_id: the caller's user id (1-128 chars of ``A-Za-z0-9._:@+-``).
        admin: a trusted caller that may act on every user's sessions.
        scope: ``write`` (default) may call every operation; ``read`` only the
            operations that change nothing (docs/security.md, "Scopes").
    """

    user_id: str
    admin: bool = False
    scope: Scope = "write"

    def may_act_for(self, owner: str) -> bool:
        """Whether this principal may act on what ``owner`` (a user id) owns: its own
        things, or anyone's as an admin. Another user's session is reported exactly like a
        missing one, never as forbidden."""
        return self.admin or owner == self.user_id
