"""Cost versus size: does one call get slower as the thing it works on grows?

Each workload is a function ``(size, samples)`` that builds its state at ``size``
(untimed) and yields ``samples`` calls of one operation, ready to time. :data:`WORKLOADS`
lists them by name, each with the sizes it runs at (10, 1,000 and 20,000).
:func:`seconds_per_call` times a workload at every size, the median of its calls per
size; the report gives the per-call time at every size and the factor
largest-size-vs-smallest (the goal: at most 2x, i.e. the cost does not grow with the
size).

Fairness: all sizes of a workload are built first, then their calls are timed
round-robin (call 1 at every size, then call 2...; the size that goes first rotates), so
a busy spell of the machine (other processes' fsyncs) slows every size alike instead of
inflating one of them.

Workloads (SQLite file, WAL + ``synchronous=FULL``, the store's default, read back),
timed through the SessionManager as an agent calls it:

``add_run_step``        a RUNNING run with N steps; add one more step.
``finish_run``          a RUNNING run with N steps; finish it (a fresh run, in its own
                        session, per call).
``get_run``             a run with N steps; read it (the run and its first
                        ``Limits.default_page_size`` steps, a bounded window).
``restore_session``     a CLOSED session with N messages (tool-call exchanges), N tool
                        calls and N finished runs; restore it (a write: CLOSED ->
                        ACTIVE, then the bounded windows ``Policy.restore_*_limit`` with
                        their cursors). Each call is a real re-open: the session is
                        closed again, untimed, right before it.
``find_tool_call_by_arguments``    a session of N tool calls; find the oldest by tool
                        and arguments.
``find_tool_call_by_provider_id``  the same; find the oldest by provider call id.
``get_tool_history``    the same; one tool's history (5 calls of that tool among N).
``list_sessions_closed``  a user with N sessions; ``status="CLOSED"`` (5 match).
``list_sessions_agent``   the same; ``agent="rare"`` (5 match).
``list_sessions_active``  the same; the first page of 5 of ``status="ACTIVE"`` (about
                        N match).
``build_context``       a session of N messages (tool-call exchanges); build its
                        context at a budget of ``CONTEXT_BUDGET`` tokens, which every
                        size fills with the same newest messages (10 hold more).
``memory_as_of``        a session whose memory was written after each of its N messages;
                        read the memory as of seq 1 (behind N newer versions).
``rewind_session``      the same; rewind the newest exchange (two messages and a memory
                        patch, appended untimed right before).

``get_run`` and ``restore_session`` run with their windows (``Limits.default_page_size``,
``Policy.restore_*_limit``) set to :data:`WINDOW` rows, the smallest size, so every size
returns the same amount and the factor measures growth with the history, not a fuller
answer (with the default windows, 10 rows at size 10 would face 50-100 at the others).

States are written directly through the store, ``FILL_BATCH`` rows per transaction, so
20,000 rows take seconds, not 20,000 fsyncs. Each workload and size gets a fresh
database in a temporary directory. Python's garbage collector is paused while timing.

The sweep, a separate section of the report: ``sweep_expired`` of 1,000 due sessions
(``--quick``: 200) on a fresh file, before (one write transaction per session, as the
sweep was: ``SWEEP_BATCH = 1``) and after (``SWEEP_BATCH`` sessions per transaction, the
default), total seconds.

To add a workload: write a generator ``def my_workload(size: int, samples: int) ->
Iterator[list[Call | Prepared]]`` decorated with ``@contextmanager`` that builds the
state and yields the calls (cleaning up after the ``yield``; a :class:`Prepared` call
has an untimed step to run right before it), and add
``Workload("my_workload", my_workload, sizes=(...), unit="...")`` to :data:`WORKLOADS`.

Run: ``.venv/bin/python benchmarks/growth.py [--quick] [--samples K] [--only NAME ...]
[--json PATH]`` (``make bench-growth``; ``make bench`` runs it too, as its section (g)).
``--only`` takes workload names and ``sweep``. Prints markdown tables; exit status 1 if
a factor exceeds the goal.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentsession import SessionManager  # noqa: E402
from agentsession.ids import new_id  # noqa: E402
from agentsession.jsonvalues import canonical_hash  # noqa: E402
from agentsession.models import (  # noqa: E402
    Message,
    Page,
    Role,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    ToolCall,
    WorkingMemory,
)
from agentsession.service import Limits, Policy, lifecycle  # noqa: E402
from agentsession.stores.sql.store import SQLStore  # noqa: E402

USER = "bench"
GOAL = 2.0
WINDOW = 10  # rows get_run and restore_session give back at every size
CONTEXT_BUDGET = 200  # tokens of build_context: the same 7 messages at every size
FILL_BATCH = 5_000  # rows per setup transaction
MATCHING = 5  # sessions of the rare status / agent, calls of the rare tool
SAMPLES = 25  # calls timed per size (--quick: QUICK_SAMPLES)
QUICK_SAMPLES = 5
SWEEP_DUE = 1_000  # due sessions the sweep expires (--quick: QUICK_SWEEP_DUE)
QUICK_SWEEP_DUE = 200
T0 = datetime(2026, 1, 1, tzinfo=UTC)


#: One timed operation (its result is ignored).
Call = Callable[[], object]


@dataclass(frozen=True)
class Prepared:
    """A timed ``call`` with an untimed ``before`` step run right before it (e.g. closing
    the session a timed restore re-opens)."""

    before: Call
    call: Call


@dataclass(frozen=True)
class Workload:
    """One named workload: ``prepare(size, samples)`` is a context manager that builds
    the state at ``size`` and gives ``samples`` calls to time; ``unit`` names the size."""

    name: str
    prepare: Callable[[int, int], AbstractContextManager[Sequence[Call | Prepared]]]
    sizes: tuple[int, ...]
    unit: str


@contextmanager
def sqlite_manager(**options: Any) -> Iterator[SessionManager]:
    """A SessionManager on a fresh SQLite file (WAL + synchronous=FULL, the default);
    ``options`` go to ``SessionManager.from_url`` (``limits=``, ``policy=``)."""
    with tempfile.TemporaryDirectory(prefix="as-growth-") as tmp:
        url = f"sqlite:///{tmp}/growth.db"
        manager = SessionManager.from_url(url, auto_migrate=True, **options)
        try:
            yield manager
        finally:
            manager.close()


def sqlite_settings() -> dict[str, str]:
    """``journal_mode`` and ``synchronous`` as a store connection reads them back."""
    with sqlite_manager() as manager:
        store = manager.store
        assert isinstance(store, SQLStore)
        with store.engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    return {
        "journal_mode": str(mode),
        "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
            int(sync or 0), str(sync)
        ),
    }


def seconds_per_call(workload: Workload, samples: int) -> dict[int, float]:
    """Median seconds of one call at each size of ``workload``, timed round-robin across
    the sizes with the garbage collector paused (see the module docstring)."""
    times: dict[int, list[float]] = {size: [] for size in workload.sizes}
    with ExitStack() as stack:
        calls = {
            size: stack.enter_context(workload.prepare(size, samples)) for size in workload.sizes
        }
        gc.collect()
        gc.disable()
        try:
            for i in range(samples):
                turn = i % len(workload.sizes)
                for size in workload.sizes[turn:] + workload.sizes[:turn]:
                    call = calls[size][i]
                    if isinstance(call, Prepared):
                        call.before()
                        call = call.call
                    start = time.perf_counter()
                    call()
                    times[size].append(time.perf_counter() - start)
        finally:
            gc.enable()
    return {size: statistics.median(t) for size, t in times.items()}


def _batches(count: int) -> Iterator[range]:
    """``range(count)`` in slices of at most ``FILL_BATCH``."""
    for start in range(0, count, FILL_BATCH):
        yield range(start, min(start + FILL_BATCH, count))


def _matching(size: int) -> int:
    """How many rows match a rare filter at ``size``: 5, fewer at tiny sizes (at most
    half, so the common rows still fill a page of that many)."""
    return min(MATCHING, max(1, size // 2))


# ============================================================================ runs


def running_run_with_steps(manager: SessionManager, steps: int) -> tuple[str, str]:
    """A new session with a RUNNING run of ``steps`` steps; returns (session_id, run_id)."""
    sid = manager.create_session(user_id=USER, agent="growth").session_id
    run_id = manager.start_run(session_id=sid, user_id=USER, input="task").run_id
    now = datetime.now(UTC)
    for batch in _batches(steps):
        with manager.store.transaction(write=True) as tx:
            tx.get_session(sid)
            for index in batch:
                step = RunStep(
                    run_id=run_id,
                    index=index,
                    kind="tool",
                    name="read_file",
                    input={"path": f"src/m{index}.py"},
                    output={"bytes": index},
                    started_at=now,
                    ended_at=now,
                )
                tx.insert_run_step(sid, step)
    return sid, run_id


@contextmanager
def add_run_step(size: int, samples: int) -> Iterator[list[Call]]:
    """Adding one step to a run that has ``size`` steps (it grows by one per call)."""
    with sqlite_manager() as m:
        sid, run_id = running_run_with_steps(m, size)

        def step() -> object:
            return m.add_run_step(
                session_id=sid,
                user_id=USER,
                run_id=run_id,
                kind="model",
                name="decide",
                output={"reply": False},
            )

        yield [step] * samples


@contextmanager
def finish_run(size: int, samples: int) -> Iterator[list[Call]]:
    """Finishing a RUNNING run that has ``size`` steps (a fresh run per call)."""
    with sqlite_manager() as m:
        runs = [running_run_with_steps(m, size) for _ in range(samples)]

        def finisher(sid: str, run_id: str) -> Call:
            return lambda: m.finish_run(
                session_id=sid, user_id=USER, run_id=run_id, status="SUCCEEDED", output={"ok": True}
            )

        yield [finisher(sid, run_id) for sid, run_id in runs]


@contextmanager
def get_run(size: int, samples: int) -> Iterator[list[Call]]:
    """Reading a run that has ``size`` steps: the run and a bounded window of its steps."""
    with sqlite_manager(limits=Limits(default_page_size=WINDOW)) as m:
        sid, run_id = running_run_with_steps(m, size)
        window = min(size, m.limits.default_page_size)

        def read() -> object:
            run = m.get_run(session_id=sid, user_id=USER, run_id=run_id)
            assert run.step_count == size and len(run.steps) == window, len(run.steps)
            return run

        yield [read] * samples


# ========================================================================= restore


def _session(n: int, **fields: Any) -> Session:
    """A session of ``USER`` last active ``n`` seconds after ``T0`` (``fields`` override)."""
    at = T0 + timedelta(seconds=n)
    values: dict[str, Any] = {
        "session_id": new_id("ses"),
        "user_id": USER,
        "agent": "main",
        "created_at": at,
        "updated_at": at,
        "last_active_at": at,
    }
    return Session.model_validate({**values, **fields})


def _exchange(sid: str, seq: int, size: int) -> Message:
    """Message ``seq`` of a history of ``size`` messages: tool-call exchanges of four
    messages (the user asks, the assistant calls a tool, the tool answers, the assistant
    replies), then, for the last ``size % 4``, user and assistant taking turns; so no
    call is left without its result."""
    turn, part = divmod(seq - 1, 4)
    if seq > size - size % 4:
        part = 0 if part % 2 == 0 else 3
    call_id = f"call_{turn % 8}"  # providers reuse their call ids
    fields: dict[str, Any] = {
        "message_id": new_id("msg"),
        "session_id": sid,
        "seq": seq,
        "created_at": T0 + timedelta(seconds=seq),
    }
    if part == 0:
        return Message(**fields, role=Role.USER, content=f"please read src/module_{turn}.py")
    if part == 1:
        function = {"name": "read_file", "arguments": f'{{"path": "src/module_{turn}.py"}}'}
        calls = [{"id": call_id, "type": "function", "function": function}]
        return Message(**fields, role=Role.ASSISTANT, content=None, tool_calls=calls)
    if part == 2:
        return Message(**fields, role=Role.TOOL, tool_call_id=call_id, content="x = 1\n" * 20)
    return Message(**fields, role=Role.ASSISTANT, content=f"module_{turn} sets x to 1.")


def _tool_call(sid: str, seq: int, size: int) -> ToolCall:
    """Tool call ``seq`` of a session of ``size``: ``read_file`` of its own path, except
    :func:`_matching` calls of ``rare_tool`` spread over the session (never seq 1); seq 1
    alone has the provider id ``call_first``."""
    every = size // _matching(size)
    rare = seq % every == 0 and seq // every <= _matching(size)
    arguments = {"path": f"src/module_{seq}.py"}
    return ToolCall(
        call_id=new_id("call"),
        session_id=sid,
        seq=seq,
        provider_call_id="call_first" if seq == 1 else f"call_{seq % 8}",
        tool="rare_tool" if rare else "read_file",
        arguments=arguments,
        arguments_hash=canonical_hash(arguments),
        result={"bytes": seq},
        started_at=T0,
        ended_at=T0,
        duration_ms=1.0,
        created_at=T0,
    )


def _run(sid: str, seq: int) -> Run:
    """Run ``seq`` of a session: finished (SUCCEEDED), without steps."""
    at = T0 + timedelta(seconds=seq)
    return Run(
        run_id=new_id("run"),
        session_id=sid,
        seq=seq,
        input=f"task {seq}",
        status=RunStatus.SUCCEEDED,
        created_at=at,
        started_at=at,
        ended_at=at,
        output={"ok": True},
    )


def session_with_history(
    store: Any, size: int, *, calls: bool = True, messages: bool = True, runs: bool = True
) -> str:
    """A session of ``USER`` with ``size`` messages, tool calls and runs (each of them
    unless switched off) and a working memory, written in batches; returns its id."""
    sid = new_id("ses")
    counts = {
        "message_count": size if messages else 0,
        "tool_call_count": size if calls else 0,
        "run_count": size if runs else 0,
    }
    with store.transaction(write=True) as tx:
        tx.insert_session(_session(0, session_id=sid, **counts))
        tx.put_working_memory(
            WorkingMemory(
                session_id=sid, version=1, updated_at=T0, data={"goal": "read every module"}
            ),
            at_seq=counts["message_count"],  # the session's count, as if written last
        )
    for batch in _batches(size):
        with store.transaction(write=True) as tx:
            tx.get_session(sid)
            if messages:
                tx.insert_messages([_exchange(sid, i + 1, size) for i in batch])
            for i in batch if calls else ():
                tx.insert_tool_call(_tool_call(sid, i + 1, size))
            for i in batch if runs else ():
                tx.insert_run(_run(sid, i + 1))
    return sid


@contextmanager
def restore_session(size: int, samples: int) -> Iterator[list[Prepared]]:
    """Restoring a CLOSED session with ``size`` messages, tool calls and runs: each call
    re-opens it (a write) and returns the bounded windows; closed again, untimed, first."""
    windows_of = {f"restore_{kind}_limit": WINDOW for kind in ("message", "tool_call", "run")}
    with sqlite_manager(policy=Policy(**windows_of)) as m:
        sid = session_with_history(m.store, size)
        policy = m.policy
        windows = (min(size, policy.restore_tool_call_limit), min(size, policy.restore_run_limit))

        def close() -> object:
            return m.close_session(session_id=sid, user_id=USER, reason="bench")

        def restore() -> object:
            restored = m.restore_session(session_id=sid, user_id=USER)
            assert restored.previous_status == SessionStatus.CLOSED, restored.previous_status
            assert (len(restored.tool_calls), len(restored.runs)) == windows
            assert restored.messages and restored.messages[-1].seq == size
            return restored

        yield [Prepared(close, restore)] * samples


@contextmanager
def build_context(size: int, samples: int) -> Iterator[list[Call]]:
    """``build_context`` of a session with ``size`` messages (tool-call exchanges) at a
    budget of :data:`CONTEXT_BUDGET` tokens: the same window at every size, so the
    factor measures how the cost grows with the history behind it."""
    with sqlite_manager() as m:
        sid = session_with_history(m.store, size, calls=False, runs=False)

        def build() -> object:
            ctx = m.build_context(session_id=sid, user_id=USER, budget_tokens=CONTEXT_BUDGET)
            assert ctx.messages and ctx.messages[-1].seq == size
            return ctx

        yield [build] * samples


def session_with_memory_history(store: Any, size: int) -> str:
    """A session of ``USER`` with ``size`` messages (tool-call exchanges) and its working
    memory written after each of them (``size`` history rows), in batches; returns its id."""
    sid = new_id("ses")
    with store.transaction(write=True) as tx:
        tx.insert_session(_session(0, session_id=sid, message_count=size, version=size + 1))
    for batch in _batches(size):
        with store.transaction(write=True) as tx:
            tx.get_session(sid)
            tx.insert_messages([_exchange(sid, i + 1, size) for i in batch])
            for i in batch:
                data = {"goal": "read every module", "facts": {"read": i + 1}}
                memory = WorkingMemory(session_id=sid, version=i + 2, updated_at=T0, data=data)
                tx.put_working_memory(memory, at_seq=i + 1)
    return sid


@contextmanager
def memory_as_of(size: int, samples: int) -> Iterator[list[Call]]:
    """The working memory as of seq 1 of a session whose memory was written after each
    of its ``size`` messages: the oldest point, behind every other version."""
    with sqlite_manager() as m:
        sid = session_with_memory_history(m.store, size)

        def read() -> object:
            memory = m.get_working_memory(session_id=sid, user_id=USER, at_seq=1)
            assert memory.data["facts"] == {"read": 1}, memory.data
            return memory

        yield [read] * samples


@contextmanager
def rewind_session(size: int, samples: int) -> Iterator[list[Prepared]]:
    """A rewind of the newest exchange (two messages appended with a memory patch,
    untimed, right before) of a session of ``size`` messages and memory versions: it
    hides the two, clamps the history and writes back the memory as of ``size``."""
    with sqlite_manager() as m:
        sid = session_with_memory_history(m.store, size)
        turn = [{"role": "user", "content": "and now?"}, {"role": "assistant", "content": "ok"}]

        def append() -> object:
            return m.append_messages(
                session_id=sid, user_id=USER, messages=turn,
                working_memory_patch={"next_action": "rewind me"},
            )  # fmt: skip

        def rewind() -> object:
            result = m.rewind_session(session_id=sid, user_id=USER, to_seq=size)
            assert result.count == 2 and result.number is not None, result
            return result

        yield [Prepared(append, rewind)] * samples


# ===================================================================== tool lookups


@contextmanager
def _tool_calls(size: int) -> Iterator[tuple[SessionManager, str]]:
    """A manager and the id of a session with ``size`` tool calls (see :func:`_tool_call`)."""
    with sqlite_manager() as m:
        yield m, session_with_history(m.store, size, messages=False, runs=False)


def _found(call: ToolCall | None) -> ToolCall:
    assert call is not None and call.seq == 1, call
    return call


@contextmanager
def find_tool_call_by_arguments(size: int, samples: int) -> Iterator[list[Call]]:
    """The oldest of ``size`` tool calls, found by tool and arguments."""
    with _tool_calls(size) as (m, sid):
        oldest = {"path": "src/module_1.py"}
        yield [
            lambda: _found(
                m.find_tool_call(session_id=sid, user_id=USER, tool="read_file", arguments=oldest)
            )
        ] * samples


@contextmanager
def find_tool_call_by_provider_id(size: int, samples: int) -> Iterator[list[Call]]:
    """The oldest of ``size`` tool calls, found by its provider call id."""
    with _tool_calls(size) as (m, sid):
        yield [
            lambda: _found(
                m.find_tool_call(session_id=sid, user_id=USER, provider_call_id="call_first")
            )
        ] * samples


def _listed(page: Page[Any], count: int) -> Page[Any]:
    assert len(page.items) == count, len(page.items)
    return page


@contextmanager
def get_tool_history(size: int, samples: int) -> Iterator[list[Call]]:
    """One tool's history: the 5 calls of ``rare_tool`` among ``size``."""
    with _tool_calls(size) as (m, sid):
        yield [
            lambda: _listed(
                m.get_tool_history(session_id=sid, user_id=USER, tool="rare_tool"), _matching(size)
            )
        ] * samples


# ======================================================================== listings


def user_with_sessions(store: Any, size: int) -> None:
    """``size`` sessions of ``USER``: :func:`_matching` of them CLOSED and of agent
    ``rare``, spread over the listing order; the others ACTIVE, of agent ``main``."""
    every = size // _matching(size)
    for batch in _batches(size):
        with store.transaction(write=True) as tx:
            for i in batch:
                rare = i % every == 0 and i // every < _matching(size)
                tx.insert_session(
                    _session(
                        i,
                        status=SessionStatus.CLOSED if rare else SessionStatus.ACTIVE,
                        agent="rare" if rare else "main",
                    )
                )


@contextmanager
def _listing(size: int, samples: int, **query: Any) -> Iterator[list[Call]]:
    with sqlite_manager() as m:
        user_with_sessions(m.store, size)
        count = _matching(size)
        if query.get("status") == "ACTIVE":
            query["limit"] = count
        yield [lambda: _listed(m.list_sessions(user_id=USER, **query), count)] * samples


@contextmanager
def list_sessions_closed(size: int, samples: int) -> Iterator[list[Call]]:
    """``list_sessions(status="CLOSED")`` of a user with ``size`` sessions, 5 CLOSED."""
    with _listing(size, samples, status="CLOSED") as calls:
        yield calls


@contextmanager
def list_sessions_agent(size: int, samples: int) -> Iterator[list[Call]]:
    """``list_sessions(agent="rare")`` of a user with ``size`` sessions, 5 of that agent."""
    with _listing(size, samples, agent="rare") as calls:
        yield calls


@contextmanager
def list_sessions_active(size: int, samples: int) -> Iterator[list[Call]]:
    """The first page of 5 of ``list_sessions(status="ACTIVE")``; about ``size`` match."""
    with _listing(size, samples, status="ACTIVE") as calls:
        yield calls


SIZES = (10, 1_000, 20_000)

WORKLOADS: tuple[Workload, ...] = (
    Workload("add_run_step", add_run_step, SIZES, "steps in the run"),
    Workload("finish_run", finish_run, SIZES, "steps in the run"),
    Workload("get_run", get_run, SIZES, "steps in the run"),
    Workload(
        "restore_session", restore_session, SIZES, "messages, tool calls and runs in the session"
    ),
    Workload(
        "find_tool_call_by_arguments",
        find_tool_call_by_arguments,
        SIZES,
        "tool calls in the session",
    ),
    Workload(
        "find_tool_call_by_provider_id",
        find_tool_call_by_provider_id,
        SIZES,
        "tool calls in the session",
    ),
    Workload("get_tool_history", get_tool_history, SIZES, "tool calls in the session"),
    Workload("list_sessions_closed", list_sessions_closed, SIZES, "sessions of the user"),
    Workload("list_sessions_agent", list_sessions_agent, SIZES, "sessions of the user"),
    Workload("list_sessions_active", list_sessions_active, SIZES, "sessions of the user"),
    Workload("build_context", build_context, SIZES, "messages in the session"),
    Workload("memory_as_of", memory_as_of, SIZES, "memory versions in the session"),
    Workload("rewind_session", rewind_session, SIZES, "messages and memory versions"),
)


# =========================================================================== sweep


def measure_sweep(due: int) -> dict[str, float]:
    """Seconds to sweep ``due`` due sessions: one write transaction per session (the
    sweep before batching), then ``lifecycle.SWEEP_BATCH`` per transaction (the default)."""
    out: dict[str, float] = {}
    default = lifecycle.SWEEP_BATCH
    for label, batch in (("before", 1), ("after", default)):
        with sqlite_manager() as m:
            with m.store.transaction(write=True) as tx:
                for i in range(due):
                    tx.insert_session(
                        _session(i, ttl_seconds=60.0, expires_at=T0 + timedelta(seconds=60 + i))
                    )
            lifecycle.SWEEP_BATCH = batch
            try:
                start = time.perf_counter()
                result = m.sweep_expired(limit=due)
                out[label] = time.perf_counter() - start
            finally:
                lifecycle.SWEEP_BATCH = default
            assert len(result.expired_session_ids) == due, len(result.expired_session_ids)
    return out


# ========================================================================== report


def measure_all(chosen: list[Workload], samples: int) -> list[dict[str, Any]]:
    """Run each workload at each of its sizes; one result row per workload."""
    rows = []
    for w in chosen:
        started = time.perf_counter()
        seconds = seconds_per_call(w, samples)
        for size in w.sizes:
            print(f"  {w.name} at {size:,} {w.unit}: {seconds[size] * 1e3:.2f} ms", file=sys.stderr)
        print(
            f"  ({w.name} took {time.perf_counter() - started:.0f} s with its set-up)",
            file=sys.stderr,
            flush=True,
        )
        factor = seconds[w.sizes[-1]] / seconds[w.sizes[0]]
        rows.append(
            {
                "workload": w.name,
                "unit": w.unit,
                "ms": {str(k): round(v * 1e3, 3) for k, v in seconds.items()},
                "factor": round(factor, 2),
                "sizes": list(w.sizes),
            }
        )
    return rows


def markdown(
    rows: list[dict[str, Any]],
    settings: dict[str, str],
    samples: int,
    sweep: dict[str, Any] | None = None,
) -> str:
    """The results as markdown: median ms per call at each size and the factor largest
    vs smallest (one table per set of sizes), then the sweep before/after if measured.

    With three sizes or more, a last column gives the factor largest vs next-largest:
    a call that returns a bounded window (``get_run``, ``restore_session``) returns fewer
    rows at the smallest size than the window holds, so that factor tells a window
    filling up from a cost growing with the size."""
    lines = [
        f"Cost versus size, SQLite (journal_mode={settings['journal_mode']}, "
        f"synchronous={settings['synchronous']}); median of {samples} calls per size, "
        "ms per call, sizes timed round-robin."
    ]
    groups: dict[tuple[int, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row["sizes"]), []).append(row)
    for sizes, group in groups.items():
        head = " | ".join(f"{size:,}" for size in sizes)
        head += f" | {sizes[-1]:,} vs {sizes[0]:,} (goal <= {GOAL:g}x)"
        last_two = len(sizes) >= 3
        if last_two:
            head += f" | {sizes[-1]:,} vs {sizes[-2]:,}"
        columns = len(sizes) + 1 + last_two
        lines += ["", f"| workload | N counts | {head} |", "|---|---|" + "---|" * columns]
        for row in group:
            ms = [row["ms"][str(size)] for size in sizes]
            verdict = "ok" if row["factor"] <= GOAL else "MISSED"
            cells = " | ".join(f"{x:.2f}" for x in ms) + f" | {row['factor']:.2f}x ({verdict})"
            if last_two:
                cells += f" | {ms[-1] / ms[-2]:.2f}x"
            lines.append(f"| `{row['workload']}` | {row['unit']} | {cells} |")
    if sweep:
        lines += [
            "",
            f"`sweep_expired` of {sweep['due']:,} due sessions, seconds: "
            f"{sweep['before']:.2f} one transaction per session (before), "
            f"{sweep['after']:.2f} {sweep['batch']} sessions per transaction (after).",
        ]
    return "\n".join(lines)


def run_growth(chosen: list[Workload], samples: int, *, sweep_due: int | None) -> dict[str, Any]:
    """Measure ``chosen`` (and the sweep of ``sweep_due`` sessions unless None); the
    results document (what ``--json`` writes)."""
    settings = sqlite_settings()
    document: dict[str, Any] = {
        "settings": settings,
        "samples": samples,
        "goal": GOAL,
        "results": measure_all(chosen, samples),
    }
    if sweep_due is not None:
        seconds = measure_sweep(sweep_due)
        document["sweep"] = {
            "due": sweep_due,
            "batch": lifecycle.SWEEP_BATCH,
            **{k: round(v, 3) for k, v in seconds.items()},
        }
        print(
            f"  sweep of {sweep_due:,}: {seconds['before']:.2f} s before, "
            f"{seconds['after']:.2f} s after",
            file=sys.stderr,
        )
    return document


def render(document: dict[str, Any]) -> str:
    """:func:`markdown` of a results document."""
    return markdown(
        document["results"], document["settings"], document["samples"], document.get("sweep")
    )


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the chosen workloads, print the tables; 1 if a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="5 samples per size (default 25), sweep of 200 (default 1,000)",
    )
    parser.add_argument("--samples", type=int, help="samples per size (overrides --quick)")
    names = [w.name for w in WORKLOADS]
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[*names, "sweep"],
        help="run only these workloads (and the sweep only if named)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    samples = args.samples or (QUICK_SAMPLES if args.quick else SAMPLES)
    chosen = [w for w in WORKLOADS if not args.only or w.name in args.only]
    due = QUICK_SWEEP_DUE if args.quick else SWEEP_DUE
    document = run_growth(
        chosen, samples, sweep_due=due if not args.only or "sweep" in args.only else None
    )
    print(render(document))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if all(row["factor"] <= GOAL for row in document["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
