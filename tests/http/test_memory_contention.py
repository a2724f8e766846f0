"""``modify_working_memory`` under contention (issue 25, newcomer report): every
attempt of it beaten by a concurrent append, forced deterministically. After
``max_attempts`` the client raises a VersionConflict that says how many attempts it
made (message and ``attempts``), having waited a jittered, growing pause between them;
one attempt more succeeds and loses nothing. The manager's own helper is checked the
same way in tests/contract/test_locking.py."""

from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api

import agentsession.client
from agentsession import VersionConflict
from agentsession.client import SessionClient
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


class Contended(InProcess):
    """Before each of the first ``beaten`` memory writes, another writer appends a
    message to the session, so the write's ``If-Match`` is stale: a real 412."""

    def __init__(self, http: TestClient, api: Api, beaten: int) -> None:
        super().__init__(http)
        self._api, self.beaten, self.writes = api, beaten, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT" and request.url.path.endswith("/memory"):
            self.writes += 1
            if self.writes <= self.beaten:
                sid = request.url.path.split("/")[3]
                r = self._api.http.post(
                    f"/v1/sessions/{sid}/messages",
                    json={"messages": [{"role": "user", "content": f"w{self.writes}"}]},
                    headers=self._api.alice,
                )
                assert r.status_code == 201, r.text
        return super().handle_request(request)


@pytest.mark.parametrize("attempts", [1, 4])
def test_the_client_gives_up_after_max_attempts_and_says_so(
    api: Api, attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = api.create()["session_id"]
    pauses: list[float] = []
    monkeypatch.setattr(agentsession.client.time, "sleep", pauses.append)
    token = api.alice["Authorization"].removeprefix("Bearer ")
    with TestClient(api.app) as http:
        transport = Contended(http, api, beaten=attempts)
        with SessionClient("http://testserver", token, transport=transport) as client:
            with pytest.raises(VersionConflict) as raised:
                client.modify_working_memory(
                    session_id=sid, fn=lambda m: {**m, "n": 1}, max_attempts=attempts
                )
            assert transport.writes == attempts
            assert raised.value.attempts == attempts
            assert f"gave up after {attempts} attempts" in str(raised.value)
            assert "max_attempts" in str(raised.value)
            assert isinstance(raised.value.__cause__, VersionConflict)
            # a pause after each conflicting attempt but the last, under its cap
            assert len(pauses) == attempts - 1
            assert all(0 <= p <= 0.005 * 2**i for i, p in enumerate(pauses))
            transport.beaten += attempts
            done = client.modify_working_memory(
                session_id=sid, fn=lambda m: {**m, "n": 1}, max_attempts=attempts + 1
            )
            assert done.data == {"n": 1} and transport.writes == 2 * attempts + 1
    messages = api.http.get(f"/v1/sessions/{sid}/messages", headers=api.alice).json()
    assert len(messages["items"]) == 2 * attempts  # nothing lost


def test_the_client_refuses_max_attempts_below_one(api: Api) -> None:
    sid = api.create()["session_id"]
    token = api.alice["Authorization"].removeprefix("Bearer ")
    with (
        TestClient(api.app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as client,
        pytest.raises(agentsession.ValidationError, match="max_attempts"),
    ):
        client.modify_working_memory(session_id=sid, fn=lambda m: m, max_attempts=0)
