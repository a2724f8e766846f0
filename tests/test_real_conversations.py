"""Real agent conversations replayed through the engine's recording path.

20 tau-bench airline conversations (``tests/data/tau_bench``) are replayed turn by turn:
each user message goes through :meth:`AgentEngine.handle`, whose model answers with the
conversation's own assistant steps (text, and tool calls with the provider's original
ids, which repeat in some of them) and whose tools answer with the recorded results.
Every turn and every tool call must be stored, in order, and every last-k window of the
stored history must be one a chat-completions provider accepts.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentsession import SessionManager
from agentsession.engine.loop import AgentEngine
from agentsession.engine.model import Decision, ModelContext, ToolRequest
from agentsession.engine.tools import ProjectTools, ToolOutcome, ToolSpec
from agentsession.stores.memory.store import MemoryStore

DATA = Path(__file__).parent / "data" / "tau_bench" / "tau_bench_airline.jsonl"
CONVERSATIONS = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]

pytestmark = pytest.mark.store_independent


@dataclass
class Turn:
    """One user message and the assistant steps that answered it."""

    user: str
    steps: list[dict[str, Any]] = field(default_factory=list)  # assistant messages
    results: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # step -> tools


def split_turns(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Turn]]:
    """The messages before the first user message, and the user turns after it."""
    head: list[dict[str, Any]] = []
    turns: list[Turn] = []
    for m in messages:
        if m["role"] == "user":
            turns.append(Turn(user=m["content"]))
        elif not turns:
            head.append(m)
        elif m["role"] == "assistant":
            turns[-1].steps.append(m)
        else:
            assert m["role"] == "tool"
            turns[-1].results.setdefault(len(turns[-1].steps) - 1, []).append(m)
    return head, turns


class ReplayModel:
    """Answers with the recorded assistant steps of the current turn, in order. A turn
    the recording ends inside (after a tool result, or with no answer at all) gets an
    empty final reply: the engine always closes a turn with one."""

    name = "replay"

    def __init__(self) -> None:
        self.steps: deque[dict[str, Any]] = deque()

    def decide(self, context: ModelContext) -> Decision:
        if not self.steps:
            return Decision(text="")
        step = self.steps.popleft()
        calls = tuple(
            ToolRequest(
                name=c["function"]["name"],
                arguments=json.loads(c["function"]["arguments"] or "{}"),
                id=c["id"],
            )
            for c in step.get("tool_calls") or []
        )
        return Decision(tool_calls=calls, text=step.get("content"))


class ReplayTools(ProjectTools):
    """Tools that give back the recorded results, in the order they were recorded."""

    def __init__(self, root: Path, names: set[str]) -> None:
        specs = tuple(ToolSpec(n, "", {"type": "object"}) for n in sorted(names))
        super().__init__(root=root, specs=specs)
        self.results: deque[str] = deque()
        self.executed: list[tuple[str, dict[str, Any]]] = []

    def execute(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        self.executed.append((name, arguments))
        return ToolOutcome(result=self.results.popleft())


def chat_window_problem(window: list[dict[str, Any]]) -> str | None:
    """Why a chat-completions provider would refuse ``window``, or None: every tool
    message answers a call of the assistant message right before its group, and every
    call of that message is answered before anything else comes."""
    pending: list[str] = []
    for i, m in enumerate(window):
        if m["role"] == "tool":
            if m.get("tool_call_id") not in pending:
                return f"message {i}: tool result {m.get('tool_call_id')!r} without its call"
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return f"message {i}: calls {pending} left without results"
        if m["role"] == "assistant":
            pending = [c["id"] for c in m.get("tool_calls") or []]
    return f"calls {pending} left without results at the end" if pending else None


def replay(conversation: dict[str, Any], tmp_path: Path) -> tuple[SessionManager, str, Any]:
    """Replay one conversation into a fresh memory-store manager."""
    meta = conversation["session"]
    head, turns = split_turns(conversation["messages"])
    names = {
        c["function"]["name"] for t in turns for s in t.steps for c in s.get("tool_calls") or []
    }
    manager = SessionManager(MemoryStore())
    user = meta["user_id"]
    sid = manager.create_session(
        user_id=user, agent=meta["agent"], title=meta["title"], metadata=meta["metadata"]
    ).session_id
    if head:
        manager.append_messages(session_id=sid, user_id=user, messages=head)
    model, tools = ReplayModel(), ReplayTools(tmp_path, names)
    engine = AgentEngine(manager, model, tools, user_id=user, max_steps=200)
    for turn in turns:
        model.steps.extend(turn.steps)
        for index in sorted(turn.results):
            tools.results.extend(r["content"] for r in turn.results[index])
        assert engine.handle(sid, turn.user).ok
        assert not model.steps and not tools.results, "the turn was not replayed whole"
    return manager, sid, tools


def every_item(listing: Any) -> Iterator[Any]:
    """Follow a listing's cursors to the end; ``listing(cursor)`` returns a Page."""
    page = listing(None)
    yield from page.items
    while page.next_cursor is not None:
        page = listing(page.next_cursor)
        yield from page.items


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=[c["case_id"] for c in CONVERSATIONS])
def test_replay_stores_every_turn_and_every_call(
    conversation: dict[str, Any], tmp_path: Path
) -> None:
    """Every message is stored in the recorded order (an empty reply closes a turn the
    recording leaves open); every tool call is recorded once, with the provider's id,
    even where the provider reused an id; no tool ran twice."""
    manager, sid, tools = replay(conversation, tmp_path)
    user = conversation["session"]["user_id"]
    original = conversation["messages"]

    def page(cursor: str | None) -> Any:
        start = {"after": 0} if cursor is None else {"cursor": cursor}
        return manager.get_messages(session_id=sid, user_id=user, **start)

    stored = [m.payload() for m in every_item(page)]
    got = [m for m in stored if not (m["role"] == "assistant" and m.get("content") == "")]
    assert [m["role"] for m in got] == [m["role"] for m in original]
    for mine, theirs in zip(got, original, strict=True):
        if mine["role"] in ("system", "user"):
            assert mine["content"] == theirs["content"]
        if mine["role"] == "assistant":
            assert (mine.get("content") or None) == (theirs.get("content") or None)
            assert [c["id"] for c in mine.get("tool_calls") or []] == [
                c["id"] for c in theirs.get("tool_calls") or []
            ]
        if mine["role"] == "tool":
            assert mine["tool_call_id"] == theirs["tool_call_id"]
    recorded_ids = [c["id"] for m in original for c in m.get("tool_calls") or []]
    history = list(
        every_item(lambda c: manager.get_tool_history(session_id=sid, user_id=user, cursor=c))
    )
    assert [c.provider_call_id for c in history] == recorded_ids
    assert len({c.call_id for c in history}) == len(history)
    assert len(tools.executed) == len(recorded_ids)


def test_some_conversations_reuse_provider_ids() -> None:
    """The data holds the fault this suite is for: a provider id used twice."""
    reused = 0
    for conversation in CONVERSATIONS:
        ids = [c["id"] for m in conversation["messages"] for c in m.get("tool_calls") or []]
        reused += len(ids) != len(set(ids))
    assert reused >= 3


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=[c["case_id"] for c in CONVERSATIONS])
def test_every_last_k_window_is_provider_valid(
    conversation: dict[str, Any], tmp_path: Path
) -> None:
    """get_messages(limit=k), for every k up to the whole history: a window a
    chat-completions provider accepts, holding at least the newest k messages."""
    manager, sid, _ = replay(conversation, tmp_path)
    user = conversation["session"]["user_id"]
    count = manager.get_session(session_id=sid, user_id=user).message_count
    for k in range(1, count + 1):
        window = manager.get_messages(session_id=sid, user_id=user, limit=k).items
        payloads = [m.payload() for m in window]
        assert chat_window_problem(payloads) is None, (k, chat_window_problem(payloads))
        assert len(window) >= k and window[-1].seq == count
