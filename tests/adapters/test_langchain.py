"""The LangChain chat message history on every store and over HTTP: every message type
back byte-exact, the derived fields, messages from other writers, clear, closed
sessions, the async backends, and RunnableWithMessageHistory over two turns and in a
new history object."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip(
    "langchain_core", reason="langchain-core not installed: pip install -e '.[dev]'"
)

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from agentsession import (
    AsyncSessionManager,
    Limits,
    SessionManager,
    SessionNotActive,
    UnsupportedValue,
    ValidationError,
)
from agentsession.adapters.langchain import AgentSessionChatMessageHistory
from agentsession.client import AsyncSessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.base import SessionStore

# LangChain deprecates chat histories and RunnableWithMessageHistory (removal in 2.0).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: One message of each type, with the details a re-encoding would lose: ids,
#: additional_kwargs, response_metadata, usage, content parts, unicode, names.
MESSAGES: list[BaseMessage] = [
    SystemMessage("You answer in one word.", id="sys-1"),
    HumanMessage("Wetter in Zürich? 🌧", name="alice", additional_kwargs={"lang": "de"}),
    AIMessage(
        "",
        id="run-1",
        tool_calls=[{"name": "get_weather", "args": {"city": "Zürich"}, "id": "call_1"}],
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
    ),
    ToolMessage("rain, 7°C", tool_call_id="call_1", artifact={"raw": [7, None]}),
    AIMessage([{"type": "text", "text": "Rain."}], additional_kwargs={"refusal": None}),
    ChatMessage("Noted.", role="developer"),
    ChatMessage("Hm.", role="critic"),
    FunctionMessage("42", name="answer"),
]


def dumped(messages: list[BaseMessage]) -> list[str]:
    """Each message's ``message_to_dict`` as JSON text: equal texts, equal messages."""
    return [json.dumps(message_to_dict(m), ensure_ascii=False) for m in messages]


class Harness:
    """A history factory over one backend, and the manager underneath for checks."""

    def __init__(self, manager: SessionManager, backend: Any) -> None:
        self.manager, self.backend = manager, backend

    def history(self, session_id: str = "conversation_123") -> AgentSessionChatMessageHistory:
        """A history owned by ``alice``."""
        return AgentSessionChatMessageHistory(session_id, backend=self.backend, user_id="alice")

    def session_id(self, key: str = "conversation_123") -> str:
        """Our id of the session keyed ``key``."""
        return self.manager.get_session_by_key(
            user_id="alice", agent="langchain", external_key=key
        ).session_id

    def messages(self, key: str = "conversation_123") -> list[Any]:
        """The stored messages of the session keyed ``key``, oldest first."""
        return self.manager.get_messages(
            session_id=self.session_id(key), user_id="alice", limit=1000
        ).items


@pytest.fixture
def make_harness() -> type[Harness]:
    """The LangChain history's harness, for the shared ``harness`` fixture (conftest.py)."""
    return Harness


def test_every_message_type_comes_back_byte_exact(harness: Harness) -> None:
    """Each LangChain message type returns with every field as it went in, and the
    stored message carries role, text and tool-call fields for agentsession's tools."""
    history = harness.history()
    history.add_messages(MESSAGES)
    assert dumped(history.messages) == dumped(MESSAGES)
    assert dumped(harness.history().messages) == dumped(MESSAGES)  # a new object too
    stored = harness.messages()
    assert [m.role.value for m in stored] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "developer",
        "assistant",
        "tool",
    ]
    assert stored[1].content == "Wetter in Zürich? 🌧" and stored[4].content == "Rain."
    assert stored[2].tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Z\\u00fcrich"}'},
        }
    ]
    assert stored[3].tool_call_id == "call_1"
    assert [m.payload()["lc"] for m in stored] == [message_to_dict(m) for m in MESSAGES]


def test_an_unwritten_history_reads_empty_and_the_first_message_creates_it(
    harness: Harness,
) -> None:
    """Reading, clearing or adding ``[]`` creates nothing; the first message creates the
    session, keyed by the LangChain session id under agent ``langchain``."""
    history = harness.history("fresh")
    assert history.messages == []
    history.clear()
    history.add_messages([])
    assert harness.manager.list_sessions(user_id="alice").items == []
    history.add_user_message("hi")
    history.add_ai_message("hello")
    [created] = harness.manager.list_sessions(user_id="alice").items
    assert (created.external_key, created.agent, created.message_count) == ("fresh", "langchain", 2)
    assert [type(m) for m in history.messages] == [HumanMessage, AIMessage]


def test_clear_keeps_the_session_and_its_working_memory(harness: Harness) -> None:
    """clear empties the history; the session, its id and working memory stay."""
    history = harness.history()
    history.add_messages(MESSAGES[:3])
    sid = harness.session_id()
    harness.manager.update_working_memory(session_id=sid, user_id="alice", patch={"goal": "g"})
    history.clear()
    assert history.messages == []
    history.add_messages(MESSAGES[:1])
    assert dumped(history.messages) == dumped(MESSAGES[:1])
    assert harness.session_id() == sid
    assert harness.manager.get_working_memory(session_id=sid, user_id="alice").goal == "g"


def test_messages_from_other_writers_convert_by_role(harness: Harness) -> None:
    """Messages appended without ``lc`` (library, HTTP, restore), or with an ``lc``
    that is no LangChain message, read as LangChain messages by role, assistant tool
    calls as LangChain tool calls."""
    history = harness.history()
    history.add_messages(MESSAGES[:1])
    harness.manager.append_messages(
        session_id=harness.session_id(),
        user_id="alice",
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sun"},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "mine", "lc": {"lang": "de"}},
            {"role": "user", "content": "too", "lc": {"type": "human", "data": {"content": 5}}},
        ],
    )
    got = history.messages
    assert dumped(got[:1]) == dumped(MESSAGES[:1])
    assert got[1] == HumanMessage("Weather?")
    assert isinstance(got[2], AIMessage) and got[2].content == ""
    assert [(c["name"], c["args"], c["id"]) for c in got[2].tool_calls] == [
        ("get_weather", {"city": "Bern"}, "c1"),
        ("f", {}, "c2"),
    ]
    assert got[3] == ToolMessage("sun", tool_call_id="c1")
    assert got[4] == SystemMessage([{"type": "text", "text": "Be brief."}])
    assert got[5:] == [HumanMessage("mine"), HumanMessage("too")]  # a foreign ``lc``


def test_a_closed_session_refuses_writes_and_stays_readable(harness: Harness) -> None:
    """No silent restore: add and clear on a CLOSED session raise SessionNotActive."""
    history = harness.history()
    history.add_messages(MESSAGES[:2])
    harness.manager.close_session(session_id=harness.session_id(), user_id="alice")
    with pytest.raises(SessionNotActive):
        history.add_messages(MESSAGES[2:3])
    with pytest.raises(SessionNotActive):
        history.clear()
    assert dumped(history.messages) == dumped(MESSAGES[:2])


def test_a_bad_message_is_refused_and_nothing_of_its_batch_is_stored(harness: Harness) -> None:
    """An element that is not a LangChain message raises ValidationError before any
    write."""
    history = harness.history()
    history.add_messages(MESSAGES[:1])
    with pytest.raises(ValidationError) as bad:
        history.add_messages([MESSAGES[1], {"role": "user"}])  # type: ignore[list-item]
    assert bad.value.field == "messages[1]"
    assert dumped(history.messages) == dumped(MESSAGES[:1])


def test_tool_call_args_json_cannot_carry_are_refused(harness: Harness) -> None:
    """An AI message whose tool call args hold a datetime raises UnsupportedValue
    naming the message; nothing of its batch is stored."""
    history = harness.history()
    history.add_messages(MESSAGES[:1])
    odd = AIMessage("", tool_calls=[{"name": "f", "args": {"at": datetime.now(UTC)}, "id": "c"}])
    with pytest.raises(UnsupportedValue) as bad:
        history.add_messages([MESSAGES[1], odd])
    assert bad.value.field == "messages[1].tool_calls"
    assert dumped(history.messages) == dumped(MESSAGES[:1])


def test_batches_over_the_limit_are_split(store: SessionStore) -> None:
    """More messages than ``limits.max_batch_messages`` go in several appends, all
    stored in order and read back across pages."""
    manager = SessionManager(store, limits=Limits(max_batch_messages=3, max_page_size=2))
    history = AgentSessionChatMessageHistory("big", backend=manager, user_id="alice")
    messages = [HumanMessage(str(i)) for i in range(7)]
    history.add_messages(messages)
    assert history.messages == messages
    s = manager.get_session_by_key(user_id="alice", agent="langchain", external_key="big")
    assert s.message_count == 7 and s.version == 4  # created at 1, then three appends
    history.close()


def ask(history_of: Any, model: FakeMessagesListChatModel, question: str) -> str:
    """One turn of a RunnableWithMessageHistory chain over ``model``."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,  # type: ignore[arg-type]
        history_of,
        input_messages_key="question",
        history_messages_key="history",
    )
    answer = chain.invoke({"question": question}, config={"configurable": {"session_id": "trip"}})
    return str(answer.content)


def test_runnable_with_message_history_over_two_turns_and_a_restore(harness: Harness) -> None:
    """Two turns of RunnableWithMessageHistory store both exchanges; a third turn with
    a new history object (a restart) hands the model the whole conversation."""
    model = FakeMessagesListChatModel(
        responses=[AIMessage("Rain."), AIMessage("Zürich."), AIMessage("Twice.")]
    )
    prompts: list[list[BaseMessage]] = []
    model_invoke = model.invoke

    def recording(messages: Any, *args: Any, **kwargs: Any) -> Any:
        prompts.append(messages.to_messages())
        return model_invoke(messages, *args, **kwargs)

    object.__setattr__(model, "invoke", recording)
    histories: dict[str, AgentSessionChatMessageHistory] = {}

    def history_of(session_id: str) -> AgentSessionChatMessageHistory:
        return histories.setdefault(session_id, harness.history(session_id))

    assert ask(history_of, model, "Weather in Zürich?") == "Rain."
    assert ask(history_of, model, "Which city?") == "Zürich."
    histories.clear()  # a restart: new history objects over the same sessions
    assert ask(history_of, model, "How often did I ask?") == "Twice."
    texts = [(m.type, m.content) for m in harness.history("trip").messages]
    assert texts == [
        ("human", "Weather in Zürich?"),
        ("ai", "Rain."),
        ("human", "Which city?"),
        ("ai", "Zürich."),
        ("human", "How often did I ask?"),
        ("ai", "Twice."),
    ]
    assert [(m.type, m.content) for m in prompts[-1]] == [("system", "You are terse."), *texts[:5]]


def test_async_manager_and_async_client_backends(store: SessionStore) -> None:
    """The async methods over an AsyncSessionManager and an AsyncSessionClient; the
    sync ones refuse an AsyncSessionClient with a TypeError naming the async ones."""
    manager = SessionManager(store)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)

    async def flow(backend: Any, session_id: str) -> list[str]:
        history = AgentSessionChatMessageHistory(session_id, backend=backend, user_id="alice")
        await history.aadd_messages(MESSAGES)
        await history.aclear()
        await history.aadd_messages(MESSAGES[1:3])
        return dumped(await history.aget_messages())

    async def main() -> list[list[str]]:
        async with AsyncSessionClient(
            "http://t", token, transport=httpx.ASGITransport(app=app)
        ) as client:
            over_http = await flow(client, "async-http")
            with pytest.raises(TypeError, match="aget_messages"):
                _ = AgentSessionChatMessageHistory("x", backend=client, user_id="alice").messages
        return [await flow(AsyncSessionManager(manager), "async-manager"), over_http]

    assert asyncio.run(main()) == [dumped(MESSAGES[1:3])] * 2


def test_sync_methods_work_inside_a_running_event_loop(store: SessionStore) -> None:
    """A sync call from a coroutine (as a sync chain inside async code makes) runs on
    a loop of its own in a worker thread instead of failing."""
    history = AgentSessionChatMessageHistory(
        "in-loop", backend=SessionManager(store), user_id="alice"
    )

    async def main() -> list[BaseMessage]:
        history.add_messages(MESSAGES[:2])
        return history.messages

    assert dumped(asyncio.run(main())) == dumped(MESSAGES[:2])


def test_an_unsupported_backend_or_session_id_is_refused_at_once(store: SessionStore) -> None:
    """A backend that is none of the four raises TypeError, a session id that is not a
    string ValidationError, both in the constructor."""
    with pytest.raises(TypeError, match="SessionManager"):
        AgentSessionChatMessageHistory("x", backend=store, user_id="alice")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        AgentSessionChatMessageHistory(7, backend=SessionManager(store), user_id="alice")  # type: ignore[arg-type]


def test_the_example_runs_and_the_cli_shows_its_session(tmp_path: Path) -> None:
    """examples/langchain_history.py runs offline and prints its two turns and its
    restore; ``agentsession sessions messages`` shows the conversation."""
    example = Path(__file__).resolve().parents[2] / "examples" / "langchain_history.py"
    done = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["Rain in Zürich.", "You asked about Zürich.", "restored: 4 messages"]
    session_id = lines[3].split()[1].rstrip(":")
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "--url",
            "sqlite:///sessions.db",
            "sessions",
            "messages",
            session_id,
            "--user",
            "alice",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    for text in ("Weather in Zürich?", "Rain in Zürich.", "Which city did I ask about?"):
        assert text in shown.stdout
