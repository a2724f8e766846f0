"""Use cases of the usage ledger: sums of usage per group, and budgets.

The ledger is written by ``finish_run`` (:mod:`.runs`), in its transaction: one row
per model of the run, its counts normalised (:mod:`agentsession.usage`). A budget
bounds the tokens or the cost of a user's usage (over all their sessions) or of one
session's; :func:`spent_budget` is the check ``start_run`` and ``add_run_step`` make in
their transaction (docs/semantics.md, "Usage and budgets").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import BudgetExceeded, Forbidden, ValidationError
from ..ids import check_id, check_name
from ..models import Budget, Session, UsageEntry, UsageTotal
from ..principal import Principal
from ..stores.base import StoreTransaction, UsageRow, UsageSum
from ..usage import KINDS, TOTAL_KINDS, PriceTable, check_model, entry_cost, normalise, total_tokens
from .core import ServiceCore
from .validation import check_time, check_usage

__all__ = ["UsageUseCases", "ledger_rows", "run_entries", "spent_budget"]

#: What ``get_usage`` groups by (:data:`~agentsession.stores.base.UsageGroup`).
_GROUPS = ("session", "agent", "model", "day")


class UsageUseCases(ServiceCore):
    """The usage and budget use cases of :class:`~agentsession.service.SessionManager`."""

    def get_usage(
        self,
        *,
        user_id: str,
        group_by: str = "session",
        since: datetime | None = None,
        until: datetime | None = None,
        session_id: str | None = None,
        agent: str | None = None,
        all_users: bool = False,
        admin: bool = False,
    ) -> list[UsageTotal]:
        """The caller's usage per group: the sums of the usage ledger (every finished
        run's usage, normalised; docs/semantics.md, "Usage and budgets").

        Cost: one grouped read of the ledger rows in scope (an index on the user and
        the finish time on SQL stores); one answer row per group, so a long period by
        day or a user with many sessions by session is a long answer: narrow it with
        ``since`` and ``until``.

        Args:
            user_id: the caller, whose usage is summed.
            group_by: ``"session"``, ``"agent"``, ``"model"`` or ``"day"`` (UTC).
            since, until: only runs finished at or after ``since`` and before ``until``
                (aware datetimes).
            session_id, agent: only this session's or this agent's runs (another
                user's session sums nothing).
            all_users: every user's usage; needs ``admin=True``.

        Returns:
            One :class:`~agentsession.models.UsageTotal` per group with usage, ordered
            by group (the runs of no model first when grouped by model); ``cost`` by
            the price table (``Policy.prices``), None without one.

        Raises:
            ValidationError: a bad ``group_by``, time, session id or agent.
            Forbidden: ``all_users`` without admin.
        """
        check_name(user_id, field="user_id")
        if all_users and not admin:
            raise Forbidden("the usage of every user needs admin=True")
        if group_by not in _GROUPS:
            raise ValidationError(f"group_by must be one of {', '.join(_GROUPS)}", field="group_by")
        start = check_time(since, "since")
        end = check_time(until, "until")
        if session_id is not None:
            check_id(session_id, field="session_id", prefix="ses")
        if agent is not None:
            check_name(agent, field="agent")
        agent = Principal(user_id, admin).agent_filter(agent)  # a key limited to agents
        sums = self._uow.run(
            lambda tx: tx.sum_usage(
                user_id=None if all_users else user_id,
                session_id=session_id,
                agent=agent,
                since=start,
                until=end,
                group_by=group_by,  # type: ignore[arg-type]  # checked against _GROUPS
            ),
            write=False,
        )
        return totals(sums, self.policy.prices, by_model=group_by == "model")

    def get_budget(
        self,
        *,
        user_id: str,
        target_user_id: str | None = None,
        session_id: str | None = None,
        admin: bool = False,
    ) -> Budget:
        """The budget of a user (over all their sessions) or of one session, and how
        much of it is used.

        Args:
            user_id: the caller (the principal).
            target_user_id: whose user budget; default the caller; another user's
                needs ``admin=True``. Not with ``session_id``.
            session_id: the session whose budget (the caller's own, or any with admin).

        Returns:
            The :class:`~agentsession.models.Budget`; ``max_tokens`` and ``max_cost``
            None (and ``updated_at`` None) when none is set.

        Raises:
            ValidationError, Forbidden, SessionNotFound.
        """
        owner, sid = self._budget_scope(user_id, target_user_id, session_id, admin)

        def read(tx: StoreTransaction) -> Budget:
            uid = (
                owner if sid is None else self._uow.load(tx, sid, Principal(user_id, admin)).user_id
            )
            return self._used(tx, tx.get_budget(uid, sid) or Budget(user_id=uid, session_id=sid))

        return self._uow.run(read, write=False)

    def set_budget(
        self,
        *,
        user_id: str,
        target_user_id: str | None = None,
        session_id: str | None = None,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        admin: bool = False,
    ) -> Budget:
        """Set (replace) the budget of a user or of one session: an operator's act.

        Once the usage counted against it reaches a bound, ``start_run`` and
        ``add_run_step`` of the user (or of the session) raise
        :class:`~agentsession.errors.BudgetExceeded`. A run already RUNNING is not
        stopped: ``finish_run`` always records what was spent.

        Args:
            user_id: the caller; must be an admin (``admin=True``).
            target_user_id, session_id: as :meth:`get_budget`.
            max_tokens: the bound on the ledger's ``total_tokens``, an int >= 0.
            max_cost: the bound on the cost (the price table's currency), a finite
                number >= 0; tokens of a model without a price count no cost.
                At least one of the two.

        Returns:
            The budget as set, with its use.

        Raises:
            Forbidden: without admin; the user's budget by a caller limited to agents.
            ValidationError: no bound, or a bad one.
            SessionNotFound.
        """
        if not admin:
            raise Forbidden("setting a budget needs admin=True")
        owner, sid = self._budget_scope(user_id, target_user_id, session_id, admin)
        if sid is None:  # the user's budget covers every agent's runs
            Principal(user_id, admin).check_every_agent("changing the user's budget")
        if max_tokens is None and max_cost is None:
            raise ValidationError("give max_tokens or max_cost (clear_budget removes a budget)")
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 0):
            raise ValidationError("max_tokens must be an integer >= 0", field="max_tokens")
        if max_cost is not None and (
            type(max_cost) not in (int, float) or not math.isfinite(max_cost) or max_cost < 0
        ):
            raise ValidationError("max_cost must be a finite number >= 0", field="max_cost")

        def write(tx: StoreTransaction) -> Budget:
            uid = (
                owner if sid is None else self._uow.load(tx, sid, Principal(user_id, admin)).user_id
            )
            budget = Budget(
                user_id=uid,
                session_id=sid,
                max_tokens=max_tokens,
                max_cost=None if max_cost is None else float(max_cost),
                updated_at=self._uow.now(),
            )
            tx.put_budget(budget)
            return self._used(tx, budget)

        return self._uow.run(write, write=True)

    def clear_budget(
        self,
        *,
        user_id: str,
        target_user_id: str | None = None,
        session_id: str | None = None,
        admin: bool = False,
    ) -> Budget:
        """Remove the budget of a user or of one session (none set: nothing changes).

        Args:
            user_id: the caller; must be an admin (``admin=True``).
            target_user_id, session_id: as :meth:`get_budget`.

        Returns:
            The budget now: no bounds, with its use.

        Raises:
            Forbidden: without admin; the user's budget by a caller limited to agents.
            ValidationError, SessionNotFound.
        """
        if not admin:
            raise Forbidden("clearing a budget needs admin=True")
        owner, sid = self._budget_scope(user_id, target_user_id, session_id, admin)
        if sid is None:  # the user's budget covers every agent's runs
            Principal(user_id, admin).check_every_agent("changing the user's budget")

        def write(tx: StoreTransaction) -> Budget:
            uid = (
                owner if sid is None else self._uow.load(tx, sid, Principal(user_id, admin)).user_id
            )
            tx.delete_budget(uid, sid)
            return self._used(tx, Budget(user_id=uid, session_id=sid))

        return self._uow.run(write, write=True)

    def _budget_scope(
        self, user_id: str, target_user_id: str | None, session_id: str | None, admin: bool
    ) -> tuple[str, str | None]:
        """The user and session a budget call is about, checked."""
        check_name(user_id, field="user_id")
        if session_id is not None:
            check_id(session_id, field="session_id", prefix="ses")
            if target_user_id is not None:
                raise ValidationError(
                    "a session's budget is its owner's: session_id or target_user_id, not both",
                    field="target_user_id",
                )
            return user_id, session_id
        target = (
            user_id
            if target_user_id is None
            else check_name(target_user_id, field="target_user_id")
        )
        if target != user_id and not admin:
            raise Forbidden("another user's budget needs admin=True")
        return target, None

    def _used(self, tx: StoreTransaction, budget: Budget) -> Budget:
        """``budget`` with what is used of it."""
        sums = tx.sum_usage(user_id=budget.user_id, session_id=budget.session_id, group_by="model")
        tokens, cost = _spent(sums, self.policy.prices)
        return budget.model_copy(update={"used_tokens": tokens, "used_cost": cost})


def run_entries(
    usage: Any, model: Any, usage_by_model: Any
) -> tuple[dict[str, int], list[UsageEntry]]:
    """A finished run's ``usage`` as stored and its ledger entries, one per model.

    ``usage`` with ``model`` (None: not said) is one model's counts; ``usage_by_model``
    (model -> counts) several models', and then the run's ``usage`` is their sum under
    the normalised names.

    Raises:
        ValidationError: bad counts or model names, a count named twice, or
            ``usage_by_model`` with ``usage`` or ``model``.
    """
    name = check_model(model)
    if usage_by_model is None:
        counts = check_usage(usage)
        entries = [] if not counts and name is None else [normalise(counts, name)]
        return counts, entries
    if usage is not None or model is not None:
        raise ValidationError(
            "give usage (with model) or usage_by_model, not both", field="usage_by_model"
        )
    if not isinstance(usage_by_model, Mapping):
        raise ValidationError(
            "usage_by_model must map model names to counts", field="usage_by_model"
        )
    entries = [
        normalise(check_usage(usage_by_model[key]), check_model(key, "usage_by_model"))
        for key in sorted(usage_by_model)
    ]
    return {kind: sum(getattr(e, kind) for e in entries) for kind in KINDS}, entries


def ledger_rows(
    s: Session, run_id: str, now: datetime, entries: list[UsageEntry]
) -> list[UsageRow]:
    """The ledger rows of run ``run_id`` of ``s`` finished at ``now``: one per entry,
    ``runs`` 1 on the first."""
    day = now.date().isoformat()
    return [
        UsageRow(s.user_id, s.agent, s.session_id, run_id, now, day, entry, int(i == 0))
        for i, entry in enumerate(entries)
    ]


def spent_budget(
    tx: StoreTransaction, s: Session, prices: PriceTable | None
) -> BudgetExceeded | None:
    """The refusal when the session's budget or its owner's is spent, else None: its
    used tokens (or cost) at or above the bound. The session's budget is checked first.
    Reads two budget keys, and the ledger only when a budget is set."""
    for scope, sid in (("session", s.session_id), ("user", None)):
        budget = tx.get_budget(s.user_id, sid)
        if budget is None:
            continue
        sums = tx.sum_usage(user_id=s.user_id, session_id=sid, group_by="model")
        tokens, cost = _spent(sums, prices)
        for limit, maximum, used in (
            ("tokens", budget.max_tokens, tokens),
            ("cost", budget.max_cost, cost or 0.0),
        ):
            if maximum is not None and used >= maximum:
                return BudgetExceeded(
                    scope=scope, session_id=s.session_id, limit=limit, maximum=maximum, used=used
                )
    return None


def totals(
    sums: Iterable[UsageSum], prices: PriceTable | None, *, by_model: bool
) -> list[UsageTotal]:
    """The store's sums per ``(group, model)`` as one total per group, priced; a group
    of a model counts the runs of that model (its rows), others each run once."""
    groups: dict[str | None, dict[str, Any]] = {}
    for part in sums:
        total = groups.setdefault(
            part.group, {kind: 0 for kind in (*KINDS, "runs")} | {"cost": 0.0}
        )
        for kind in KINDS:
            total[kind] += getattr(part, kind)
        total["runs"] += part.rows if by_model else part.runs
        cost = entry_cost(part, prices)
        total["cost"] = None if cost is None or total["cost"] is None else total["cost"] + cost
    return [
        UsageTotal(group=group, total_tokens=sum(t[k] for k in TOTAL_KINDS), **t)
        for group, t in groups.items()
    ]


def _spent(sums: Iterable[UsageSum], prices: PriceTable | None) -> tuple[int, float | None]:
    """The tokens and cost of ``sums`` (a model without a price counts no cost); the
    cost None without a price table."""
    tokens, cost = 0, 0.0
    for part in sums:
        tokens += total_tokens(part)
        cost += entry_cost(part, prices) or 0.0
    return tokens, None if prices is None else cost
