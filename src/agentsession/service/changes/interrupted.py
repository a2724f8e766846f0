"""Tool calls a crash left unanswered: restore gives each a synthetic result.

A worker that dies between a tool call and its result leaves a call that every window
holding it carries without a result, and a provider rejects such a history. When
restore marks the session's run INTERRUPTED (or undoes the close or expiry that stopped
it), it appends in the same write one result per call that run left unanswered, in the call's
own format (:func:`agentsession.callgroups.results_for`), saying the call was
interrupted, and marked in the message ``metadata`` as :data:`SYNTHETIC`
(docs/semantics.md, "Lifecycle").

Only the tail of history is read: a call that never got a result is one of the newest
calls (a worker sends the next calls only once it has the results of the last ones),
so the walk back from the newest message stops at a result older than those calls, at
a message of another run, or at a message that cannot stand between a call and its
result.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from ...callgroups import answered_calls, in_tool_exchange, opened_calls, results_for
from ...models import Message, RunStatus, Session, SessionStatus
from ...stores.base import StoreTransaction
from ..transitions import newest_run
from .messages import insert_messages

__all__ = ["INTERRUPTED_TEXT", "SYNTHETIC", "AnsweredCalls", "answer_interrupted_calls"]

#: The result text of a call that was interrupted.
INTERRUPTED_TEXT: Final = (
    "interrupted: the agent stopped before this tool call finished; it has no result"
)
#: ``metadata`` of a synthetic result.
SYNTHETIC: Final = {"agentsession": {"synthetic": "interrupted"}}

#: How many messages one step of the walk back reads.
_STEP = 8


@dataclass(frozen=True, slots=True)
class AnsweredCalls:
    """What :func:`answer_interrupted_calls` appended.

    Attributes:
        call_ids: the calls that got a synthetic result, oldest first.
        messages: the synthetic result messages, in seq order.
    """

    call_ids: list[str]
    messages: list[Message]


def answer_interrupted_calls(
    tx: StoreTransaction, s: Session, now: datetime, stopped: list[str]
) -> AnsweredCalls:
    """Append a synthetic result for every call an interrupted run left unanswered.

    Args:
        s: the session as restore found it (status and message count before the write).
        stopped: ids of the runs this restore marked INTERRUPTED. When restoring a
            CLOSED or EXPIRED session, the newest run counts too if the close or the
            expiry stopped it.

    Returns:
        The calls answered and the messages appended (none: nothing to answer). The
        caller adds ``len(messages)`` to the session's ``message_count``.
    """
    runs = _interrupted_runs(tx, s, stopped)
    payloads: list[dict[str, Any]] = []
    call_ids: list[str] = []
    for call, ids in _unanswered(tx, s, set(runs)) if runs else []:
        call_ids += ids
        payloads += [
            {**p, "run_id": call.run_id or runs[-1], "metadata": _synthetic()}
            for p in results_for(call, ids, INTERRUPTED_TEXT)
        ]
    stored = insert_messages(tx, s, now, payloads) if payloads else []
    return AnsweredCalls(call_ids, stored)


def _interrupted_runs(tx: StoreTransaction, s: Session, stopped: list[str]) -> list[str]:
    """``stopped``; or, restoring a CLOSED or EXPIRED session, its newest run if the
    close (CANCELLED) or the expiry (INTERRUPTED) stopped it: it ended RUNNING at the
    moment the session left ACTIVE, so its open calls never got a result either."""
    if stopped:
        return stopped
    if s.status == SessionStatus.CLOSED:
        status, left_at = RunStatus.CANCELLED, s.closed_at
    elif s.status == SessionStatus.EXPIRED:
        status, left_at = RunStatus.INTERRUPTED, s.expired_at
    else:
        return stopped
    newest = newest_run(tx, s)
    if (
        newest is not None
        and newest.status == status
        and newest.ended_at is not None
        and left_at is not None
        and newest.ended_at >= left_at
    ):
        return [newest.run_id]
    return []


def _unanswered(
    tx: StoreTransaction, s: Session, runs: set[str]
) -> list[tuple[Message, list[str]]]:
    """(call message, its unanswered call ids) at the tail of history, oldest first."""
    found: list[tuple[Message, list[str]]] = []
    answered: set[str] = set()
    past_calls = False  # walked back past the newest calls
    before = s.message_count + 1
    while before > 1:
        older = tx.get_messages(s.session_id, before_seq=before, limit=_STEP)
        for m in reversed(older):
            if (m.run_id is not None and m.run_id not in runs) or not in_tool_exchange(m):
                return found[::-1]
            results = answered_calls(m)
            if results and past_calls:
                return found[::-1]  # results of earlier calls: those were all answered
            made = opened_calls(m)
            missing = [c for c in made if c not in answered]
            if missing:
                found.append((m, missing))
            past_calls = past_calls or bool(made)
            answered.update(results)
        if not older:
            break
        before = older[0].seq
    return found[::-1]


def _synthetic() -> dict[str, Any]:
    return copy.deepcopy(SYNTHETIC)
