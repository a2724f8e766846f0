"""The one table of field limits (agentsession.fieldlimits) against the SQL columns and
the HTTP request models: every column holding a bounded field is at least as wide as
the longest value validation accepts, every key fits MariaDB's InnoDB key limit, and
the OpenAPI document states the same bounds."""

from __future__ import annotations

import sqlalchemy as sa

from agentsession import fieldlimits as fl
from agentsession.http import schemas
from agentsession.stores.sql.columns import PlainText
from agentsession.stores.sql.schema import metadata

# (table, column) -> the longest value it must hold, in characters. Columns of
# generated ids hold ID_CHARS; the rest are fixed vocabularies of the library.
FIELD_OF_COLUMN = {
    ("sessions", "user_id"): fl.NAME_CHARS,
    ("sessions", "agent"): fl.NAME_CHARS,
    ("sessions", "external_key"): fl.EXTERNAL_KEY_CHARS,
    ("shared_memory", "agent"): fl.NAME_CHARS,
    ("shared_memory", "user_id"): fl.NAME_CHARS,
    ("audit_events", "user_id"): fl.NAME_CHARS,
    ("audit_events", "actor"): fl.NAME_CHARS,
    ("audit_events", "request_id"): fl.REQUEST_ID_CHARS,
    ("idempotency_keys", "user_id"): fl.NAME_CHARS,
    ("idempotency_keys", "idem_key"): fl.IDEMPOTENCY_KEY_CHARS,
    ("idempotency_keys", "owner_id"): fl.NAME_CHARS,
    ("run_steps", "kind"): fl.STEP_KIND_CHARS,
    ("run_steps", "status"): fl.STEP_STATUS_CHARS,
    ("run_steps", "name"): fl.STEP_NAME_CHARS,
    ("tool_calls", "tool"): fl.TOOL_NAME_CHARS,
    ("tool_calls", "call_id"): fl.CALL_ID_CHARS,
    ("tool_calls", "provider_call_id"): fl.CALL_ID_CHARS,
    ("session_records", "namespace"): fl.RECORD_NAMESPACE_CHARS,
    ("session_records", "key"): fl.RECORD_KEY_CHARS,
    ("summaries", "author"): fl.SUMMARY_LABEL_CHARS,
    ("summaries", "model"): fl.SUMMARY_LABEL_CHARS,
    ("summaries", "tokenizer"): fl.SUMMARY_LABEL_CHARS,
    ("usage_ledger", "user_id"): fl.NAME_CHARS,
    ("usage_ledger", "agent"): fl.NAME_CHARS,
    ("usage_ledger", "model"): fl.MODEL_CHARS,
    ("user_budgets", "user_id"): fl.NAME_CHARS,
    ("session_budgets", "user_id"): fl.NAME_CHARS,
    ("api_keys", "user_id"): fl.NAME_CHARS,
    ("api_keys", "name"): fl.API_KEY_NAME_CHARS,
    # A client address (at most 45 characters for IPv6) or a key id.
    ("auth_failures", "name"): 45,
    ("session_metadata", "key"): fl.METADATA_KEY_CHARS,
    ("session_metadata", "value"): fl.METADATA_VALUE_CHARS,
    ("session_metadata", "user_id"): fl.NAME_CHARS,
    # Names the library writes ("keyring", "session_chain") and their values: a
    # keyring's store id, or a chain head "<seq>:<SHA-256 hex>" (at most 20 + 1 + 64).
    ("store_meta", "name"): 32,
    ("store_meta", "value"): 85,
}
ID_COLUMNS = {"session_id", "message_id", "run_id", "parent_session_id", "key_id"}
LIBRARY_VOCABULARY = {
    "status",
    "role",
    "action",
    "scope",
    "fingerprint",
    "arguments_hash",
    "external_key_hash",
    "token_sha256",
    "hash",  # an audit event's, SHA-256 hex (agentsession.auditchain)
    "prev_hash",
    "audit_head",
    "event_hash",  # a session chain link's: the audit event's hash, SHA-256 hex
    "mode",  # a rewind's: "hide" or "remove"
    "kind",  # a search index row's: "message", "title" or "tool_call"
    "day",  # a usage ledger row's UTC date, YYYY-MM-DD
}
INNODB_KEY_BYTES = 3072
UTF8MB4_BYTES = 4


def _string_columns() -> list[tuple[sa.Table, sa.Column[object]]]:
    return [
        (table, column)
        for table in metadata.sorted_tables
        for column in table.columns
        if getattr(column.type, "length", None) is not None
    ]


def test_every_bounded_field_fits_its_column() -> None:
    """A value validation accepts is never too long for its column; a text column that
    PostgreSQL stores escaped (backslash, NUL: two characters) is twice as wide."""
    seen = set()
    for table, column in _string_columns():
        width = column.type.length  # type: ignore[attr-defined]
        where = (table.name, column.name)
        if where in FIELD_OF_COLUMN:
            longest = FIELD_OF_COLUMN[where]
            if isinstance(column.type, PlainText):
                longest *= 2
            assert width >= longest, f"{where}: VARCHAR({width}) < {longest}"
            seen.add(where)
        elif column.name in ID_COLUMNS:
            assert width >= fl.ID_CHARS, where
        else:
            assert column.name in LIBRARY_VOCABULARY, f"{where}: which field limit bounds it?"
    assert seen == set(FIELD_OF_COLUMN)


def test_every_key_fits_mariadb_innodb_key_limit() -> None:
    """Primary keys and indexes at 4 bytes per utf8mb4 character stay within 3072 bytes."""
    for table in metadata.sorted_tables:
        keys = [table.primary_key.columns, *(index.columns for index in table.indexes)]
        for columns in keys:
            # A text column costs 4 bytes a character; any other (integer, timestamp)
            # at most 8.
            size = sum(
                UTF8MB4_BYTES * c.type.length if getattr(c.type, "length", None) else 8
                for c in columns
            )
            assert size <= INNODB_KEY_BYTES, (table.name, [c.name for c in columns], size)


def test_http_request_models_state_the_same_bounds() -> None:
    """The OpenAPI bounds of request fields are the table's."""
    expected = {
        (schemas.CreateSession, "agent"): fl.NAME_CHARS,
        (schemas.Reason, "reason"): fl.REASON_CHARS,
        (schemas.RecordToolCall, "tool"): fl.TOOL_NAME_CHARS,
        (schemas.RecordToolCall, "call_id"): fl.CALL_ID_CHARS,
        (schemas.RecordToolCall, "provider_call_id"): fl.CALL_ID_CHARS,
        (schemas.StepIn, "kind"): fl.STEP_KIND_CHARS,
        (schemas.StepIn, "status"): fl.STEP_STATUS_CHARS,
        (schemas.StepIn, "name"): fl.STEP_NAME_CHARS,
    }
    for (model, field), chars in expected.items():
        schema = model.model_json_schema()["properties"][field]
        bounds = [schema.get("maxLength")] + [o.get("maxLength") for o in schema.get("anyOf", [])]
        assert chars in bounds, (model.__name__, field, schema)
