"""The audit chain's canonical encoding is the one docs/security.md documents (a third
party can recompute a hash from it), and ``find_break`` names each kind of break."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from agentsession.auditchain import canonical, event_hash, find_break, new_event
from agentsession.models import AuditEvent


def _event(version: int, **extra: object) -> AuditEvent:
    return AuditEvent(
        seq=version,
        session_id="ses_a",
        user_id="alice",
        actor="alice",
        action="message.appended",
        at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        version_before=version - 1,
        version_after=version,
        details={"count": 1, "é": "ü"},
        **extra,  # type: ignore[arg-type]
    )


def test_the_encoding_is_sorted_compact_json_of_the_documented_fields() -> None:
    expected = (
        '{"action":"message.appended","actor":"alice","at":"2026-01-02T03:04:05.000006Z",'
        '"details":{"count":1,"é":"ü"},"prev_hash":"ab","request_id":null,'
        '"session_id":"ses_a","user_id":"alice","version_after":2,"version_before":1}'
    ).encode()
    assert canonical(_event(2), "ab") == expected
    assert event_hash(_event(2), "ab") == hashlib.sha256(expected).hexdigest()
    assert canonical(_event(2).model_copy(update={"seq": 99}), "ab") == expected


def test_find_break_names_changed_removed_reordered() -> None:
    chain: list[AuditEvent] = []
    for v in range(1, 5):
        values = {k: x for k, x in _event(v).__dict__.items() if k not in ("prev_hash", "hash")}
        chain.append(new_event(values, chain[-1].hash if chain else None))
    head = chain[-1].hash
    assert find_break("ses_a", chain, head) is None
    changed = [*chain[:2], chain[2].model_copy(update={"actor": "eve"}), chain[3]]
    assert find_break("ses_a", changed, head).problem == "changed"  # type: ignore[union-attr]
    removed = find_break("ses_a", [*chain[:1], *chain[2:]], head)
    assert removed is not None and (removed.version, removed.problem) == (3, "removed")
    swapped = find_break("ses_a", [chain[0], chain[2], chain[1], chain[3]], head)
    assert swapped is not None and swapped.problem == "reordered"
    tail = find_break("ses_a", chain[:-1], head)
    assert tail is not None and (tail.version, tail.problem) == (None, "removed")
    older = _event(0)  # written before the chain existed: the chain starts after it
    assert find_break("ses_a", [older, *chain], head) is None
    stripped = [*chain[:2], chain[2].model_copy(update={"hash": None})]
    assert find_break("ses_a", stripped, None).problem == "changed"  # type: ignore[union-attr]
