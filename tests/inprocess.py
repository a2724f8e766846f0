"""A sync httpx transport answering from an ASGI app in this process, for
:class:`~agentsession.client.SessionClient` in tests without a server.

Importable from every test module (``tests/`` is on ``sys.path``)::

    with TestClient(app) as http:
        client = SessionClient("http://testserver", token, transport=InProcess(http))

Starlette's test client cannot serve as the transport itself: it speaks ``httpx2``
when that is installed (openai-agents brings it), and its answers are then not
``httpx`` responses.
"""

from __future__ import annotations

import httpx
from starlette.testclient import TestClient

__all__ = ["InProcess"]


class InProcess(httpx.BaseTransport):
    """Each request sent through ``http`` (a Starlette ``TestClient`` of the app),
    its answer copied into an ``httpx.Response``."""

    def __init__(self, http: TestClient) -> None:
        self._http = http

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self._http.request(
            request.method, str(request.url), headers=request.headers, content=request.read()
        )
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    def close(self) -> None:
        self._http.close()
