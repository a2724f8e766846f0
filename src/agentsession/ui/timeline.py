"""A page of a session's history as the inspector shows it: one timeline on the ``seq``
axis.

Messages are taken apart by their format (the three of :mod:`agentsession.callgroups`:
chat completions, Anthropic content blocks, OpenAI Responses items) into parts: text,
reasoning, tool calls and other data. Each call gets its result beside it when the
page holds it; a message that carries nothing but results shown beside their calls is
folded to one line. A call without a result is marked (unanswered on the newest page;
on an older one its result may be on a newer page), and a synthetic result restore
wrote for an interrupted call (:data:`~agentsession.service.changes.interrupted.SYNTHETIC`)
is marked as such, and so are calls repeated on the page with the same arguments.

Runs are placed where their first message of the page is, summaries after the last
message they cover, rewinds after the seq they went back to.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..callgroups import CALL_ITEMS, OUTPUT_ITEMS, answered_calls
from ..models import Message, Rewind, Run, Summary
from .pages import pretty

__all__ = ["Entry", "Part", "Result", "Shown", "message_format", "show", "timeline"]

Format = Literal["chat", "anthropic", "responses"]

#: Text-carrying block types (Anthropic ``text``; Responses ``input_text``/``output_text``).
_TEXT_BLOCKS = frozenset({"text", "input_text", "output_text", "summary_text"})
#: Anthropic block types that tell the format apart from chat content parts.
_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


@dataclass(slots=True)
class Result:
    """A tool result shown beside its call: its text, the message carrying it, and
    whether it is an error or restore's synthetic "interrupted" result."""

    text: str
    seq: int
    error: bool = False
    synthetic: bool = False


@dataclass(slots=True)
class Part:
    """One piece of a message: ``text``, ``reasoning``, ``call`` (``label`` the tool,
    ``text`` its arguments, ``result`` beside it, ``repeats`` how many calls of the page
    have the same tool and arguments) or ``data`` (``label`` its type)."""

    kind: Literal["text", "reasoning", "call", "data"]
    text: str
    label: str = ""
    call_id: str | None = None
    result: Result | None = None
    repeats: int = 1


@dataclass(slots=True)
class Shown:
    """A message taken apart: its format, parts, and whether it is folded (every part
    a result shown beside its call)."""

    message: Message
    format: Format
    parts: list[Part] = field(default_factory=list)
    folded: bool = False
    answers: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Entry:
    """One line of the timeline at ``seq``: a message, a run, a summary or a rewind."""

    kind: Literal["message", "run", "summary", "rewind"]
    seq: int
    message: Shown | None = None
    run: Run | None = None
    summary: Summary | None = None
    rewind: Rewind | None = None


def message_format(m: Message) -> Format:
    """The format ``m`` is in: ``responses`` (an item ``type``), ``anthropic`` (a
    content block only Anthropic has), else ``chat``."""
    if "type" in (m.model_extra or {}):
        return "responses"
    if isinstance(m.content, list) and any(
        isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in m.content
    ):
        return "anthropic"
    return "chat"


def _synthetic(m: Message) -> bool:
    marker = (m.metadata or {}).get("agentsession")
    return isinstance(marker, Mapping) and marker.get("synthetic") == "interrupted"


def _arguments(raw: Any) -> str:
    """Call arguments as indented JSON (chat and Responses send them as a JSON string)."""
    if isinstance(raw, str):
        try:
            return pretty(json.loads(raw))
        except ValueError:
            return pretty(raw)
    return pretty(raw)


def _content_text(content: Any) -> str:
    """A result's content as text: a string, the text of text blocks, else JSON."""
    if isinstance(content, str):
        return pretty(content)
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") in _TEXT_BLOCKS for b in content
    ):
        return pretty("\n".join(str(b.get("text", "")) for b in content))
    return pretty(content)


def _results(m: Message) -> dict[str, Result]:
    """The results ``m`` carries, by call id."""
    ids = answered_calls(m)
    if not ids:
        return {}
    synthetic = _synthetic(m)
    extra = m.model_extra or {}
    if extra.get("type") in OUTPUT_ITEMS:
        return {ids[0]: Result(_content_text(extra.get("output")), m.seq, False, synthetic)}
    if m.role == "tool":
        return {ids[0]: Result(_content_text(m.content), m.seq, False, synthetic)}
    found: dict[str, Result] = {}
    for block in m.content if isinstance(m.content, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result":
            text = _content_text(block.get("content"))
            error = block.get("is_error") is True
            found[str(block.get("tool_use_id"))] = Result(text, m.seq, error, synthetic)
    return found


def _block_parts(blocks: Iterable[Any]) -> list[Part]:
    parts: list[Part] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in _TEXT_BLOCKS and isinstance(block.get("text"), str):
            parts.append(Part("text", pretty(block["text"])))
        elif kind == "tool_use":
            name = str(block.get("name", ""))
            parts.append(Part("call", _arguments(block.get("input")), name, str(block.get("id"))))
        elif kind == "thinking":
            parts.append(Part("reasoning", pretty(block.get("thinking", ""))))
        else:
            parts.append(Part("data", pretty(block), str(kind or "value")))
    return parts


def _responses_parts(m: Message) -> list[Part]:
    extra = m.model_extra or {}
    kind = str(extra.get("type"))
    if kind in CALL_ITEMS:
        args = extra.get("arguments", extra.get("input"))
        # ``name`` is one of Message's own fields, so not among the extra ones.
        return [Part("call", _arguments(args), m.name or "", extra.get("call_id"))]
    if kind in OUTPUT_ITEMS:
        return [Part("data", _content_text(extra.get("output")), f"{kind} {extra.get('call_id')}")]
    if kind == "reasoning":
        summary = extra.get("summary")
        if isinstance(summary, list) and summary:
            return [Part("reasoning", p.text) for p in _block_parts(summary)]
        return [Part("reasoning", "(reasoning, no summary)")]
    if isinstance(m.content, list):
        return _block_parts(m.content)
    if isinstance(m.content, str):
        return [Part("text", pretty(m.content))]
    body = {k: v for k, v in extra.items() if k != "type"}
    return [Part("data", pretty(body), kind)]


def _parts(m: Message, fmt: Format) -> list[Part]:
    if fmt == "responses":
        return _responses_parts(m)
    parts: list[Part] = []
    if isinstance(m.content, str):
        parts.append(Part("text", pretty(m.content)))
    elif isinstance(m.content, list):
        parts += _block_parts(m.content)
    for call in m.tool_calls or ():
        raw = call.get("function")
        function: dict[str, Any] = raw if isinstance(raw, dict) else {}
        name = str(function.get("name", call.get("type", "")))
        parts.append(Part("call", _arguments(function.get("arguments")), name, call.get("id")))
    return parts


def show(m: Message) -> Shown:
    """``m`` taken apart into parts by its format (results not yet paired)."""
    fmt = message_format(m)
    return Shown(m, fmt, _parts(m, fmt), answers=answered_calls(m))


def _pair(shown: list[Shown]) -> None:
    """Put every result beside its call in the page, count the calls repeated with the
    same tool and arguments (an agent going round in circles), and fold the messages
    that hold nothing but results shown beside their calls."""
    results: dict[str, Result] = {}
    for s in shown:
        results.update(_results(s.message))
    paired: set[str] = set()
    calls = [part for s in shown for part in s.parts if part.kind == "call"]
    same = Counter((part.label, part.text) for part in calls)
    for part in calls:
        part.repeats = same[part.label, part.text]
        if part.call_id in results:
            part.result = results[part.call_id]
            paired.add(part.call_id)
    for s in shown:
        m = s.message
        only_results = not isinstance(m.content, list) or all(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in m.content
        )
        s.folded = bool(s.answers) and set(s.answers) <= paired and only_results


def timeline(
    messages: list[Message],
    *,
    runs: Mapping[str, Run],
    summaries: Iterable[Summary],
    rewinds: Iterable[Rewind],
) -> list[Entry]:
    """The entries of one page of history, in ``seq`` order.

    Args:
        messages: the page, oldest first (consecutive seqs).
        runs: the runs of the page's messages, by id.
        summaries, rewinds: the session's; those anchored on the page are placed.

    Returns:
        Entries ordered by seq; at one seq a run comes before its first message, and a
        summary or rewind anchored at a seq after that seq's message.
    """
    shown = [show(m) for m in messages]
    _pair(shown)
    low = messages[0].seq if messages else 0
    high = messages[-1].seq if messages else 0
    keyed: list[tuple[int, int, Entry]] = []
    seen_runs: set[str] = set()
    for s in shown:
        run_id = s.message.run_id
        if run_id is not None and run_id in runs and run_id not in seen_runs:
            seen_runs.add(run_id)
            keyed.append((s.message.seq, 0, Entry("run", s.message.seq, run=runs[run_id])))
        keyed.append((s.message.seq, 1, Entry("message", s.message.seq, message=s)))

    def on_page(seq: int) -> bool:
        return low <= seq <= high or (seq == 0 and low <= 1)

    keyed += [
        (x.to_seq, 2, Entry("summary", x.to_seq, summary=x)) for x in summaries if on_page(x.to_seq)
    ]
    keyed += [
        (r.to_seq, 3, Entry("rewind", r.to_seq, rewind=r)) for r in rewinds if on_page(r.to_seq)
    ]
    keyed.sort(key=lambda k: (k[0], k[1]))
    return [entry for _, _, entry in keyed]
