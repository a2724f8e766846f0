"""agentsession inside a Flask service: a small chat API for teams on Flask.

The app factory takes a :class:`~agentsession.SessionManager` (one per process; it is
thread-safe), so tests pass one over ``memory://`` and production one over SQLite or
PostgreSQL. Each route parses the request, makes one SessionManager call and maps
:class:`~agentsession.AgentSessionError` to a JSON error with its ``http_status``.

Routes (the user is the ``X-User`` header here; put your real authentication there):

* ``POST /sessions`` ``{"agent": "...", "title": "..."}`` -> 201, the session
* ``POST /sessions/<id>/chat`` ``{"content": "..."}`` -> 201, the user message and the
  assistant reply, appended together (one version step; a retry with the same
  ``Idempotency-Key`` header stores nothing twice)
* ``GET /sessions/<id>/messages?limit=N&cursor=C`` -> a page: the newest N messages,
  oldest first (``{"items": [...], "next_cursor": ..., "has_more": ...}``); pass
  ``next_cursor`` as ``cursor`` for the older ones

Run it::

    pip install 'agentsession' flask
    AGENTSESSION_URL=sqlite:///chat.db flask --app 'examples/flask_app/app.py:main()' run
    curl -s -X POST localhost:5000/sessions -H 'X-User: alice' --json '{}'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import BadRequest

from agentsession import AgentSessionError, NotFound, SessionManager

Responder = Callable[[str], str]


def canned_reply(text: str) -> str:
    """The stand-in for your agent: answers every message the same way."""
    return f"You said: {text}"


def create_app(manager: SessionManager, *, responder: Responder = canned_reply) -> Flask:
    """Build the Flask app around ``manager`` (the caller keeps and closes it).

    Args:
        manager: where sessions live.
        responder: turns the user's text into the assistant's reply.
    """
    app = Flask(__name__)

    def user() -> str:
        name = request.headers.get("X-User")
        if not name:
            raise _Unauthorized
        return name

    def body() -> dict[str, Any]:
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise BadRequest("send a JSON object")
        return data

    @app.post("/sessions")
    def create_session() -> ResponseReturnValue:
        data = body()
        session = manager.create_session(
            user_id=user(),
            agent=data.get("agent", "chat"),
            title=data.get("title"),
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        return session.model_dump(mode="json"), 201

    @app.post("/sessions/<session_id>/chat")
    def chat(session_id: str) -> ResponseReturnValue:
        content = body().get("content")
        if not isinstance(content, str) or not content:
            raise BadRequest("`content` must be a non-empty string")
        stored = manager.append_messages(
            session_id=session_id,
            user_id=user(),
            messages=[
                {"role": "user", "content": content},
                {"role": "assistant", "content": responder(content)},
            ],
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        return {
            "reply": stored[-1].content,
            "messages": [m.model_dump(mode="json", exclude_unset=True) for m in stored],
        }, 201

    @app.get("/sessions/<session_id>/messages")
    def history(session_id: str) -> ResponseReturnValue:
        page = manager.get_messages(
            session_id=session_id,
            user_id=user(),
            limit=request.args.get("limit", default=50, type=int),
            cursor=request.args.get("cursor"),
        )
        return {
            "items": [m.model_dump(mode="json", exclude_unset=True) for m in page.items],
            "next_cursor": page.next_cursor,
            "has_more": page.has_more,
        }

    @app.errorhandler(AgentSessionError)
    def on_session_error(exc: AgentSessionError) -> ResponseReturnValue:
        if exc.http_status >= 500:
            app.logger.exception("agentsession failed")
            return jsonify(error="internal-error", message="internal error"), exc.http_status
        if isinstance(exc, NotFound):
            # A missing session and another user's look the same: no id is echoed.
            return jsonify(error=exc.code, message="not found"), exc.http_status
        return jsonify(error=exc.code, message=exc.message, **_public(exc)), exc.http_status

    @app.errorhandler(BadRequest)
    def on_bad_request(exc: BadRequest) -> ResponseReturnValue:
        return jsonify(error="bad-request", message=exc.description), 400

    @app.errorhandler(_Unauthorized)
    def on_unauthorized(exc: _Unauthorized) -> ResponseReturnValue:
        return jsonify(error="unauthenticated", message="send an X-User header"), 401

    return app


class _Unauthorized(Exception):
    """No user on the request."""


def _public(exc: AgentSessionError) -> dict[str, Any]:
    return {k: v for k, v in exc.context.items() if k not in {"error", "message", "user_id"}}


def main() -> Flask:
    """The app over ``AGENTSESSION_URL`` (default ``sqlite:///chat.db``)."""
    url = os.environ.get("AGENTSESSION_URL", "sqlite:///chat.db")
    return create_app(SessionManager.from_url(url, auto_migrate=True))
