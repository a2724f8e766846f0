"""A LangGraph graph checkpointed in agentsession: it stops at an ``interrupt()``, and
a second invocation resumes it with ``Command(resume=...)`` from what the store kept
(no network, no API key). Run it twice to see the same: each run uses a new thread.

    python examples/langgraph_checkpointer.py
"""

from __future__ import annotations

import uuid
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agentsession import SessionManager
from agentsession.adapters.langgraph import AGENT, AgentSessionSaver


class State(TypedDict):
    question: str
    answer: str


def ask(state: State) -> dict[str, str]:
    """Pause the graph until a human answers."""
    return {"answer": interrupt({"question": state["question"]})}


def main() -> None:
    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    with SessionManager.from_url("sqlite:///sessions.db", auto_migrate=True) as sm:
        graph = builder.compile(checkpointer=AgentSessionSaver(sm, user_id="alice"))
        thread = f"thread-{uuid.uuid4().hex[:8]}"
        config = {"configurable": {"thread_id": thread}}
        paused = graph.invoke({"question": "Which city?", "answer": ""}, config)
        print("paused:", paused["__interrupt__"][0].value)
        print("resumed:", graph.invoke(Command(resume="Zürich"), config))
        s = sm.get_session_by_key(user_id="alice", agent=AGENT, external_key=thread)
        records = sm.list_records(session_id=s.session_id, user_id="alice")
        print(f"session {s.session_id}: {len(records)} records, version {s.version}")


if __name__ == "__main__":
    main()
