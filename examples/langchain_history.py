"""A LangChain chain whose chat history lives in agentsession, with no network: a fake
chat model answers two turns through ``RunnableWithMessageHistory``, then a new history
object (as after a restart) reads the conversation back.

    pip install 'agentsession[langchain]'   # from a checkout: pip install -e '.[langchain]'
    python examples/langchain_history.py            # stores in ./sessions.db
    agentsession --url sqlite:///sessions.db sessions messages SESSION_ID --user alice

Each run starts the conversation over (``clear``), so it always ends with the same 4
messages. The lines that differ from an in-memory or Redis history are marked "switch".
"""

from __future__ import annotations

import sys

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from agentsession import SessionManager  # switch
from agentsession.adapters.langchain import AgentSessionChatMessageHistory  # switch


def main(url: str) -> None:
    """Run two turns of one session on the store at ``url`` and print its id."""
    model = FakeMessagesListChatModel(
        responses=[AIMessage("Rain in Zürich."), AIMessage("You asked about Zürich.")]
    )
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with SessionManager.from_url(url, auto_migrate=True) as manager:  # switch
        histories: dict[str, AgentSessionChatMessageHistory] = {}

        def history_of(session_id: str) -> AgentSessionChatMessageHistory:
            # switch: was RedisChatMessageHistory(session_id, url=...)
            if session_id not in histories:
                histories[session_id] = AgentSessionChatMessageHistory(
                    session_id, backend=manager, user_id="alice"
                )
            return histories[session_id]

        history_of("trip-42").clear()  # start over on every run of the example
        chain = RunnableWithMessageHistory(
            prompt | model,
            history_of,
            input_messages_key="question",
            history_messages_key="history",
        )
        config = {"configurable": {"session_id": "trip-42"}}
        for question in ("Weather in Zürich?", "Which city did I ask about?"):
            print(chain.invoke({"question": question}, config=config).content)  # type: ignore[arg-type]
        restored = AgentSessionChatMessageHistory("trip-42", backend=manager, user_id="alice")
        print(f"restored: {len(restored.messages)} messages")
        for history in (*histories.values(), restored):
            history.close()
        stored = manager.get_session_by_key(
            user_id="alice", agent="langchain", external_key="trip-42"
        )
    print(f"session {stored.session_id}: {stored.message_count} messages")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///sessions.db")
