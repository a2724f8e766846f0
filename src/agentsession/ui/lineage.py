"""The inspector's Forks view: the lineage tree of a session, its ancestors up to the
root and its descendants, bounded.

Ancestors are read one ``get_session`` a step up ``parent_session_id`` (at most
:data:`MAX_ANCESTORS`); descendants one ``list_sessions(parent_session_id=...)`` page a
node (at most :data:`WIDTH` forks a node, :data:`DEPTH` levels down), with a "more"
link to the Sessions view listing all the forks of a node whose page was not the last.
A fork belongs to its parent's owner, so the tree shows nothing the viewer may not see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..errors import NotFound
from ..models import Session
from ..service import SessionManager
from .auth import Viewer, viewer
from .guard import guarded, not_found
from .pages import page_id, render
from .query import Query
from .views import malformed, manager_of, who_of

__all__ = ["DEPTH", "MAX_ANCESTORS", "WIDTH", "Node", "router"]

#: The most ancestors shown above the session.
MAX_ANCESTORS: Final = 20
#: The most levels of forks shown below it, and the most forks shown a node.
DEPTH: Final = 3
WIDTH: Final = 10

router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


@dataclass(slots=True)
class Node:
    """A session of the tree, its forks shown (``children``) and whether it has more
    forks than shown (``more``), or forks below the depth shown (``deeper``)."""

    session: Session
    children: list[Node] = field(default_factory=list)
    more: bool = False
    deeper: bool = False


def _ancestors(sm: SessionManager, v: Viewer, s: Session) -> tuple[list[Session], bool]:
    """The ancestors of ``s``, root first, and whether the chain goes on above them
    (cut at :data:`MAX_ANCESTORS`, or at a parent since deleted)."""
    chain: list[Session] = []
    parent = s.parent_session_id
    while parent is not None and len(chain) < MAX_ANCESTORS:
        try:
            above = sm.get_session(**who_of(v), session_id=parent)
        except NotFound:
            return chain[::-1], True
        chain.append(above)
        parent = above.parent_session_id
    return chain[::-1], parent is not None


def _descendants(sm: SessionManager, v: Viewer, node: Node, depth: int) -> None:
    """Fill ``node``'s children down to ``depth`` more levels."""
    admin = v.principal.admin
    page = sm.list_sessions(
        user_id=node.session.user_id if admin else v.principal.user_id,
        admin=admin,
        parent_session_id=node.session.session_id,
        limit=WIDTH if depth > 0 else 1,
    )
    if depth == 0:
        node.deeper = bool(page.items)
        return
    node.more = page.next_cursor is not None
    for child in page:
        below = Node(child)
        _descendants(sm, v, below, depth - 1)
        node.children.append(below)


@router.get("/sessions/{session_id}/forks")
@guarded
def forks_view(request: Request, session_id: str) -> Response:
    """The Forks view: the ancestors of a session (root first), the session, and its
    forks :data:`DEPTH` levels down, :data:`WIDTH` a node, with "more" links."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    Query(request, ())  # it reads none: any is refused
    sm = manager_of(request)
    s = sm.get_session(**who_of(v), session_id=session_id)
    ancestors, cut = _ancestors(sm, v, s)
    root = Node(s)
    _descendants(sm, v, root, DEPTH)
    context = {"v": v, "s": s, "ancestors": ancestors, "cut": cut, "root": root}
    return render("forks.html", context)
