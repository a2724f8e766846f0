"""Hostile input: one strict JSON reader for bodies and JSON query parameters, tool
lookup by POST body, trailing slashes, malformed path ids, 405 with the whole ``Allow``,
and an OpenAPI document stating the patterns the server enforces."""

from __future__ import annotations

import json
from typing import Any

import pytest
from http_support import Api, assert_problem

from agentsession.http.strictjson import MAX_REQUEST_DEPTH, read_json
from agentsession.jsonvalues import MAX_DEPTH

pytestmark = pytest.mark.store_independent

JSON = {"Content-Type": "application/json"}


def _post(api: Api, path: str, content: bytes, **headers: str) -> Any:
    return api.http.post(path, content=content, headers={**api.alice, **JSON, **headers})


def _session_count(api: Api) -> int:
    return len(api.http.get("/v1/sessions", headers=api.alice).json()["items"])


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# ------------------------------------------------------------------ depth


def test_deep_json_in_the_find_query_is_400_not_a_500(api: Api) -> None:
    """2,000-deep arguments in the deprecated GET lookup (12 KB encoded, inside the
    header limit): 400 malformed-json, no RecursionError reaching a 500."""
    sid = api.create()["session_id"]
    r = api.http.get(
        f"/v1/sessions/{sid}/tool-calls/find",
        params={"tool": "t", "arguments": _deep(2000)},
        headers=api.alice,
    )
    body = assert_problem(r, 400, "malformed-json")
    assert body["field"] == "query.arguments" and body["max_depth"] == MAX_REQUEST_DEPTH


def test_deeper_json_in_the_find_query_is_431_before_parsing(api: Api) -> None:
    """4,000-deep arguments make a request line over the header limit: 431, not a 500."""
    sid = api.create()["session_id"]
    r = api.http.get(
        f"/v1/sessions/{sid}/tool-calls/find",
        params={"tool": "t", "arguments": _deep(4000)},
        headers=api.alice,
    )
    assert_problem(r, 431, "header-fields-too-large")


@pytest.mark.parametrize("levels", [MAX_REQUEST_DEPTH + 1, 4000, 100_000])
def test_deep_json_bodies_are_400_before_parsing(api: Api, levels: int) -> None:
    """Nesting past the limit, in a body: 400 naming the limit; nothing written."""
    sid = api.create()["session_id"]
    content = b'{"tool": "t", "arguments": {"a": ' + _deep(levels).encode() + b"}}"
    r = _post(api, f"/v1/sessions/{sid}/tool-calls", content)
    assert assert_problem(r, 400, "malformed-json")["max_depth"] == MAX_REQUEST_DEPTH
    assert api.http.get(f"/v1/sessions/{sid}/tool-calls", headers=api.alice).json()["items"] == []


def test_every_storable_depth_fits_the_request_limit(api: Api) -> None:
    """The deepest value a store takes, inside the deepest envelope (a batch of
    messages), passes the reader: the limit never refuses what the policy allows."""
    sid = api.create()["session_id"]
    value: Any = []
    for _ in range(MAX_DEPTH - 2):  # message (0) > extra (1) > MAX_DEPTH - 2 lists
        value = [value]
    message = {"role": "user", "content": "x", "extra": value}
    content = json.dumps({"messages": [message]}).encode()
    r = _post(api, f"/v1/sessions/{sid}/messages", content)
    assert r.status_code == 201, r.text


def test_depth_scan_ignores_brackets_inside_strings() -> None:
    """Brackets in strings (escaped quotes too) do not count as nesting."""
    text = json.dumps({"s": "[" * 10_000 + '\\"' + "{" * 10_000})
    assert read_json(text, where="body") == json.loads(text)


# ------------------------------------------------------------- duplicate keys


@pytest.mark.parametrize(
    ("content", "field", "key"),
    [
        (b'{"agent": "a", "agent": "b"}', "body", "agent"),
        (b'{"metadata": {"x": {"k": 1, "k": 2}}}', "body.metadata.x", "k"),
        (b'{"metadata": {"l": [0, {"k": 1, "j": 0, "k": 2}]}}', "body.metadata.l[1]", "k"),
    ],
)
def test_duplicate_keys_are_400_naming_key_and_place(
    api: Api, content: bytes, field: str, key: str
) -> None:
    """A duplicate key, top level or nested: 400 naming the key and where; no session."""
    before = _session_count(api)
    body = assert_problem(_post(api, "/v1/sessions", content), 400, "malformed-json")
    assert body["field"] == field and body["key"] == key
    assert key in body["detail"]
    assert _session_count(api) == before


def test_duplicate_keys_in_the_find_query_are_400(api: Api) -> None:
    sid = api.create()["session_id"]
    r = api.http.get(
        f"/v1/sessions/{sid}/tool-calls/find",
        params={"tool": "t", "arguments": '{"a": 1, "a": 2}'},
        headers=api.alice,
    )
    assert assert_problem(r, 400, "malformed-json")["field"] == "query.arguments"


# ------------------------------------------------------------------ encodings


@pytest.mark.parametrize(
    "content",
    [
        '{"agent": "x"}'.encode("utf-16"),  # with its BOM
        '{"agent": "x"}'.encode("utf-16-le"),
        '{"agent": "x"}'.encode("utf-32"),
        b'\xef\xbb\xbf{"agent": "x"}',  # UTF-8 BOM
        '{"title": "café"}'.encode("latin-1"),  # not UTF-8
    ],
    ids=["utf-16", "utf-16-le", "utf-32", "utf-8-bom", "latin-1-bytes"],
)
def test_non_utf8_bodies_are_400(api: Api, content: bytes) -> None:
    """Only UTF-8 without a BOM is read; nothing is guessed, nothing written."""
    before = _session_count(api)
    assert_problem(_post(api, "/v1/sessions", content), 400, "malformed-json")
    assert _session_count(api) == before


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=latin-1", "application/json; charset=utf-16", "text/plain"],
)
def test_other_charsets_and_media_types_are_415(api: Api, content_type: str) -> None:
    before = _session_count(api)
    r = _post(api, "/v1/sessions", b'{"agent": "x"}', **{"Content-Type": content_type})
    assert assert_problem(r, 415, "unsupported-media-type")["field"] == "content-type"
    assert _session_count(api) == before


def test_a_body_without_content_type_is_415(api: Api) -> None:
    r = api.http.post("/v1/sessions", content=b'{"agent": "x"}', headers=api.alice)
    assert_problem(r, 415, "unsupported-media-type")


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/json; charset=UTF-8"]
)
def test_utf8_charset_is_accepted(api: Api, content_type: str) -> None:
    r = _post(api, "/v1/sessions", '{"title": "café"}'.encode(), **{"Content-Type": content_type})
    assert r.status_code == 201 and r.json()["title"] == "café"


# ---------------------------------------------------------- tool lookup by POST


def test_find_by_post_body_matches_the_deprecated_get(api: Api) -> None:
    """POST .../tool-calls/find answers what the GET does; arguments stay out of URLs."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}/tool-calls"
    call = api.http.post(
        base, json={"tool": "t", "arguments": {"b": 1, "a": [2]}}, headers=api.alice
    ).json()
    found = api.http.post(
        f"{base}/find", json={"tool": "t", "arguments": {"a": [2], "b": 1}}, headers=api.alice
    )
    assert found.status_code == 200 and found.json()["item"]["call_id"] == call["call_id"]
    missing = api.http.post(f"{base}/find", json={"tool": "t"}, headers=api.alice)
    assert missing.json() == {"item": None}
    assert_problem(
        api.http.post(f"{base}/find", json={"tool": "t", "nope": 1}, headers=api.alice), 422
    )
    # Another user's session: 404, as for every read.
    assert_problem(api.http.post(f"{base}/find", json={"tool": "t"}, headers=api.bob), 404)
    paths = api.http.get("/openapi.json").json()["paths"]
    spec = paths["/v1/sessions/{session_id}/tool-calls/find"]
    assert spec["get"]["deprecated"] is True and "deprecated" not in spec["post"]


# ------------------------------------------------------------------ paths


@pytest.mark.parametrize("with_key", [True, False])
@pytest.mark.parametrize("path", ["/v1/sessions/", "/v1/whoami/", "/healthz/"])
def test_trailing_slash_is_404_problem_not_a_redirect(api: Api, path: str, with_key: bool) -> None:
    r = api.http.get(path, headers=api.alice if with_key else {}, follow_redirects=False)
    assert_problem(r, 404, "not-found")
    assert "location" not in r.headers


@pytest.mark.parametrize(
    "tail", ["/runs/{bad}", "/runs/{bad}/steps", "/runs/{bad}/finish", "/runs/{bad}/steps#post"]
)
@pytest.mark.parametrize("bad", ["run_bad", "x" * 300, "ses_" + "a" * 26, "run_" + "A" * 26])
def test_malformed_run_id_is_404_like_a_missing_run(api: Api, tail: str, bad: str) -> None:
    """A malformed run id answers like a missing one: 404, the id cut to 40 chars."""
    sid = api.create()["session_id"]
    missing = "run_" + "a" * 26

    def ask(run_id: str) -> Any:
        path = f"/v1/sessions/{sid}" + tail.removesuffix("#post").format(bad=run_id)
        if tail.endswith("#post"):
            return api.http.post(path, json={"kind": "tool"}, headers=api.alice)
        if tail.endswith("finish"):
            return api.http.post(path, json={"status": "SUCCEEDED"}, headers=api.alice)
        return api.http.get(path, headers=api.alice)

    expected = assert_problem(ask(missing), 404, "not-found")
    got = assert_problem(ask(bad), 404, "not-found")
    assert got["detail"] == expected["detail"] == "run not found"
    assert got["run_id"] == bad[:40]
    # On a session the caller cannot see, it is the session that is not found.
    other = api.create(api.bob)["session_id"]
    r = api.http.get(f"/v1/sessions/{other}/runs/{bad}", headers=api.alice)
    assert assert_problem(r, 404)["detail"] == "session not found"


# -------------------------------------------------------------- methods


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("OPTIONS", "/v1/sessions", "GET, POST"),
        ("PUT", "/v1/sessions", "GET, POST"),
        ("OPTIONS", "/v1/sessions/{sid}", "DELETE, GET, PATCH"),
        ("POST", "/v1/sessions/{sid}", "DELETE, GET, PATCH"),
        ("OPTIONS", "/v1/sessions/{sid}/memory", "GET, PATCH, POST, PUT"),
        ("DELETE", "/v1/sessions/{sid}/tool-calls/find", "GET, POST"),
        ("PUT", "/v1/sessions/{sid}/runs/run_x/steps", "GET, POST"),
    ],
)
def test_405_names_every_method_of_the_path(api: Api, method: str, path: str, allow: str) -> None:
    """OPTIONS and other unsupported methods: 405 problem+json whose Allow lists every
    method any route of the path accepts (not only the first route's)."""
    sid = api.create()["session_id"]
    r = api.http.request(method, path.format(sid=sid), headers=api.alice)
    assert_problem(r, 405, "method-not-allowed")
    assert r.headers["allow"] == allow


# -------------------------------------------------------------- the document


def test_openapi_states_the_enforced_patterns(api: Api) -> None:
    """Path ids, names, tools, headers and titles carry the patterns and bounds the
    server enforces."""
    spec = api.http.get("/openapi.json").json()
    paths = spec["paths"]

    def param(path: str, method: str, name: str) -> dict[str, Any]:
        found = [p for p in paths[path][method]["parameters"] if p["name"] == name]
        schema: dict[str, Any] = found[0]["schema"]
        return {**schema.get("anyOf", [{}])[0], **schema}

    one = "/v1/sessions/{session_id}"
    assert param(one, "get", "session_id")["pattern"] == "^ses_[a-z2-7]{26}$"
    assert param(one + "/runs/{run_id}", "get", "run_id")["pattern"] == "^run_[a-z2-7]{26}$"
    # Any If-Match is read (one matching nothing is 412), so it states no pattern.
    assert "pattern" not in param(one, "patch", "if-match")
    assert param(one + "/messages", "post", "idempotency-key")["pattern"] == (
        "^[!-~]([ -~]{0,253}[!-~])?$"
    )
    assert param("/v1/sessions", "post", "idempotency-key")["pattern"]
    assert param("/v1/sessions", "get", "agent")["pattern"].startswith("^[A-Za-z0-9._:@+")
    assert param("/v1/users/{user_id}/data", "delete", "user_id")["pattern"]
    schemas = spec["components"]["schemas"]
    assert schemas["CreateSession"]["properties"]["agent"]["pattern"]
    title = schemas["CreateSession"]["properties"]["title"]["anyOf"][0]
    assert title["maxLength"] == 512
    assert schemas["RecordToolCall"]["properties"]["tool"]["pattern"]
    assert schemas["FindToolCall"]["properties"]["tool"]["anyOf"][0]["pattern"]


# ------------------------------------------------------------------ schema gaps


def test_unknown_query_parameters_are_422_naming_them(api: Api) -> None:
    """A misspelt or foreign query parameter is refused, not ignored; nothing read."""
    sid = api.create()["session_id"]
    r = api.http.get(f"/v1/sessions/{sid}/messages?limt=5&after=0", headers=api.alice)
    body = assert_problem(r, 422, "request-validation")
    assert body["errors"] == [{"field": "query.limt", "message": "unknown query parameter"}]
    r = api.http.post("/v1/sessions?x=1", json={}, headers=api.alice)
    assert assert_problem(r, 422, "request-validation")["errors"][0]["field"] == "query.x"
    assert _session_count(api) == 1
    ok = api.http.get(f"/v1/sessions/{sid}/messages?limit=5&after=0", headers=api.alice)
    assert ok.status_code == 200, ok.text


def test_a_query_parameter_given_twice_is_422_naming_it(api: Api) -> None:
    """``?status=ACTIVE&status=CLOSED`` is refused, not read as its last value (a
    count or a listing of the wrong sessions); on a write, nothing is written."""
    sid = api.create()["session_id"]
    r = api.http.get("/v1/sessions/count?status=ACTIVE&status=CLOSED", headers=api.alice)
    body = assert_problem(r, 422, "request-validation")
    assert body["errors"] == [{"field": "query.status", "message": "given more than once"}]
    r = api.http.get("/v1/sessions?agent=a&limit=1&agent=b", headers=api.alice)
    assert assert_problem(r, 422)["errors"][0]["field"] == "query.agent"
    r = api.http.delete(f"/v1/sessions/{sid}/messages?after_seq=0&after_seq=1", headers=api.alice)
    assert assert_problem(r, 422)["errors"][0]["message"] == "given more than once"
    ok = api.http.get("/v1/sessions/count?status=ACTIVE&agent=a", headers=api.alice)
    assert ok.status_code == 200, ok.text


def test_openapi_parameters_are_never_null(api: Api) -> None:
    """A header or query parameter is text or absent: no parameter schema offers
    JSON null (a client would send the text "null")."""
    spec = api.http.get("/openapi.json").json()
    schemas = [
        p["schema"]
        for ops in spec["paths"].values()
        for op in ops.values()
        for p in op.get("parameters", [])
    ]
    assert schemas and all("null" not in json.dumps(s) for s in schemas)
    limit = spec["paths"]["/v1/sessions"]["get"]["parameters"]
    assert next(p["schema"] for p in limit if p["name"] == "limit")["type"] == "integer"


def test_openapi_states_ttl_status_and_seq_bounds(api: Api) -> None:
    """The bounds the service enforces on ttl_seconds, tool-call and run statuses, a
    batch's length and seq cursors are in the document."""
    spec = api.http.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for model in ("CreateSession", "UpdateSession"):
        ttl = schemas[model]["properties"]["ttl_seconds"]
        assert (ttl["exclusiveMinimum"], ttl["maximum"]) == (0, 10 * 365 * 86400)
    assert schemas["RecordToolCall"]["properties"]["status"]["enum"] == ["ok", "error"]
    finish = schemas["FinishRun"]["properties"]["status"]["enum"]
    assert sorted(finish) == ["CANCELLED", "FAILED", "SUCCEEDED"]
    params = spec["paths"]["/v1/sessions/{session_id}/messages"]["get"]["parameters"]
    batch = schemas["AppendMessages"]["properties"]["messages"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 1000)
    bounds = {p["name"]: p["schema"].get("maximum") for p in params}
    assert bounds["after"] == bounds["before"] == 2**53 - 1


def test_seq_bounds_over_2_53_are_422(api: Api) -> None:
    """``after`` past 2**53-1 is refused by the schema's bound (422 naming it)."""
    sid = api.create()["session_id"]
    r = api.http.get(f"/v1/sessions/{sid}/tool-calls?after={2**53}", headers=api.alice)
    assert assert_problem(r, 422, "request-validation")["errors"][0]["field"] == "query.after"


def test_finish_with_a_non_final_status_is_422(api: Api) -> None:
    """PENDING is a RunStatus but no way to finish: the schema's enum refuses it."""
    sid = api.create()["session_id"]
    run = api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=api.alice).json()
    url = f"/v1/sessions/{sid}/runs/{run['run_id']}/finish"
    r = api.http.post(url, json={"status": "PENDING"}, headers=api.alice)
    assert_problem(r, 422, "request-validation")
    done = api.http.post(url, json={"status": "SUCCEEDED", "usage": {"t": 2.0}}, headers=api.alice)
    assert done.status_code == 200 and done.json()["usage"] == {"t": 2}, done.text


@pytest.mark.parametrize(("limit", "status"), [(1.0, 200), (1.5, 422), ("1", 422), (True, 422)])
def test_integral_numbers_are_integers(api: Api, limit: Any, status: int) -> None:
    """JSON Schema counts 1.0 as an integer, so ``message_limit: 1.0`` is 1; a
    fraction, a string or a boolean is still refused."""
    sid = api.create()["session_id"]
    r = api.http.post(
        f"/v1/sessions/{sid}/restore", json={"message_limit": limit}, headers=api.alice
    )
    assert r.status_code == status, r.text


@pytest.mark.parametrize("key", [b"k ", b" k", b"k\xe9"])
def test_idempotency_keys_outside_the_pattern_are_400(api: Api, key: bytes) -> None:
    """The Idempotency-Key pattern is enforced (a space at either end, which HTTP
    would strip, or a non-ASCII character): 400 naming the key; nothing closed."""
    sid = api.create()["session_id"]
    r = api.http.post(
        f"/v1/sessions/{sid}/close",
        json={},
        headers={**api.alice, "Idempotency-Key": key},  # type: ignore[dict-item]
    )
    assert assert_problem(r, 400, "validation-error")["field"] == "idempotency_key"
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["status"] == "ACTIVE"


def _keywords(node: Any) -> set[str]:
    """Every keyword used in a JSON Schema (the names under ``properties`` are field
    names, not keywords)."""
    if isinstance(node, list):
        return {k for item in node for k in _keywords(item)}
    if not isinstance(node, dict):
        return set()
    fields = node.get("properties", {})
    children = [v for k, v in node.items() if k != "properties"] + list(fields.values())
    return set(node) | {k for child in children for k in _keywords(child)}


def test_openapi_states_integer_bounds_as_json_schema(api: Api) -> None:
    """A usage count and ``message_limit`` state their bounds as ``minimum``/``maximum``;
    pydantic's own ``ge``/``le`` (no JSON Schema keyword, so ignored by fuzzers and
    clients) appear nowhere in the document."""
    spec = api.http.get("/openapi.json").json()
    assert not {"ge", "le", "gt", "lt"} & _keywords(spec["components"])
    schemas = spec["components"]["schemas"]
    usage = schemas["FinishRun"]["properties"]["usage"]["anyOf"][0]["additionalProperties"]
    assert (usage["type"], usage["minimum"], usage["maximum"]) == ("integer", 0, 2**53 - 1)
    limit = schemas["RestoreSession"]["properties"]["message_limit"]["anyOf"][0]
    assert (limit["minimum"], limit["maximum"]) == (0, 1000)


@pytest.mark.parametrize(
    "count",
    ["1" + "0" * 3999, str(2**53), "-1", '"5"', "1.5", "true"],
    ids=["4000-digits", "2**53", "negative", "string", "fraction", "boolean"],
)
def test_usage_counts_outside_0_to_2_53_are_422(api: Api, count: str) -> None:
    """A usage value must be an integer from 0 to 2**53-1 (a 4,000-digit one too is
    refused, not stored): 422 naming the field; the run stays RUNNING."""
    sid = api.create()["session_id"]
    run = api.http.post(f"/v1/sessions/{sid}/runs", json={}, headers=api.alice).json()
    url = f"/v1/sessions/{sid}/runs/{run['run_id']}"
    body = f'{{"status": "SUCCEEDED", "usage": {{"tokens": {count}}}}}'.encode()
    r = _post(api, f"{url}/finish", body)
    errors = assert_problem(r, 422, "request-validation")["errors"]
    assert errors[0]["field"] == "body.usage.tokens", errors
    assert api.http.get(url, headers=api.alice).json()["status"] == "RUNNING"


# ------------------------------------------------------------------ 422 answer size


def test_a_one_megabyte_unknown_key_is_not_echoed(api: Api) -> None:
    """An unknown key of 1 MB: the 422 quotes at most 200 characters of it (the answer
    was 2 MB: the key in ``detail`` and in ``errors``)."""
    key = "k" * (1 << 20)
    r = _post(api, "/v1/sessions", json.dumps({"agent": "a", key: 1}).encode())
    body = assert_problem(r, 422, "request-validation")
    assert len(r.content) < 2000
    assert len(body["errors"]) == 1 and len(body["errors"][0]["field"]) == 200
    assert body["errors"][0]["field"].endswith("...")


def test_a_hundred_thousand_unknown_fields_list_twenty(api: Api) -> None:
    """100,000 unknown fields: 20 errors listed and ``errors_omitted`` counting the rest
    (the answer was 6.7 MB)."""
    fields = {f"f{i}": 1 for i in range(100_000)}
    r = _post(api, "/v1/sessions", json.dumps({"agent": "a", **fields}).encode())
    body = assert_problem(r, 422, "request-validation")
    assert len(body["errors"]) == 20 and body["errors_omitted"] == 100_000 - 20
    assert len(r.content) < 5000
