"""Message payloads in the three formats agents send, and an independent check that a
window of history never splits a tool call from its result (nor, in the Responses
format, a reasoning item from the item it was produced for).

The check reads payloads itself (it does not ask the library which message makes or
answers a call), so a test using it can fail when the library's rule is wrong.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import strategies as st

from agentsession import Message

Payloads = list[dict[str, Any]]

FORMATS = ("chat", "anthropic", "responses")
#: Call ids the random histories draw from (``call_0`` every turn, as providers do).
REUSED_IDS = ("call_0", "call_1", "call_2", "call_3")


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
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
    return {"role": "assistant", "content": text}


def reasoning(item_id: str) -> dict[str, Any]:
    """A Responses reasoning item: a provider wants it right before the call or message
    the model produced from it, and that item right after it."""
    return {"type": "reasoning", "id": item_id, "summary": []}


def calls(fmt: str, ids: list[str]) -> Payloads:
    """The message(s) making the parallel calls ``ids`` in ``fmt``."""
    if fmt == "chat":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    for i in ids
                ],
            }
        ]
    if fmt == "anthropic":
        return [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "let me look"},
                    *({"type": "tool_use", "id": i, "name": "f", "input": {}} for i in ids),
                ],
            }
        ]
    return [
        reasoning(f"rs_{ids[0]}"),
        *({"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"} for i in ids),
    ]


def results(fmt: str, ids: list[str]) -> Payloads:
    """The message(s) answering the calls ``ids`` in ``fmt``, in the order of ``ids``."""
    if fmt == "chat":
        return [{"role": "tool", "tool_call_id": i, "content": f"out {i}"} for i in ids]
    if fmt == "anthropic":
        return [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": f"out {i}"} for i in ids
                ],
            }
        ]
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
    without its result), or None. Every window with no seq bound (the newest page, a
    restore's messages) must pass it."""
    return _problem(window, results_need_calls=True, calls_need_results=True)


def provider_problem(window: list[Message], history: list[Message] | None = None) -> str | None:
    """What a provider would refuse in ``window`` (a result without its call, a call
    without its result, a reasoning item not right before the non-reasoning output item
    that follows it in history), or None; unlike :func:`window_problem` the seqs may
    have gaps (a context drops the results of calls its summary covers). Given the
    ``history``, also an item whose predecessor in history is a reasoning item not
    right before it in ``window`` (sent without the reasoning it was produced from)."""
    return _calls_problem(
        window, results_need_calls=True, calls_need_results=True
    ) or _reasoning_problem(window, history)


def _is_reasoning(payload: dict[str, Any]) -> bool:
    return payload.get("type") == "reasoning"


def _model_output(payload: dict[str, Any]) -> bool:
    """A call or an assistant message: what a model produces after a reasoning item."""
    kind = payload.get("type")
    if kind in ("function_call", "custom_tool_call"):
        return True
    return payload.get("role") == "assistant" and kind in (None, "message")


def _reasoning_problem(window: list[Message], history: list[Message] | None) -> str | None:
    got = [m.seq for m in window]
    for m, after in zip(window, [*window[1:], None], strict=True):
        if _is_reasoning(m.payload()) and (
            after is None or after.seq != m.seq + 1 or not _model_output(after.payload())
        ):
            return f"window {got}: reasoning item {m.seq} is not right before its output item"
    if history is None:
        return None
    by_seq = {m.seq: m for m in history}
    for m, before in zip(window, [None, *window[:-1]], strict=True):
        previous = by_seq.get(m.seq - 1)
        if (
            previous is not None
            and _is_reasoning(previous.payload())
            and (before is None or before.seq != previous.seq)
        ):
            return f"window {got}: item {m.seq} is sent without its reasoning item {previous.seq}"
    return None


def reasoning_split(
    window: list[Message], history: Payloads, *, start: bool = True, end: bool = True
) -> str | None:
    """Where ``window`` (consecutive messages of a session whose appended payloads are
    ``history``, seq 1 first) splits a Responses reasoning item from its successor (the
    model output right after it in history), or None: with ``end``, it ends with a
    reasoning item and leaves its successor out; with ``start``, it starts with a
    successor and leaves its reasoning item out. A window without a seq bound is checked
    at both edges, a page before a bound at its start, a page after one at its end."""
    if not window:
        return None
    got, first, last = [m.seq for m in window], window[0].seq, window[-1].seq
    if (
        end
        and last < len(history)
        and _is_reasoning(history[last - 1])
        and _model_output(history[last])
    ):
        return f"window {got} ends with reasoning item {last} without its successor"
    if (
        start
        and first > 1
        and _is_reasoning(history[first - 2])
        and _model_output(history[first - 1])
    ):
        return f"window {got} starts with item {first} without its reasoning item"
    return None


def bounded_page_problem(
    page: list[Message], *, before: int | None = None, after: int | None = None
) -> str | None:
    """What is wrong with ``page``, read with the seq bound ``before=`` or ``after=`` (or
    a cursor standing for one), or None.

    A bounded page is never widened past its bound (docs/semantics.md, "Window
    alignment": exactly-once paging wins), so only its other side is aligned: a page
    before a bound holds no result without its call but may end with a call whose
    result lies at or past the bound; a page after a bound holds no call without its
    result but may start with a result whose call lies at or before the bound.
    """
    assert (before is None) != (after is None), "exactly one bound"
    got = [m.seq for m in page]
    if before is not None and any(seq >= before for seq in got):
        return f"page {got} crosses its bound before={before}"
    if after is not None and any(seq <= after for seq in got):
        return f"page {got} crosses its bound after={after}"
    return _problem(
        page, results_need_calls=before is not None, calls_need_results=after is not None
    )


def _problem(
    window: list[Message], *, results_need_calls: bool, calls_need_results: bool
) -> str | None:
    """Matched by position, as a provider reads it: a result answers the nearest
    earlier call with its id still open (providers reuse ids within a conversation)."""
    got = [m.seq for m in window]
    if got and got != list(range(got[0], got[0] + len(got))):
        return f"seqs {got} are not consecutive"
    return _calls_problem(
        window, results_need_calls=results_need_calls, calls_need_results=calls_need_results
    )


def _calls_problem(
    window: list[Message], *, results_need_calls: bool, calls_need_results: bool
) -> str | None:
    got = [m.seq for m in window]
    open_calls: Counter[str] = Counter()
    orphans: list[str] = []
    for m in window:
        made, answered = calls_and_results(m.payload())
        for call in sorted(answered):
            if open_calls[call] > 0:
                open_calls[call] -= 1
            else:
                orphans.append(call)
        open_calls.update(made)
    if results_need_calls and orphans:
        return f"window {got} holds results without their calls: {orphans}"
    if calls_need_results and +open_calls:
        return f"window {got} holds calls without their results: {sorted(+open_calls)}"
    return None


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Turns in random formats: a user message, 0-3 rounds of 1-3 parallel calls with
    their results in any order, an answer (in the Responses format the calls come after
    a reasoning item, and the answer sometimes does too)."""
    out: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 4))):
        fmt = draw(st.sampled_from(FORMATS))
        out.append(user(fmt, f"q{turn}"))
        for _ in range(draw(st.integers(0, 3))):
            # A small pool: ids repeat across rounds and turns, as providers reuse them.
            ids = draw(st.lists(st.sampled_from(REUSED_IDS), min_size=1, max_size=3, unique=True))
            out += calls(fmt, ids)
            out += results(fmt, draw(st.permutations(ids)))
        if fmt == "responses" and draw(st.booleans()):
            out.append(reasoning(f"rs_a{turn}"))
        out.append(answer(fmt, f"a{turn}"))
    return out
