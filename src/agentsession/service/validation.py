"""Argument checks shared by every SessionManager method.

Each ``check_*`` function returns the value it accepted (normalised where stated) or
raises :class:`~agentsession.errors.ValidationError` (or a subclass) naming the field.
Nothing here touches a store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..callgroups import CALL_ITEMS, ITEM_ROLES, OUTPUT_ITEMS, item_role
from ..errors import ValidationError
from ..fieldlimits import (
    CALL_ID_CHARS,
    EXTERNAL_KEY_CHARS,
    IDEMPOTENCY_KEY_CHARS,
    REASON_CHARS,
    SUMMARY_LABEL_CHARS,
    TEXT_CHARS,
    TOOL_NAME_CHARS,
)
from ..ids import check_id, is_label
from ..jsonvalues import check_json, loads
from ..models import Role, Session
from ..tokens import DEFAULT_TOKENIZER, Tokenizer
from .policy import Limits

#: The largest limit or seq cursor accepted: 2**53 - 1, exact in every JSON client and
#: within every store's integer range.
MAX_COUNT = 2**53 - 1
#: The longest idle timeout, in seconds: 10 years.
MAX_TTL_SECONDS = 10 * 365 * 86400
#: The longest run lease, in seconds: one day. A lease exists to notice a dead worker;
#: one longer than a day would leave its run RUNNING for that long, so a worker that
#: needs more heartbeats instead.
MAX_LEASE_SECONDS = 86400
#: What an external key must not hold: C0 and C1 control characters (with DEL) and lone
#: surrogates (not encodable as UTF-8).
_KEY_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_MESSAGE_SYSTEM_FIELDS = frozenset(
    {"message_id", "session_id", "seq", "created_at", "session_version"}
)


def check_key(key: str | None) -> str | None:
    """An idempotency key: 1-``IDEMPOTENCY_KEY_CHARS`` (255) printable ASCII
    characters, no space at either end (HTTP would strip it), or None."""
    if key is None:
        return None
    if (
        type(key) is not str
        or not 1 <= len(key) <= IDEMPOTENCY_KEY_CHARS
        or not key.isascii()
        or not key.isprintable()
        or key != key.strip(" ")
    ):
        raise ValidationError(
            f"idempotency_key must be 1-{IDEMPOTENCY_KEY_CHARS} printable ASCII characters, "
            "no space at either end",
            field="idempotency_key",
        )
    return key


def check_external_key(key: Any) -> str:
    """A session's caller-chosen ``external_key``, returned exactly as given.

    Any Unicode text of 1 to ``EXTERNAL_KEY_CHARS`` (256) characters (so at most 1024
    bytes of UTF-8), without control characters (C0, DEL, C1) or lone surrogates.
    Nothing is trimmed or case-folded: keys compare exactly.

    Raises:
        ValidationError: anything else (``field="external_key"``).
    """
    if (
        type(key) is not str
        or not 1 <= len(key) <= EXTERNAL_KEY_CHARS
        or _KEY_FORBIDDEN.search(key) is not None
    ):
        raise ValidationError(
            f"external_key must be 1-{EXTERNAL_KEY_CHARS} characters without control "
            "characters or lone surrogates",
            field="external_key",
        )
    return key


def check_record_name(value: Any, field: str, *, min_chars: int, max_chars: int) -> str:
    """A record namespace, key or key bound: text of ``min_chars`` to ``max_chars``
    characters without control characters (C0, DEL, C1) or lone surrogates.

    Raises:
        ValidationError: anything else (``field`` names the argument).
    """
    if (
        type(value) is not str
        or not min_chars <= len(value) <= max_chars
        or _KEY_FORBIDDEN.search(value) is not None
    ):
        raise ValidationError(
            f"{field} must be {min_chars}-{max_chars} characters without control "
            "characters or lone surrogates",
            field=field,
        )
    return value


def check_expected_version(expected_version: int | None, *, minimum: int = 1) -> None:
    """``expected_version`` must be None or an integer >= ``minimum`` (1 for a
    session; 0 for a shared document, whose version 0 means never written)."""
    if expected_version is not None and (
        type(expected_version) is not int or expected_version < minimum
    ):
        raise ValidationError(
            f"expected_version must be an integer >= {minimum}", field="expected_version"
        )


def check_limit(limit: Any, field: str, *, allow_none: bool, maximum: int | None) -> int | None:
    """A row count: an int in 0..maximum (None = no cap); None only if ``allow_none``."""
    if limit is None:
        if allow_none:
            return None
        raise ValidationError(f"{field} is required", field=field)
    if type(limit) is not int or not 0 <= limit <= MAX_COUNT:
        raise ValidationError(f"{field} must be an integer from 0 to {MAX_COUNT}", field=field)
    if maximum is not None and limit > maximum:
        raise ValidationError(f"{field} must be at most {maximum}", field=field)
    return limit


def check_title(title: Any, limits: Limits) -> str | None:
    """A session title: None or a string of at most ``limits.max_title_chars``."""
    if title is None:
        return None
    if not isinstance(title, str) or len(title) > limits.max_title_chars:
        raise ValidationError(
            f"title must be a string of at most {limits.max_title_chars} characters", field="title"
        )
    check_json(title, field="title")
    return title


def check_metadata(metadata: Any, field: str, limits: Limits) -> dict[str, Any]:
    """A JSON object of at most ``limits.max_metadata_bytes``; None gives ``{}``."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    value = dict(metadata)
    check_json(value, field=field, limit_bytes=limits.max_metadata_bytes)
    return value


def check_ttl(ttl: Any) -> float | None:
    """An idle timeout in seconds: None, or a number in (0, 10 years]."""
    if ttl is None:
        return None
    if type(ttl) not in (int, float) or not 0 < ttl <= MAX_TTL_SECONDS:
        raise ValidationError(
            "ttl_seconds must be a positive number of seconds (at most 10 years)",
            field="ttl_seconds",
        )
    return float(ttl)


def check_lease(seconds: Any) -> float | None:
    """A run lease in seconds: None, or a finite number in (0, :data:`MAX_LEASE_SECONDS`].

    Raises:
        ValidationError: anything else (a bool, a string, NaN, infinity, 0, too long).
    """
    if seconds is None:
        return None
    if type(seconds) not in (int, float) or not 0 < seconds <= MAX_LEASE_SECONDS:
        raise ValidationError(
            f"lease_seconds must be a positive number of seconds (at most {MAX_LEASE_SECONDS:,})",
            field="lease_seconds",
        )
    return float(seconds)


def check_message(message: Any, field: str, limits: Limits) -> tuple[dict[str, Any], str]:
    """A message to append (see ``SessionManager.append_messages``).

    Returns:
        Its payload (a copy decoded from the checked JSON, sharing nothing with
        ``message``), and that JSON text (:func:`~agentsession.jsonvalues.dumps`).
    """
    if not isinstance(message, Mapping):
        raise ValidationError(f"{field} must be an object with a role", field=field)
    payload = dict(message)
    system = _MESSAGE_SYSTEM_FIELDS.intersection(payload)
    if system:
        raise ValidationError(
            f"{field}.{sorted(system)[0]} is assigned by the store and cannot be sent",
            field=f"{field}.{sorted(system)[0]}",
        )
    text = check_json(payload, field=field, limit_bytes=limits.max_message_bytes)
    # A snapshot of its own: the caller's nested lists and dicts may change while the
    # write waits for its turn, and what is stored, returned and replayed must be what
    # was checked here.
    payload = loads(text)
    _check_role(payload, field)
    content = payload.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise ValidationError(
            f"{field}.content must be a string, a list of parts, or null", field=f"{field}.content"
        )
    for name in ("name", "tool_call_id"):
        if payload.get(name) is not None and not isinstance(payload[name], str):
            raise ValidationError(f"{field}.{name} must be a string", field=f"{field}.{name}")
    calls = payload.get("tool_calls")
    if calls is not None and (
        not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)
    ):
        raise ValidationError(
            f"{field}.tool_calls must be a list of objects", field=f"{field}.tool_calls"
        )
    if payload.get("run_id") is not None:
        check_id(payload["run_id"], field=f"{field}.run_id", prefix="run")
    meta = payload.get("metadata")
    if meta is not None:
        check_metadata(meta, f"{field}.metadata", limits)
    return payload, text


def _check_role(payload: dict[str, Any], field: str) -> None:
    """A message's ``role``: one of :class:`Role`, or absent on a Responses item, whose
    role is derived from its type; a call or output item needs a ``call_id``."""
    derived = item_role(payload)
    role = payload.get("role", derived)
    if not isinstance(role, str) or role not in Role._value2member_map_:  # a list: unhashable
        raise ValidationError(
            f"{field}.role must be one of system, developer, user, assistant, tool (it may be left "
            f"out on a Responses item of type {', '.join(ITEM_ROLES)})",
            field=f"{field}.role",
        )
    if derived is None:
        return
    kind = payload["type"]
    if role != derived:
        raise ValidationError(
            f"{field}.role of a {kind} item must be {derived} or left out", field=f"{field}.role"
        )
    call_id = payload.get("call_id")
    if (kind in CALL_ITEMS or kind in OUTPUT_ITEMS) and not (isinstance(call_id, str) and call_id):
        raise ValidationError(
            f"{field}.call_id of a {kind} item must be a non-empty string", field=f"{field}.call_id"
        )


def check_memory(data: Any, limits: Limits) -> dict[str, Any]:
    """A whole working-memory document: a JSON object whose standard keys are typed."""
    if not isinstance(data, Mapping):
        raise ValidationError("working memory must be a JSON object", field="working_memory")
    document: dict[str, Any] = dict(data)
    check_json(document, field="working_memory", limit_bytes=limits.max_working_memory_bytes)
    for key, kinds, shown in (
        ("goal", (str,), "a string"),
        ("next_action", (str,), "a string"),
        ("completed", (list,), "a list"),
        ("errors", (list,), "a list"),
        ("facts", (dict,), "an object"),
    ):
        value = document.get(key)
        if value is not None and not isinstance(value, kinds):
            raise ValidationError(
                f"working_memory.{key} must be {shown} or null", field=f"working_memory.{key}"
            )
    return document


def check_patch(patch: Any, limits: Limits) -> dict[str, Any]:
    """An RFC 7396 merge patch for working memory: a JSON object."""
    if not isinstance(patch, Mapping):
        raise ValidationError("a working-memory merge patch must be a JSON object", field="patch")
    value = dict(patch)
    check_json(value, field="patch", limit_bytes=limits.max_working_memory_bytes)
    return value


def check_enum(enum: Any, value: Any, field: str, *, optional: bool = True) -> Any:
    """``value`` converted to the member of ``enum`` it names; None only if ``optional``."""
    if value is None and optional:
        return None
    try:
        return enum(value)
    except (ValueError, TypeError):
        allowed = ", ".join(m.value for m in enum)
        raise ValidationError(f"{field} must be one of {allowed}", field=field) from None


def check_cursor_seq(value: Any, field: str) -> int | None:
    """None, or a seq cursor: an integer in 0..2**53-1."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise ValidationError(
            f"{field} must be a seq (an integer from 0 to {MAX_COUNT})", field=field
        )
    return value


def check_within(s: Session, seq: int, field: str) -> int:
    """``seq``, checked to be at most ``s.message_count`` (a seq the session has reached:
    a read or rewind as of it, a fork or summary up to it).

    Raises:
        ValidationError: ``seq`` above the session's ``message_count``.
    """
    if seq > s.message_count:
        raise ValidationError(
            f"{field} must be at most the session's message_count ({s.message_count})", field=field
        )
    return seq


def check_time(value: Any, field: str) -> datetime | None:
    """None, or an aware datetime, returned in UTC."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise ValidationError(f"{field} must be a timezone-aware datetime", field=field)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(f"{field} is outside the years 1-9999 in UTC", field=field) from None


def check_tool_name(tool: Any) -> None:
    """A tool name: 1-``TOOL_NAME_CHARS`` (128) characters of ``A-Za-z0-9._:-``."""
    if not is_label(tool, TOOL_NAME_CHARS):
        raise ValidationError(
            f"tool must be 1-{TOOL_NAME_CHARS} characters of A-Z a-z 0-9 . _ : -", field="tool"
        )


def check_tool_call_id(call_id: Any, field: str = "call_id") -> None:
    """A caller-chosen or provider's tool-call id: 1-``CALL_ID_CHARS`` (128) characters
    of ``A-Za-z0-9._:-``.

    Raises:
        ValidationError: naming ``field``.
    """
    if not is_label(call_id, CALL_ID_CHARS):
        raise ValidationError(
            f"{field} must be 1-{CALL_ID_CHARS} characters of A-Z a-z 0-9 . _ : -", field=field
        )


def check_reason(reason: Any) -> str | None:
    """None, or a lifecycle reason of at most ``REASON_CHARS`` (500) characters."""
    if reason is None:
        return None
    if not isinstance(reason, str) or len(reason) > REASON_CHARS:
        raise ValidationError(
            f"reason must be a string of at most {REASON_CHARS} characters", field="reason"
        )
    check_json(reason, field="reason")
    return reason


def check_usage(usage: Any) -> dict[str, int]:
    """Token counts: a mapping of names to integers >= 0; None gives ``{}``."""
    if usage is None:
        return {}
    if not isinstance(usage, Mapping) or not all(
        isinstance(k, str) and type(v) is int and v >= 0 for k, v in usage.items()
    ):
        raise ValidationError("usage must map names to token counts (integers >= 0)", field="usage")
    return dict(usage)


def scope_digest(scope: Any) -> str:
    """A short digest of a listing's scope (its filters and whose rows it lists), which
    a cursor carries so that only the same listing accepts it."""
    return hashlib.sha256(json.dumps(scope).encode()).hexdigest()[:12]


def encode_cursor(s: Session, scope: Any) -> str:
    """The opaque session-list cursor pointing just after ``s`` (keyset on updated_at,
    id), tied to ``scope``: the listing's filters and whose sessions it lists."""
    raw = json.dumps([s.updated_at.isoformat(), s.session_id, scope_digest(scope)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: Any, scope: Any) -> tuple[datetime, str] | None:
    """Decode :func:`encode_cursor` output; None passes through.

    Raises:
        ValidationError: malformed, or issued by a listing of another ``scope`` (other
            filters or another user), which would page a different list.
    """
    if cursor is None:
        return None
    try:
        if type(cursor) is not str or len(cursor) > 200:
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, session_id, digest = json.loads(raw)
        if digest != scope_digest(scope):
            raise ValidationError(
                "cursor belongs to another listing (filters or user)", field="cursor"
            )
        at = datetime.fromisoformat(stamp)
        if at.tzinfo is None:
            raise ValueError
        check_id(session_id, field="cursor", prefix="ses")
        return at.astimezone(UTC), session_id
    except (ValueError, TypeError, OverflowError, binascii.Error, UnicodeDecodeError):
        raise ValidationError("cursor is not one this service issued", field="cursor") from None


def check_object(value: Any, field: str, *, limit_bytes: int | None = None) -> dict[str, Any]:
    """A JSON object (any Mapping with string keys), copied; None gives ``{}``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    result = dict(value)
    check_json(result, field=field, limit_bytes=limit_bytes)
    return result


def check_text(value: Any, field: str, *, max_chars: int = TEXT_CHARS) -> str | None:
    """None, or a string of at most ``max_chars`` characters."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > max_chars:
        raise ValidationError(
            f"{field} must be a string of at most {max_chars} characters", field=field
        )
    check_json(value, field=field)
    return value


def check_tokenizer(tokenizer: Any) -> Tokenizer:
    """``tokenizer``, or the default for None.

    Raises:
        ValidationError: not a :class:`Tokenizer` (a ``name`` string and ``count``).
    """
    if tokenizer is None:
        return DEFAULT_TOKENIZER
    if not isinstance(tokenizer, Tokenizer) or type(tokenizer.name) is not str:
        raise ValidationError(
            "tokenizer must have a name (str) and count(text) -> int", field="tokenizer"
        )
    check_record_name(tokenizer.name, "tokenizer.name", min_chars=1, max_chars=SUMMARY_LABEL_CHARS)
    return tokenizer
