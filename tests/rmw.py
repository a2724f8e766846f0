"""Read-modify-write load over HTTP, shared by the lost-update tests
(``tests/http/test_server_workers.py``, ``tests/test_scale_out.py``).

Importable from every test module (``tests/`` is on ``sys.path``)::

    tally = RmwTally()
    increment_loop(lambda fn: fn(client), sid, 50, random.Random(1), tally)
    check_version_chain(audit_log(client, sid), final_version)
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from agentsession import AgentSessionError, VersionConflict
from agentsession.client import SessionClient

__all__ = ["RmwTally", "audit_log", "check_increments", "check_version_chain", "increment_loop"]

T = TypeVar("T")
#: Runs one client call: ``call(lambda c: c.get_session(...))``; may fail over.
Caller = Callable[[Callable[[SessionClient], Any]], Any]


@dataclass
class RmwTally:
    """One client's outcome: acknowledged increments, 412 answers, other errors."""

    acknowledged: int = 0
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)


def increment_loop(
    call: Caller,
    sid: str,
    count: int,
    rng: random.Random,
    tally: RmwTally,
    on_ack: Callable[[], None] = lambda: None,
) -> None:
    """``count`` increments of the memory's ``counter``: GET the memory (its
    ``session_version`` is the ETag), PUT ``counter + 1`` with it as If-Match; on 412
    back off (jittered, exponential, halved after a success so a contended client comes
    back gently) and start over. Stops early after 20 other errors."""
    done = streak = 0
    while done < count:
        try:
            read = call(lambda c: c.get_working_memory(session_id=sid))
            key = f"inc-{rng.getrandbits(64):x}"  # one key per attempt, kept across failover
            data, version = {"counter": read.data["counter"] + 1}, read.session_version
            call(
                lambda c, data=data, v=version, key=key: c.update_working_memory(
                    session_id=sid, data=data, expected_version=v, idempotency_key=key
                )
            )
        except VersionConflict:
            tally.conflicts += 1
            streak += 1
            time.sleep(rng.uniform(0, min(0.4, 0.005 * 2 ** min(streak, 7))))
            continue
        except (AgentSessionError, httpx.HTTPError) as exc:
            tally.errors.append(f"{type(exc).__name__}: {exc}")
            if len(tally.errors) > 20:
                return
            continue
        tally.acknowledged += 1
        on_ack()
        done += 1
        streak //= 2


def audit_log(c: SessionClient, sid: str) -> list[Any]:
    """Every audit event of the session, oldest first (paged)."""
    page = c.get_audit_log(session_id=sid, limit=1000)
    events: list[Any] = list(page.items)
    while page.next_cursor is not None:
        page = c.get_audit_log(session_id=sid, limit=1000, cursor=page.next_cursor)
        events.extend(page.items)
    return events


def check_version_chain(events: list[Any], final_version: int) -> None:
    """Every change +1 from creation on: no version written twice, none skipped."""
    chain = [(e.version_before, e.version_after) for e in events if e.version_after is not None]
    afters = [after for _, after in chain]
    assert len(afters) == len(set(afters)), "a version was written twice"
    assert all(before == after - 1 for before, after in chain[1:]), chain[:10]
    assert afters == list(range(1, final_version + 1)), "a gap in the versions"


def check_increments(
    events: list[Any], *, start_version: int, final_version: int, final: int, acknowledged: int
) -> None:
    """The outcome of increment loops on a session nothing else wrote to: counter and
    version each moved by exactly the acknowledged increments, each one audited as
    ``memory.updated``, and the version chain contiguous."""
    assert final == acknowledged
    assert final_version == start_version + acknowledged
    check_version_chain(events, final_version)
    changes = [e for e in events if (e.version_after or 0) > start_version]
    assert len(changes) == acknowledged
    assert {e.action for e in changes} == {"memory.updated"}
