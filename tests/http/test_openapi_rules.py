"""Rules between the fields of a request (``from_seq`` <= ``to_seq``, a cursor or a seq
bound, exactly one of two fields...) are stated in the OpenAPI document, in the
description of each field they bind, and the server enforces them as stated.

``RULES`` holds each rule: where it is stated, the text stating it, a request breaking
it and the answer. Two walks keep the table whole: every operation of the document with
a ``cursor`` and a seq bound (``after``, ``before``) must have its rule here, and every
cross-field refusal the service and the HTTP schemas raise (their messages: "not both",
"exactly one of"...) must be the answer of a rule here, or be listed in
``LIBRARY_ONLY`` with the reason HTTP cannot send it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import Api, assert_problem

from agentsession.http.schemas import FIND_RULE

pytestmark = pytest.mark.store_independent

SRC = Path(__file__).resolve().parents[2] / "src" / "agentsession"

#: Words of a refusal that names a rule between fields.
CROSS_FIELD_WORDS = (
    "not both",
    "exactly one of",
    "at most one of",
    "greater than",
    "is after",
    "or provider_call_id",
    "with scope app",
)

#: Cross-field refusals of the library that no HTTP request can cause, and why.
LIBRARY_ONLY = {
    "pass exactly one of data, patch and ops": "the working-memory routes take data by "
    "PUT and a patch or ops by PATCH (by body type), never two of them",
    "pass exactly one of ops and data": "the shared-memory routes take data by PUT and "
    "ops by PATCH, never both",
}


@dataclass(frozen=True)
class Rule:
    """One rule between fields of one operation.

    Attributes:
        method, path: the operation, as in the OpenAPI document.
        fields: the parameters or body properties whose descriptions state it.
        stated: the text each of their descriptions holds.
        request: sends a request breaking it, given the api and a session id with two
            messages, a tool call and a finished run.
        status, field, detail: the answer: status, problem ``field`` and a part of its
            ``detail``.
    """

    method: str
    path: str
    fields: tuple[str, ...]
    stated: str
    request: Callable[[Api, str], httpx.Response]
    status: int
    field: str | None
    detail: str


def _get(path: str) -> Callable[[Api, str], httpx.Response]:
    return lambda api, sid: api.http.get(_fill(api, path, sid), headers=api.alice)


def _post(path: str, body: dict[str, Any]) -> Callable[[Api, str], httpx.Response]:
    return lambda api, sid: api.http.post(_fill(api, path, sid), json=body, headers=api.alice)


def _fill(api: Api, path: str, sid: str) -> str:
    """``path`` with the session id and its run id."""
    if "{run_id}" in path:
        run_id = api.manager.list_runs(session_id=sid, user_id="alice").items[0].run_id
        path = path.replace("{run_id}", run_id)
    return path.replace("{session_id}", sid)


S = "/v1/sessions/{session_id}"
MESSAGE = {"role": "user", "content": "hi"}
CURSOR_RULE = "Not together with a seq bound"
ONE_MESSAGE_RULE = "Exactly one of `message` and `messages`"
BOUNDED_LISTINGS = [
    f"{S}/messages",
    f"{S}/tool-calls",
    f"{S}/runs",
    f"{S}/runs/{{run_id}}/steps",
    f"{S}/audit",
    f"{S}/memory/versions",
]

RULES: list[Rule] = [
    Rule(
        "post",
        f"{S}/summaries",
        ("from_seq",),
        "At most `to_seq`",
        _post(f"{S}/summaries", {"text": "s", "from_seq": 2, "to_seq": 1}),
        400,
        "from_seq",
        "from_seq must not be greater than to_seq",
    ),
    Rule(
        "post",
        f"{S}/summaries",
        ("to_seq",),
        "At least `from_seq`",
        _post(f"{S}/summaries", {"text": "s", "from_seq": 2, "to_seq": 1}),
        400,
        "from_seq",
        "from_seq must not be greater than to_seq",
    ),
    Rule(
        "post",
        f"{S}/summaries",
        ("to_seq",),
        "at most the session's `message_count`",
        _post(f"{S}/summaries", {"text": "s", "from_seq": 1, "to_seq": 3}),
        400,
        "to_seq",
        "message_count",
    ),
    Rule(
        "post",
        f"{S}/tool-calls",
        ("started_at",),
        "Not after `ended_at`",
        _post(
            f"{S}/tool-calls",
            {"tool": "t", "started_at": "2026-01-02T00:00:00Z", "ended_at": "2026-01-01T00:00:00Z"},
        ),
        400,
        "started_at",
        "started_at is after ended_at",
    ),
    Rule(
        "post",
        f"{S}/tool-calls",
        ("ended_at",),
        "Not before `started_at`",
        _post(
            f"{S}/tool-calls",
            {"tool": "t", "started_at": "2026-01-02T00:00:00Z", "ended_at": "2026-01-01T00:00:00Z"},
        ),
        400,
        "started_at",
        "started_at is after ended_at",
    ),
    Rule(
        "post",
        f"{S}/tool-calls/find",
        ("tool", "provider_call_id"),
        FIND_RULE,
        _post(f"{S}/tool-calls/find", {}),
        400,
        "tool",
        "pass tool (and arguments) or provider_call_id",
    ),
    Rule(
        "post",
        f"{S}/tool-calls/find",
        ("tool", "provider_call_id"),
        FIND_RULE,
        _post(f"{S}/tool-calls/find", {"tool": "t", "provider_call_id": "c1"}),
        400,
        "provider_call_id",
        "find by provider_call_id, or by tool and arguments, not both",
    ),
    Rule(
        "get",
        f"{S}/tool-calls/find",
        ("tool", "provider_call_id"),
        FIND_RULE,
        _get(f"{S}/tool-calls/find?tool=t&provider_call_id=c1"),
        400,
        "provider_call_id",
        "not both",
    ),
    Rule(
        "post",
        f"{S}/messages",
        ("message", "messages"),
        ONE_MESSAGE_RULE,
        _post(f"{S}/messages", {"message": MESSAGE, "messages": [MESSAGE]}),
        422,
        None,
        "exactly one of `message` and `messages`",
    ),
    Rule(
        "post",
        f"{S}/messages",
        ("working_memory_patch",),
        "Not together with `working_memory_ops`",
        _post(
            f"{S}/messages",
            {"message": MESSAGE, "working_memory_patch": {}, "working_memory_ops": []},
        ),
        400,
        "working_memory_ops",
        "pass at most one of working_memory_patch and working_memory_ops",
    ),
    Rule(
        "post",
        f"{S}/messages",
        ("working_memory_ops",),
        "Not together with `working_memory_patch`",
        _post(
            f"{S}/messages",
            {"message": MESSAGE, "working_memory_patch": {}, "working_memory_ops": []},
        ),
        400,
        "working_memory_ops",
        "at most one of",
    ),
    Rule(
        "get",
        f"{S}/messages",
        ("before",),
        "Not together with `after`",
        _get(f"{S}/messages?before=2&after=1"),
        400,
        "before",
        "pass before or after, not both",
    ),
    Rule(
        "get",
        f"{S}/messages",
        ("after",),
        "Not together with `before`",
        _get(f"{S}/messages?before=2&after=1"),
        400,
        "before",
        "not both",
    ),
    *(
        Rule(
            "get",
            path,
            ("cursor",),
            CURSOR_RULE,
            _get(f"{path}?cursor=c&{'before' if path.endswith('/versions') else 'after'}=1"),
            400,
            "cursor",
            "pass cursor or a seq bound, not both",
        )
        for path in BOUNDED_LISTINGS
    ),
    Rule(
        "get",
        f"{S}/messages",
        ("cursor",),
        CURSOR_RULE,
        _get(f"{S}/messages?cursor=c&before=1"),
        400,
        "cursor",
        "not both",
    ),
    Rule(
        "get",
        "/v1/shared-memory/{scope}/{agent}",
        ("user_id",),
        "With scope `app`: 400",
        lambda api, sid: api.http.get(
            "/v1/shared-memory/app/coding?user_id=bob", headers=api.admin
        ),
        400,
        "target_user_id",
        "pass no target_user_id with scope app",
    ),
]


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with a ``$ref`` followed."""
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = doc
    for part in ref.removeprefix("#/").split("/"):
        found = found[part]
    return found


def _descriptions(doc: dict[str, Any], method: str, path: str) -> dict[str, str]:
    """The description of each parameter and body property of an operation, by name."""
    op = doc["paths"][path][method]
    described = {p["name"]: p.get("description", "") for p in op.get("parameters", [])}
    content = op.get("requestBody", {}).get("content", {})
    for media in content.values():
        body = _resolve(doc, media["schema"])
        for name, prop in body.get("properties", {}).items():
            described.setdefault(name, _resolve(doc, prop).get("description", ""))
    return described


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method, path, op


@pytest.fixture
def sid(api: Api) -> str:
    """A session of alice with two messages, a tool call and a finished run."""
    sid = api.create(agent="coding")["session_id"]
    kw: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    api.manager.append_messages(**kw, messages=[MESSAGE, {"role": "assistant", "content": "a"}])
    api.manager.record_tool_call(**kw, tool="t", arguments={}, result="r")
    run_id = api.manager.start_run(**kw, input="task").run_id
    api.manager.add_run_step(**kw, run_id=run_id, kind="model")
    api.manager.finish_run(**kw, run_id=run_id, status="SUCCEEDED")
    return sid


@pytest.mark.parametrize("rule", RULES, ids=lambda r: f"{r.method} {r.path} {r.fields[0]}")
def test_c25_8_each_rule_is_stated_and_enforced(api: Api, sid: str, rule: Rule) -> None:
    """The rule is in the description of each field it binds, and a request breaking
    it is refused with the stated answer."""
    described = _descriptions(api.app.openapi(), rule.method, rule.path)
    for name in rule.fields:
        assert rule.stated in described[name], (name, described[name])
    problem = assert_problem(rule.request(api, sid), rule.status)
    assert rule.detail in problem["detail"], problem
    if rule.field is not None:
        assert problem.get("field") == rule.field, problem


def test_c25_8_every_listing_with_a_cursor_and_a_seq_bound_has_its_rule(api: Api) -> None:
    """Walks the document: each operation taking ``cursor`` and ``after`` or ``before``
    states the rule between them on its ``cursor`` (and has it in ``RULES``)."""
    bounded = {
        path
        for method, path, op in _operations(api.app.openapi())
        if {p["name"] for p in op.get("parameters", [])} >= {"cursor"}
        and {p["name"] for p in op.get("parameters", [])} & {"after", "before"}
    }
    assert bounded == set(BOUNDED_LISTINGS)
    assert bounded <= {r.path for r in RULES if r.fields == ("cursor",)}


def _cross_field_refusals() -> set[str]:
    """The messages of every ``ValidationError`` / ``ValueError`` the service and the
    HTTP layer raise with a constant text naming a rule between fields."""
    found = set()
    for path in [*SRC.glob("service/*.py"), *SRC.glob("http/*.py"), *SRC.glob("http/routes/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("ValidationError", "ValueError") or not node.args:
                continue
            text = node.args[0]
            if (
                isinstance(text, ast.Constant)
                and isinstance(text.value, str)
                and any(word in text.value for word in CROSS_FIELD_WORDS)
            ):
                found.add(text.value)
    return found


def test_c25_8_every_cross_field_refusal_has_a_stated_rule() -> None:
    """Every cross-field refusal in the code is the answer of a rule in ``RULES`` (so
    it is stated and checked above), or cannot be caused over HTTP."""
    refusals = _cross_field_refusals()
    assert len(refusals) >= 10, refusals  # the walk finds them
    covered = {text for text in refusals if any(r.detail in text for r in RULES)}
    assert refusals - covered - set(LIBRARY_ONLY) == set()
