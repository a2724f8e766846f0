"""Session records over HTTP: ``PUT/GET/DELETE /v1/sessions/{id}/records`` and ``GET
.../records/one``, base64 data, and the clients' methods of the manager's names."""

from __future__ import annotations

import asyncio
import base64
import re

import httpx
import pytest
from http_support import Api, assert_problem
from test_client_flows import FlakyASGI

from agentsession import (
    DeleteRecordsResult,
    RecordWrite,
    SessionManager,
    SessionNotFound,
    VersionConflict,
)
from agentsession.client import AsyncSessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.ids import new_id
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

pytestmark = pytest.mark.store_independent

ALL_BYTES = bytes(range(256))
INVALID_BASE64 = ["YQ", "YQ=", "YWJj$A==", "YQ==YQ==", "\u00e9AAA", "Y Q=="]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _put(api: Api, sid: str, *records: dict[str, object], **headers: str) -> httpx.Response:
    return api.http.put(
        f"/v1/sessions/{sid}/records",
        json={"records": list(records)},
        headers={**api.alice, **headers},
    )


def _keys(api: Api, sid: str, query: str = "") -> list[list[str]]:
    r = api.http.get(f"/v1/sessions/{sid}/records{query}", headers=api.alice)
    assert r.status_code == 200, r.text
    return [[item["namespace"], item["key"]] for item in r.json()["items"]]


def test_put_get_list_delete_round_trip(api: Api) -> None:
    sid = api.create()["session_id"]
    r = _put(
        api,
        sid,
        {"namespace": "cp", "key": "b", "data": _b64(ALL_BYTES), "meta": {"type": "msgpack"}},
        {"key": "a"},
        **{"Idempotency-Key": "put-1"},
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"written": 2, "session_version": 2}
    assert r.headers["etag"] == f'"{sid}@2"'
    again = _put(
        api,
        sid,
        {"namespace": "cp", "key": "b", "data": _b64(ALL_BYTES), "meta": {"type": "msgpack"}},
        {"key": "a"},
        **{"Idempotency-Key": "put-1"},
    )
    assert again.json() == r.json() and again.headers["idempotent-replayed"] == "true"
    one = api.http.get(
        f"/v1/sessions/{sid}/records/one", params={"namespace": "cp", "key": "b"}, headers=api.alice
    )
    assert one.status_code == 200, one.text
    body = one.json()
    assert base64.b64decode(body["data"], validate=True) == ALL_BYTES
    assert (body["meta"], body["version"], body["session_id"]) == ({"type": "msgpack"}, 2, sid)
    assert _keys(api, sid) == [["", "a"], ["cp", "b"]]
    assert _keys(api, sid, "?order=desc&limit=1") == [["cp", "b"]]
    assert _keys(api, sid, "?namespace=cp&prefix=b") == [["cp", "b"]]
    assert _keys(api, sid, "?namespace=cp&after=b") == []
    gone = api.http.delete(f"/v1/sessions/{sid}/records?namespace=cp", headers=api.alice)
    assert gone.json() == {"removed": 1, "session_version": 3}
    assert gone.headers["etag"] == f'"{sid}@3"'
    assert _keys(api, sid) == [["", "a"]]


def test_openapi_documents_the_record_routes(api: Api) -> None:
    spec = api.http.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"put", "get", "delete"} <= set(paths["/v1/sessions/{session_id}/records"])
    assert "get" in paths["/v1/sessions/{session_id}/records/one"]
    data = spec["components"]["schemas"]["RecordIn"]["properties"]["data"]
    assert data["contentEncoding"] == "base64" and "RFC 4648" in data["description"]


@pytest.mark.parametrize("size", range(7))
def test_the_documented_data_pattern_is_what_the_server_takes(api: Api, size: int) -> None:
    """A client (or a fuzzer) that follows the schema's ``pattern`` sends only data the
    server takes; the invalid forms the server refuses do not match it."""
    spec = api.http.get("/openapi.json").json()
    pattern = spec["components"]["schemas"]["RecordIn"]["properties"]["data"]["pattern"]
    assert re.search(pattern, _b64(ALL_BYTES[:size]))
    for bad in INVALID_BASE64:
        assert not re.search(pattern, bad), bad


def test_a_max_size_record_fits_the_default_body_limit(api: Api) -> None:
    """base64 makes a record of ``max_record_bytes`` a third bigger; the default body
    limit leaves room for it and a 64 KiB meta."""
    size = api.manager.limits.max_record_bytes
    data = bytes(range(256)) * (size // 256)
    sid = api.create()["session_id"]
    meta = {"m": "x" * (60 * 1024)}
    r = _put(api, sid, {"namespace": "cp", "key": "big", "data": _b64(data), "meta": meta})
    assert r.status_code == 200, r.text
    back = api.manager.get_record(session_id=sid, user_id="alice", namespace="cp", key="big")
    assert back is not None and back.data == data


def test_a_key_given_twice_in_one_put_is_documented_and_the_later_wins(api: Api) -> None:
    spec = api.http.get("/openapi.json").json()
    records = spec["components"]["schemas"]["PutRecords"]["properties"]["records"]
    assert "the later one wins" in records["description"]
    sid = api.create()["session_id"]
    r = _put(api, sid, {"key": "k", "data": _b64(b"1")}, {"key": "k", "data": _b64(b"2")})
    assert r.status_code == 200, r.text
    one = api.http.get(f"/v1/sessions/{sid}/records/one?key=k", headers=api.alice)
    assert one.json()["data"] == _b64(b"2")


@pytest.mark.parametrize("data", INVALID_BASE64)
def test_invalid_base64_is_422_and_writes_nothing(api: Api, data: str) -> None:
    sid = api.create()["session_id"]
    r = _put(api, sid, {"key": "fine"}, {"key": "bad", "data": data})
    assert_problem(r, 422)
    assert _keys(api, sid) == []


def test_absent_record_is_the_standard_404(api: Api) -> None:
    sid = api.create()["session_id"]
    r = api.http.get(f"/v1/sessions/{sid}/records/one?key=nope", headers=api.alice)
    body = assert_problem(r, 404, "not-found")
    assert (body["namespace"], body["key"]) == ("", "nope")
    other = api.http.get(f"/v1/sessions/{sid}/records/one?key=nope", headers=api.bob)
    assert "key" not in assert_problem(other, 404, "not-found")


def test_stale_if_match_is_412_and_closed_is_409(api: Api) -> None:
    sid = api.create()["session_id"]
    _put(api, sid, {"key": "k"})
    stale = {"If-Match": f'"{sid}@1"'}
    assert_problem(_put(api, sid, {"key": "x"}, **stale), 412, "version-conflict")
    r = api.http.delete(f"/v1/sessions/{sid}/records", headers={**api.alice, **stale})
    assert_problem(r, 412, "version-conflict")
    etag = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).headers["etag"]
    api.http.post(f"/v1/sessions/{sid}/close", headers={**api.alice, "If-Match": etag})
    assert_problem(_put(api, sid, {"key": "x"}), 409, "session-not-active")
    assert _keys(api, sid) == [["", "k"]]


def _app_and_token() -> tuple[object, str]:
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    return create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys), token


def test_async_client_mirrors_the_manager() -> None:
    app, token = _app_and_token()
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]

    async def main() -> None:
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            sid = (await c.create_session()).session_id
            put = await c.put_records(
                session_id=sid,
                records=[RecordWrite("ns", "k", ALL_BYTES, {"t": 1}), RecordWrite("", "e")],
            )
            assert put.written == 2
            got = await c.get_record(session_id=sid, namespace="ns", key="k")
            assert got is not None and (got.data, got.meta) == (ALL_BYTES, {"t": 1})
            assert await c.get_record(session_id=sid, namespace="ns", key="none") is None
            with pytest.raises(SessionNotFound):
                await c.get_record(session_id=new_id("ses"), namespace="ns", key="k")
            listed = await c.list_records(session_id=sid, descending=True)
            assert [(r.namespace, r.key) for r in listed] == [("ns", "k"), ("", "e")]
            with pytest.raises(VersionConflict):
                await c.delete_records(session_id=sid, expected_version=1)
            gone = await c.delete_records(session_id=sid, namespace="")
            assert gone == DeleteRecordsResult(removed=1, session_version=put.session_version + 1)

    asyncio.run(main())


def test_async_client_put_retried_after_a_lost_answer_replays() -> None:
    """The client sends one Idempotency-Key on every try of a put (and a key on a
    DELETE): a put whose answer was lost is replayed, not written twice."""
    app, token = _app_and_token()

    async def main() -> None:
        flaky = FlakyASGI(httpx.ASGITransport(app=app))  # type: ignore[arg-type]
        async with AsyncSessionClient("http://t", token, transport=flaky, backoff=0.001) as c:
            sid = (await c.create_session()).session_id
            first = await c.put_records(session_id=sid, records=[RecordWrite("ns", "a")])
            flaky.drops = 1
            put = await c.put_records(session_id=sid, records=[RecordWrite("ns", "b", b"x")])
            assert put.session_version == first.session_version + 1  # one write, replayed
            puts = [key for method, key in flaky.seen if method == "PUT"]
            assert len(puts) == 3 and puts[1] == puts[2] and puts[0] != puts[1]
            assert (await c.delete_records(session_id=sid, namespace="ns")).removed == 2
            assert [key for method, key in flaky.seen if method == "DELETE"] != [None]
            assert await c.list_records(session_id=sid) == []

    asyncio.run(main())
