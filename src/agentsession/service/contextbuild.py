"""Use case: build the context to send to a model, within a token budget.

``build_context`` reads, in one read transaction, the working memory (rendered as the
system text, :func:`render_memory`), the newest summary that covers older history, and
the newest messages that fit (:mod:`.contextwindow`), and counts each part with a
pluggable tokenizer (:mod:`agentsession.tokens`). Deterministic: the same stored
session, budget and tokenizer give the same context.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ..jsonvalues import dumps
from ..models import Context, Session
from ..principal import Principal
from ..stores.base import StoreTransaction
from ..tokens import Tokenizer, text_tokens
from .contextexplain import explain as explain_window
from .contextwindow import select_window
from .core import ServiceCore
from .validation import check_limit, check_tokenizer

__all__ = ["MAX_BUDGET_TOKENS", "ContextUseCases", "render_memory"]

#: The largest budget accepted (no model takes more).
MAX_BUDGET_TOKENS = 100_000_000


class ContextUseCases(ServiceCore):
    """Context assembly (part of :class:`SessionManager`)."""

    def build_context(
        self,
        *,
        session_id: str,
        user_id: str,
        budget_tokens: int,
        tokenizer: Tokenizer | None = None,
        explain: bool = False,
        admin: bool = False,
    ) -> Context:
        """The context to send to a model: system text, summary, newest messages.

        Args:
            budget_tokens: the most tokens the context may take (1..100,000,000), as
                counted by ``tokenizer``; the answer's ``total_tokens`` is at most this.
            tokenizer: counts tokens (:mod:`agentsession.tokens`); None = the default
                byte estimate (``ceil(UTF-8 bytes / 4)`` plus 4 a message).
            explain: also answer ``explanation``: the provenance of every part, and
                of every message left out, with the reason (:class:`ContextItem`;
                docs/semantics.md, "Context provenance"). It reads nothing more.

        Returns:
            A :class:`Context`: ``system`` rendered from working memory
            (:func:`render_memory`), the newest summary whose range ends before the
            newest user message (None if none), and the newest messages after it that
            fit, never splitting a tool call from its result and always holding the
            newest user message; when the newest turn does not fit whole, that user
            message and the newest whole exchanges after it that fit
            (docs/semantics.md, "Context assembly").

        Raises:
            ValidationError: a bad budget or tokenizer. ContextBudgetTooSmall (a
                ValidationError, 422 over HTTP): the system text, the summary and the
                newest user message alone need more than the budget;
                its ``needed_tokens`` says how many. SessionNotFound.
        """
        budget = check_limit(
            budget_tokens, "budget_tokens", allow_none=False, maximum=MAX_BUDGET_TOKENS
        )
        assert budget is not None
        if budget < 1:
            raise ValidationError("budget_tokens must be at least 1", field="budget_tokens")
        tok = check_tokenizer(tokenizer)
        if not isinstance(explain, bool):
            raise ValidationError("explain must be a bool", field="explain")

        def build(tx: StoreTransaction, s: Session) -> Context:
            memory = tx.get_working_memory(s.session_id)
            system = render_memory({} if memory is None else memory.data)
            system_tokens = text_tokens(tok, system)
            window = select_window(
                tx,
                s.session_id,
                s.message_count,
                system_tokens=system_tokens,
                budget=budget,
                tokenizer=tok,
            )
            summary_tokens = 0 if window.summary is None else text_tokens(tok, window.summary.text)
            return Context(
                session_id=s.session_id,
                session_version=s.version,
                system=system,
                summary=window.summary,
                messages=window.messages,
                system_tokens=system_tokens,
                summary_tokens=summary_tokens,
                message_tokens=window.message_tokens,
                total_tokens=system_tokens + summary_tokens + window.message_tokens,
                budget_tokens=budget,
                tokenizer=tok.name,
                omitted_messages=window.omitted,
                explanation=None
                if not explain
                else explain_window(
                    window,
                    message_count=s.message_count,
                    system_tokens=system_tokens,
                    summary_tokens=summary_tokens,
                    memory_version=0 if memory is None else memory.version,
                ),
            )

        return self._reads.read(session_id, Principal(user_id, admin), build)


def render_memory(data: Mapping[str, Any]) -> str:
    """The system text of a working-memory document: its standard keys, in this order
    and layout, each only when set (other keys are not rendered)::

        Goal: <goal>
        Completed:
        - <item>
        Errors:
        - <item>
        Next action: <next_action>
        Facts:
        - <key>: <value>

    A string item or value is written as it is, anything else as canonical JSON; facts
    are sorted by key. "" when none of the keys is set.
    """
    lines: list[str] = []
    if data.get("goal"):
        lines.append(f"Goal: {_text(data['goal'])}")
    for key, title in (("completed", "Completed"), ("errors", "Errors")):
        items = data.get(key)
        if isinstance(items, list) and items:
            lines.append(f"{title}:")
            lines += [f"- {_text(item)}" for item in items]
    if data.get("next_action"):
        lines.append(f"Next action: {_text(data['next_action'])}")
    facts = data.get("facts")
    if isinstance(facts, Mapping) and facts:
        lines.append("Facts:")
        lines += [f"- {key}: {_text(facts[key])}" for key in sorted(facts)]
    return "\n".join(lines)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)
