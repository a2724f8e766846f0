"""Routes built from the table of operations (agentsession.http.routes.table), served
from rows that are not the project's table: a fixed path segment is tried before a
parameter whatever the rows' order, and a new plain row (an operation answering a
number) is served with no route written for it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

from agentsession import SessionManager
from agentsession.http.authlimit import AuthFailureLimiter
from agentsession.http.deps import Services
from agentsession.http.keys import MemoryKeyStore
from agentsession.http.problems import install_handlers
from agentsession.http.routes.table import served_routes
from agentsession.http.routing import precedes
from agentsession.operations import Operation, Route
from agentsession.service import AsyncSessionManager
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

S = "/v1/sessions/{session_id}"


#: Each fixed-segment route after the parameter route that would take its path.
ROWS = (
    Operation("get_session", "Session", (Route("GET", S, etag="session"),), doc="One session."),
    Operation(
        "count_sessions",
        "int",
        (Route("GET", "/v1/sessions/count", answer_member="count"),),
        doc="How many.",
    ),
    Operation("get_run", "Run", (Route("GET", S + "/tool-calls/{run_id}"),), doc="A run."),
    Operation(
        "get_tool_history", "Page[ToolCall]", (Route("GET", S + "/tool-calls/find"),), doc="Calls."
    ),
)


class Served:
    """An app serving ``ROWS`` over a fresh manager, and alice's headers."""

    def __init__(self, rows: Sequence[Operation]) -> None:
        self.manager = SessionManager(MemoryStore())
        keys = MemoryKeyStore()
        self.alice = {"Authorization": f"Bearer {keys.create(user_id='alice')[1]}"}
        settings = Settings(url="memory://")
        app = FastAPI()
        install_handlers(app)
        routes: list[BaseRoute] = [*served_routes(rows, [], library=SessionManager)]
        app.include_router(APIRouter(routes=routes))
        app.state.services = Services(
            AsyncSessionManager(self.manager), keys, settings, AuthFailureLimiter.of(settings)
        )
        self.app = app
        self.http = TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def served() -> Iterator[Served]:
    app = Served(ROWS)
    yield app
    app.http.close()


def test_fixed_segments_are_tried_first_whatever_the_table_order() -> None:
    order = [route.path_format for route in served_routes(ROWS, [], library=SessionManager)]
    assert order == ["/v1/sessions/count", S, S + "/tool-calls/find", S + "/tool-calls/{run_id}"]
    # Listed the other way round: the table's order.
    order = [route.path_format for route in served_routes(ROWS[::-1], [], library=SessionManager)]
    assert order == [S + "/tool-calls/find", S + "/tool-calls/{run_id}", "/v1/sessions/count", S]


def test_a_static_path_reaches_its_own_route(served: Served) -> None:
    session = served.manager.create_session(user_id="alice", agent="coding")
    served.manager.create_session(user_id="alice", agent="other")
    counted = served.http.get(
        "/v1/sessions/count", params={"agent": "coding"}, headers=served.alice
    )
    assert counted.status_code == 200, counted.text
    assert counted.json() == {"count": 1}
    calls = served.http.get(
        f"/v1/sessions/{session.session_id}/tool-calls/find", headers=served.alice
    )
    assert calls.status_code == 200, calls.text
    assert calls.json()["items"] == []
    # The parameter routes still take the rest.
    one = served.http.get(f"/v1/sessions/{session.session_id}", headers=served.alice)
    assert one.status_code == 200 and one.headers["ETag"] == f'"{session.session_id}@1"'
    missing = served.http.get(
        f"/v1/sessions/{session.session_id}/tool-calls/run_{'a' * 26}", headers=served.alice
    )
    assert missing.status_code == 404 and missing.json()["run_id"] == f"run_{'a' * 26}"


def test_a_new_plain_row_is_documented_from_the_manager_and_the_registry(served: Served) -> None:
    """count_sessions: its query parameters take the limits they have everywhere (``agent``
    the list's), its answer ``{"count": n}``, its operationId and description the row's."""
    operation = served.app.openapi()["paths"]["/v1/sessions/count"]["get"]
    assert operation["operationId"] == "count_sessions"
    assert operation["description"] == "How many."
    query = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
    assert set(query) == {"status", "agent", "parent_session_id", "all_users"}
    agent = query["agent"]
    assert not agent["required"]
    assert agent["schema"]["anyOf"][0]["pattern"].startswith("^[A-Za-z0-9")
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/CountResult"}


@pytest.mark.parametrize(
    ("path", "other", "expected"),
    [
        ("/v1/sessions/count", S, True),
        (S, "/v1/sessions/count", False),
        (S + "/tool-calls/find", S + "/tool-calls", False),  # never the same request
        ("/v1/sessions/count", "/v1/whoami/count", False),
        ("/a/b/{y}", "/a/{x}/c", True),  # the first place they differ decides
        ("/a/{x}/c", "/a/b/{y}", False),
        (S, S, False),
    ],
)
def test_which_route_precedes(path: str, other: str, expected: bool) -> None:
    assert precedes(path, other) is expected


def test_a_row_and_the_routes_written_by_hand_must_agree() -> None:
    """A row without ``route_by_hand`` whose route is also written by hand, a row
    with it whose route is not written, and a route written for no row: no app."""
    (built,) = served_routes(ROWS[:1], [], library=SessionManager)
    with pytest.raises(LookupError, match="say why in the row's route_by_hand"):
        served_routes(ROWS[:1], [built], library=SessionManager)
    by_hand = Operation("get_session", "Session", ROWS[0].routes, route_by_hand="a reason")
    with pytest.raises(LookupError, match="the row has route_by_hand but no route is written"):
        served_routes([by_hand], [], library=SessionManager)
    with pytest.raises(LookupError, match="that no row declares"):
        served_routes(ROWS[1:2], [built], library=SessionManager)
