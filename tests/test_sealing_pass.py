"""``agentsession encrypt`` and ``agentsession keyring reencrypt``: after the encrypt
pass no canary of any content kind is left in plaintext (memory store, SQLite files),
a writer running during the pass loses nothing and nothing is sealed twice, reads fail
closed again once the pass completes, and after a reencrypt pass the old data keys
are dropped while everything still reads. The pass on every store, stopped and
resumed: tests/contract/test_encrypt_pass.py."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.crypto import ContentCipher, Keyring
from agentsession.crypto.marker import marker_path
from agentsession.errors import KeyringError
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sealpass import declare, run_pass
from canaries import write_canaries
from test_encryption_at_rest import _content
from test_erasure_disk import _bytes_of


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(build_app(), list(args))
    return result.exit_code, result.output


def test_encrypt_leaves_no_canary_in_the_memory_store(tmp_path: Path) -> None:
    inner = MemoryStore()
    with SessionManager(inner) as sm:
        c = write_canaries(sm)
    tables = (inner._sessions, inner._keys, inner._idempotency, inner._shared)
    assert c.found_in(pickle.dumps(tables), _content(c)) != []  # plaintext to begin with
    ring = Keyring.create(tmp_path / "store.keyring")
    assert run_pass(SealedStore(inner, ContentCipher(ring)), "encrypt", batch=3).complete
    assert c.found_in(pickle.dumps(tables), _content(c)) == []


def test_cli_encrypt_leaves_no_canary_in_the_sqlite_files(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    url = f"sqlite:///{db}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        c = write_canaries(sm)
    ring = tmp_path / "store.keyring"
    assert _cli("keyring", "create", "--file", str(ring))[0] == 0
    args = ("--file", str(ring), "--url", url, "--batch", "1", "--compact")
    code, out = _cli("encrypt", *args)  # --compact: the pages that held the plaintext
    assert code == 0 and "encrypt pass complete" in out
    with SessionManager.from_url(url, keyring=ring) as sm:
        title = sm.get_session(session_id=c.session_ids[0], user_id=c.user).title
        assert title == c.values["new_title"]
    files = [db, tmp_path / "c.db-wal", tmp_path / "c.db-shm"]
    assert c.found_in(_bytes_of(files), _content(c)) == []


def test_reads_fail_closed_again_once_the_pass_completes(tmp_path: Path) -> None:
    inner = MemoryStore()
    with SessionManager(inner) as sm:
        sid = sm.create_session(user_id="u", title="plain").session_id
    ring = Keyring.create(tmp_path / "store.keyring")
    sealed = SealedStore(inner, ContentCipher(ring))
    assert run_pass(sealed, "encrypt").complete
    with inner.transaction(write=True) as tx:  # a plaintext value put back by hand
        tx._s._sessions[sid].session = tx._s._sessions[sid].session.model_copy(
            update={"title": "plain again"}
        )
    with pytest.raises(KeyringError, match="plaintext"):
        SessionManager(sealed).get_session(session_id=sid, user_id="u")


def test_a_writer_during_the_pass_loses_nothing(tmp_path: Path) -> None:
    """Appends run while the pass walks the sessions one per batch: every message
    appended is there once, sealed (no plaintext payload row), and reads back."""
    db = tmp_path / "w.db"
    url = f"sqlite:///{db}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sids = [sm.create_session(user_id="u", title=f"t{i}").session_id for i in range(12)]
        for sid in sids:
            sm.append_message(
                session_id=sid, user_id="u", message={"role": "user", "content": "old-text"}
            )
    ring = Keyring.create(tmp_path / "store.keyring")
    stop = threading.Event()
    written: list[tuple[str, str]] = []

    def writer() -> None:
        with SessionManager.from_url(url, keyring=ring) as w:
            i = 0
            while not stop.is_set() or i < 2 * len(sids):
                sid = sids[i % len(sids)]
                text = f"during-{i}"
                w.append_message(
                    session_id=sid, user_id="u", message={"role": "user", "content": text}
                )
                written.append((sid, text))
                i += 1

    with SessionManager.from_url(url, keyring=ring) as sm:
        store = sm.store
        assert isinstance(store, SealedStore)
        declare(store, "encrypt")  # the service reads both before the writer starts
        thread = threading.Thread(target=writer)
        thread.start()
        report = run_pass(store, "encrypt", batch=1)
        stop.set()
        thread.join()
        assert report.complete
        for sid in sids:
            got = [
                m.content for m in sm.get_messages(session_id=sid, user_id="u", limit=1000).items
            ]
            assert got == ["old-text", *[t for s, t in written if s == sid]]
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        payloads = [str(p) for p in conn.execute(sa.text("SELECT payload FROM messages")).scalars()]
    engine.dispose()
    assert len(payloads) == len(sids) + len(written)
    # sealed: no text in clear; once: each opened to the message appended (above)
    assert all("$as1$" in p and "old-text" not in p and "during-" not in p for p in payloads)


def test_reencrypt_then_dropping_the_old_keys_still_reads_everything(tmp_path: Path) -> None:
    ring = Keyring.create(tmp_path / "store.keyring")
    sealed = SealedStore(MemoryStore(), ContentCipher(ring))
    with SessionManager(sealed) as sm:
        c = write_canaries(sm)
        ring.rotate_data_keys()
        ring._store._checked = float("-inf")  # type: ignore[attr-defined]
        assert ring.status().data_keys > ring.status().users  # old keys still needed
        report = run_pass(sealed, "reencrypt", batch=2)
        assert report.complete and report.retired_users == ring.status().users
        status = ring.status()
        assert status.data_keys == status.users and status.sealing_pass is None
        # A new process: only the newest keys are left, and every value opens.
        reopened = SealedStore(sealed.inner, ContentCipher(Keyring.open(ring.path)))
        with SessionManager(reopened) as fresh:
            for sid in c.session_ids:
                got = fresh.get_messages(session_id=sid, user_id=c.user, limit=1000).items
                assert got == sm.get_messages(session_id=sid, user_id=c.user, limit=1000).items
    assert not marker_path(ring.path).exists()


def test_cli_reencrypt_and_status(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    ring = tmp_path / "store.keyring"
    _cli("keyring", "create", "--file", str(ring))
    with SessionManager.from_url(url, auto_migrate=True, keyring=ring) as sm:
        sid = sm.create_session(user_id="u", title="kept").session_id
    _cli("keyring", "rotate", "--data-keys", "--file", str(ring))
    code, out = _cli("keyring", "status", "--file", str(ring))
    assert "old data keys (kept until a reencrypt pass)\t1" in out
    code, out = _cli("keyring", "reencrypt", "--file", str(ring), "--url", url)
    assert code == 0 and "reencrypt pass complete" in out and "1 users dropped" in out
    code, out = _cli("keyring", "status", "--file", str(ring))
    assert "old data keys (kept until a reencrypt pass)\t0" in out
    with SessionManager.from_url(url, keyring=ring) as sm:
        assert sm.get_session(session_id=sid, user_id="u").title == "kept"


def test_a_fork_made_during_the_pass_behind_its_cursor_is_sealed_too(tmp_path: Path) -> None:
    """A fork copies its parent's rows as they are: made from a parent the walk has not
    reached, under an id the walk has passed, its copies are plaintext until the pass
    walks the forks made since it started. After the pass every fork reads, failing
    closed."""
    inner = MemoryStore()
    with SessionManager(inner) as sm:
        sids = sorted(sm.create_session(user_id="u").session_id for _ in range(6))
        for sid in sids:
            sm.append_message(session_id=sid, user_id="u", message={"role": "user", "content": sid})
    ring = Keyring.create(tmp_path / "store.keyring")
    sealed = SealedStore(inner, ContentCipher(ring))
    run_pass(sealed, "encrypt", batch=1, max_batches=len(sids) - 1)  # all but the last
    with SessionManager(sealed) as service:
        forks = [
            service.fork_session(session_id=sids[-1], user_id="u").session_id for _ in range(10)
        ]
    assert any(f < sids[-2] for f in forks)  # behind the cursor (odds of none: 1e-5)
    assert run_pass(sealed, "encrypt").complete
    fresh = SealedStore(inner, ContentCipher(Keyring.open(ring.path)))
    with SessionManager(fresh) as sm:
        for fork in forks:
            got = sm.get_messages(session_id=fork, user_id="u").items
            assert [m.content for m in got] == [sids[-1]]


def test_a_pass_killed_mid_batch_resumes_after_the_last_batch_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third session's rewrite dies (as a killed process would, its transaction
    rolled back): the marker still names the second; run again, the pass completes
    and every session reads, failing closed."""
    from agentsession.crypto.marker import read_marker
    from agentsession.stores import sealpass

    inner = MemoryStore()
    with SessionManager(inner) as sm:
        sids = sorted(sm.create_session(user_id="u", title=f"t{i}").session_id for i in range(5))
    ring = Keyring.create(tmp_path / "store.keyring")
    sealed = SealedStore(inner, ContentCipher(ring))
    real = sealpass._reseal_session
    calls: list[str] = []

    def dying(store: SealedStore, session_id: str) -> None:
        calls.append(session_id)
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed
        real(store, session_id)

    monkeypatch.setattr(sealpass, "_reseal_session", dying)
    with pytest.raises(KeyboardInterrupt):
        run_pass(sealed, "encrypt", batch=1)
    marker = read_marker(marker_path(ring.path))
    assert marker is not None and marker.after == [sids[1]] and marker.done == 2
    monkeypatch.setattr(sealpass, "_reseal_session", real)
    report = run_pass(sealed, "encrypt", batch=1)
    assert report.complete and report.rewritten == 3
    fresh = SealedStore(inner, ContentCipher(Keyring.open(ring.path)))
    with SessionManager(fresh) as sm:
        titles = [sm.get_session(session_id=s, user_id="u").title for s in sids]
    assert sorted(titles) == [f"t{i}" for i in range(5)]
