"""The store port's content rewrites (what ``agentsession encrypt`` and ``keyring
reencrypt`` write back), on every store and its keyring variant: each replaces the
content of the stored rows it names, in place (ids, seqs, versions kept), skips a row
that is gone, and the walks of the whole store list every session, shared document and
idempotency record once, in order, from a cursor."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentsession import SessionManager
from agentsession.stores.base import SessionStore
from canaries import write_canaries


def _new(model: Any, **update: Any) -> Any:
    return model.model_copy(update=update)


def test_rewrites_replace_content_in_place(store: SessionStore, manager: SessionManager) -> None:
    c = write_canaries(manager)
    sid = c.session_ids[0]
    with store.transaction(write=False) as tx:
        version = tx.get_session(sid).version  # type: ignore[union-attr]
        ids = [m.message_id for m in tx.get_messages(sid)]
        rewinds = [r.number for r in tx.list_rewinds(sid)]
        runs = tx.list_runs(sid)
    assert ids and rewinds and runs
    with store.transaction(write=True) as tx:
        tx.rewrite_messages([_new(m, content=f"new {m.seq}") for m in tx.get_messages(sid)])
        for number in rewinds:
            hidden = tx.get_rewound_messages(sid, number)
            tx.rewrite_rewound_messages(sid, number, [_new(m, content="gone") for m in hidden])
        memory = tx.get_working_memory(sid)
        assert memory is not None
        tx.rewrite_working_memory(_new(memory, data={"now": 1}))
        history = tx.list_memory_history(sid, before_seq=None, limit=100)
        tx.rewrite_memory_history(sid, [_new(v, data={"v": v.version}) for v in history])
        calls = tx.list_tool_calls(sid)
        tx.rewrite_tool_calls([_new(k, arguments={"a": 1}, result=[2], error="e") for k in calls])
        for run in runs:
            steps = tx.list_run_steps(sid, run.run_id)
            tx.rewrite_run_steps(sid, [_new(s, input={"i": s.index}, output=None) for s in steps])
        summaries = tx.list_summaries(sid)
        tx.rewrite_summaries([_new(s, text=f"sum {s.number}") for s in summaries])
        tx.rewrite_summaries([_new(summaries[0], number=999, text="nowhere")])  # gone: skipped
        for record in tx.list_idempotency(after=None, limit=1000):
            tx.rewrite_idempotency(replace(record, result='{"again":true}'))
    with store.transaction(write=False) as tx:
        assert tx.get_session(sid).version == version  # type: ignore[union-attr]
        got = tx.get_messages(sid)
        assert [m.message_id for m in got] == ids
        assert [m.content for m in got] == [f"new {m.seq}" for m in got]
        for number in rewinds:
            assert {m.content for m in tx.get_rewound_messages(sid, number)} == {"gone"}
        assert tx.get_working_memory(sid).data == {"now": 1}  # type: ignore[union-attr]
        rows = tx.list_memory_history(sid, before_seq=None, limit=100)
        assert [r.version for r in rows] == [v.version for v in history]
        assert all(r.data == {"v": r.version} for r in rows)
        for k in tx.list_tool_calls(sid):
            assert (k.arguments, k.result, k.error) == ({"a": 1}, [2], "e")
        assert [k.call_id for k in tx.list_tool_calls(sid)] == [k.call_id for k in calls]
        for run in runs:
            for s in tx.list_run_steps(sid, run.run_id):
                assert (s.input, s.output) == ({"i": s.index}, None)
        found = tx.list_summaries(sid)
        assert [(s.number, s.text) for s in found] == [
            (s.number, f"sum {s.number}") for s in summaries
        ]
        records = tx.list_idempotency(after=None, limit=1000)
        assert records and {r.result for r in records} == {'{"again":true}'}


def test_the_store_walks_list_everything_once_in_order(
    store: SessionStore, manager: SessionManager
) -> None:
    c = write_canaries(manager)
    with store.transaction(write=False) as tx:
        ids, after = [], None
        while page := tx.list_session_ids(after=after, limit=2):
            ids += page
            after = page[-1]
        docs = tx.list_shared_memory(after=None, limit=1)
        rest = tx.list_shared_memory(after=(docs[0].agent, docs[0].user_id or ""), limit=100)
        keyed = tx.list_idempotency(after=None, limit=1000)
        first = (keyed[0].user_id, keyed[0].scope, keyed[0].key)
        later = tx.list_idempotency(after=first, limit=1000)
    assert ids == sorted(set(ids)) and set(c.session_ids) <= set(ids)
    shared = [(d.agent, d.user_id or "") for d in docs + rest]
    assert shared == sorted(set(shared)) and (c.values["agent"], c.user) in shared
    keys = [(r.user_id, r.scope, r.key) for r in keyed]
    assert keys == sorted(set(keys)) and keys[1:] == [(r.user_id, r.scope, r.key) for r in later]
