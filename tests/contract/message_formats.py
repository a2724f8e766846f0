"""Message payloads in the three formats agents send, and an independent check that a
window of history never splits a tool call from its result.

The check reads payloads itself (it does not ask the library which message makes or
answers a call), so a test using it can fail when the library's rule is wrong.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agentsession import Message

Payloads = list[dict[str, Any]]

FORMATS = ("chat", "anthropic", "responses")


def user(fmt: str, text: str) -> dict[str, Any]:
    """A user message in ``fmt``."""
    if fmt == "responses":
        return {"type": "message", "role": "user", "content": text}
    return {"role": "user", "content": text}


def answer(fmt: str, text: str) -> dict[str, Any]:
    """A plain assistant answer in ``fmt``."""
    if fmt == "anthropic":
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if fmt == "responses":
        return {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": text}]}
    return {"role": "assistant", "content": text}


def calls(fmt: str, ids: list[str]) -> Payloads:
    """The message(s) making the parallel calls ``ids`` in ``fmt``."""
    if fmt == "chat":
        return [{"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in ids]}]
    if fmt == "anthropic":
        return [{"role": "assistant", "content": [
            {"type": "text", "text": "let me look"},
            *({"type": "tool_use", "id": i, "name": "f", "input": {}} for i in ids)]}]
    return [{"type": "reasoning", "id": f"rs_{ids[0]}", "summary": []},
            *({"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"}
              for i in ids)]


def results(fmt: str, ids: list[str]) -> Payloads:
    """The message(s) answering the calls ``ids`` in ``fmt``, in the order of ``ids``."""
    if fmt == "chat":
        return [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids]
    if fmt == "anthropic":
        return [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": f"out {i}"} for i in ids]}]
    return [{"type": "function_call_output", "call_id": i, "output": f"out {i}"} for i in ids]


def calls_and_results(payload: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(ids of the calls ``payload`` makes, ids of the calls it answers), any format."""
    content = payload.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    kind, role = payload.get("type"), payload.get("role")
    if kind == "function_call":
        return {payload["call_id"]}, set()
    if kind == "function_call_output":
        return set(), {payload["call_id"]}
    if role == "assistant":
        made = {c["id"] for c in payload.get("tool_calls") or []}
        return made | {b["id"] for b in blocks if b.get("type") == "tool_use"}, set()
    if role == "tool":
        return set(), {payload["tool_call_id"]}
    if role == "user":
        return set(), {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
    return set(), set()


def window_problem(window: list[Message]) -> str | None:
    """What is wrong with ``window`` (not consecutive, a result without its call, a call
    without its result), or None."""
    got = [m.seq for m in window]
    if got and got != list(range(got[0], got[0] + len(got))):
        return f"seqs {got} are not consecutive"
    made: set[str] = set()
    answered: set[str] = set()
    for m in window:
        c, r = calls_and_results(m.payload())
        made |= c
        answered |= r
    if answered - made:
        return f"window {got} holds results without their calls: {sorted(answered - made)}"
    if made - answered:
        return f"window {got} holds calls without their results: {sorted(made - answered)}"
    return None


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns in random formats: a user message, 0-3 rounds of 1-3 parallel calls with
    their results in any order, an answer."""
    out: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 4))):
        fmt = draw(st.sampled_from(FORMATS))
        out.append(user(fmt, f"q{turn}"))
        for r in range(draw(st.integers(0, 3))):
            ids = [f"c{turn}_{r}_{j}" for j in range(draw(st.integers(1, 3)))]
            out += calls(fmt, ids)
            out += results(fmt, draw(st.permutations(ids)))
        out.append(answer(fmt, f"a{turn}"))
    return out
