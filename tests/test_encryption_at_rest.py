"""Encryption at rest on every store: with a keyring, no canary of any content kind
(tests/canaries.py) is in the database files, a dump, the Redis keys and AOF or the
PostgreSQL WAL; after an erasure, a copy of the database taken before it gives back
none of the erased user's content, while another user's content in the same copy still
reads; a ciphertext moved by hand to another row, session or user does not open; a
plaintext value where a ciphertext is expected is refused (fail closed)."""

from __future__ import annotations

import pickle
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

import servers
from agentsession import SessionManager
from agentsession.crypto import ContentCipher, Keyring, MemoryKeyStore
from agentsession.errors import KeyringError
from agentsession.models import Message
from agentsession.stores.base import SessionStore
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.redis.store import RedisStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.schema import messages, sessions, working_memory
from agentsession.stores.sql.store import SQLStore
from canaries import Canaries, write_canaries
from test_erasure_disk import _all_values, _aof_files, _bytes_of, _every_row, _pg_admin, _pg_dump

#: Canary kinds that stay clear by design: keys and labels the stores index and sort
#: by (an external key, a record's namespace and key, a step's name, a summary's author
#: and model), and identifiers (ids, names, the idempotency key).
CLEAR = {
    "external_key",
    "record_namespace",
    "record_key",
    "step_name",
    "summary_author",
    "summary_model",
}


def _sealed(store: SessionStore, tmp_path: Path) -> SealedStore:
    ring = Keyring.create(tmp_path / "store.keyring", key_store=MemoryKeyStore())
    return SealedStore(store, ContentCipher(ring))


def _content(c: Canaries) -> dict[str, str]:
    return {k: v for k, v in c.free_text().items() if k not in CLEAR}


def _written(store: SealedStore) -> Canaries:
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        other = sm.create_session(user_id="bob", title="bob-title")
        sm.append_message(
            session_id=other.session_id, user_id="bob", message={"role": "user", "content": "x"}
        )
    return c


def test_the_memory_store_holds_no_content_canary(tmp_path: Path) -> None:
    """Everything the memory store keeps, pickled (strings and bytes as they are)."""
    inner = MemoryStore()
    c = _written(_sealed(inner, tmp_path))
    tables = (inner._sessions, inner._keys, inner._idempotency, inner._shared)
    assert c.found_in(pickle.dumps(tables), _content(c)) == []


def test_sqlite_files_hold_no_content_canary(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    store = _sealed(SQLStore(f"sqlite:///{db}", auto_migrate=True), tmp_path)
    c = _written(store)
    files = [db, tmp_path / "c.db-wal", tmp_path / "c.db-shm"]
    assert c.found_in(_bytes_of(files), _content(c)) == []
    store.close()
    assert c.found_in(_bytes_of(files), _content(c)) == []


def _mariadb_client(server: servers.Server, program: str, url: str) -> list[str]:
    database = url.rsplit("/", 1)[1]
    return [program, "-h", "127.0.0.1", "-P", str(server.port), "-u", "root", database]


def _mariadb_dump(server: servers.Server, url: str) -> bytes:
    """A ``mariadb-dump`` of the database of ``url`` (binary values as they are, not
    hex: a canary in one would show)."""
    command = _mariadb_client(server, shutil.which("mariadb-dump") or "mysqldump", url)
    return subprocess.run(command, check=True, capture_output=True).stdout


def _mariadb_load(server: servers.Server, url: str, dump: bytes) -> None:
    command = _mariadb_client(server, shutil.which("mariadb") or "mysql", url)
    subprocess.run([*command, "--binary-mode"], input=dump, check=True, capture_output=True)


def test_postgres_dump_and_wal_hold_no_content_canary(
    postgres_server: servers.Server, postgres_url: str, tmp_path: Path
) -> None:
    store = _sealed(SQLStore(postgres_url, auto_migrate=True), tmp_path)
    c = _written(store)
    assert c.found_in(_pg_dump(postgres_server, postgres_url), _content(c)) == []
    with _pg_admin(postgres_server) as conn:
        conn.execute("CHECKPOINT")
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
    wal = sorted((data / "pg_wal").glob("0*"))
    assert wal and c.found_in(_bytes_of(wal), _content(c)) == []
    store.close()


def test_mariadb_rows_and_dump_hold_no_content_canary(
    mysql_server: servers.Server, mysql_url: str, tmp_path: Path
) -> None:
    inner = SQLStore(mysql_url, auto_migrate=True)
    store = _sealed(inner, tmp_path)
    c = _written(store)
    assert c.found_in(_every_row(inner), _content(c)) == []
    assert c.found_in(_mariadb_dump(mysql_server, mysql_url), _content(c)) == []
    store.close()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.config_set("rdbcompression", "no")
    try:
        yield client
    finally:
        client.config_set("rdbcompression", "yes")
        client.close()


def test_redis_keys_and_aof_hold_no_content_canary(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    store = _sealed(RedisStore(redis_url), tmp_path)
    c = _written(store)
    assert c.found_in(_all_values(redis_client), _content(c)) == []
    assert c.found_in(_bytes_of(_aof_files(redis_client)), _content(c)) == []
    store.close()


def _alice_and_bob(url: str, ring: Keyring) -> tuple[Canaries, str]:
    """Canaries of every kind for the canaries' user, and a session of bob's with a
    message; the manager closed after."""
    with SessionManager.from_url(url, auto_migrate=True, keyring=ring) as sm:
        c = write_canaries(sm)
        bob = sm.create_session(user_id="bob", title="bob-title").session_id
        sm.append_message(session_id=bob, user_id="bob", message={"role": "user", "content": "hi"})
    return c, bob


def _erase(url: str, ring: Keyring, user: str) -> None:
    with SessionManager.from_url(url, keyring=ring) as sm:
        erasure = sm.erase_user(user_id=user)
    assert any("data keys" in step for step in erasure.store.done)


def _nothing_of_the_user_reads(copy: str, keyring: Path, c: Canaries, bob: str) -> None:
    """The copy opened with the keyring file: no session of the erased user opens, nor
    any of its messages; bob's session and message still read."""
    with SessionManager.from_url(copy, keyring=keyring) as sm:
        unreadable = 0
        for sid in c.session_ids:
            with pytest.raises(KeyringError):
                sm.get_session(session_id=sid, user_id=c.user)
            try:
                assert sm.get_messages(session_id=sid, user_id=c.user).items == []
            except KeyringError:
                unreadable += 1
        assert unreadable >= 1  # the sessions holding messages
        assert sm.get_session(session_id=bob, user_id="bob").title == "bob-title"
        page = sm.get_messages(session_id=bob, user_id="bob")
        assert [m.content for m in page.items] == ["hi"]


def test_a_copy_taken_before_an_erasure_gives_back_nothing_of_the_user(tmp_path: Path) -> None:
    """Crypto-shredding: the erasure destroys the user's data keys, so the copy's rows
    of the user no longer open; bob's rows in the same copy still do."""
    db = tmp_path / "c.db"
    ring = Keyring.create(tmp_path / "store.keyring")
    c, bob = _alice_and_bob(f"sqlite:///{db}", ring)
    shutil.copyfile(db, tmp_path / "copy.db")  # closed: the WAL was checkpointed into it
    _erase(f"sqlite:///{db}", ring, c.user)
    _nothing_of_the_user_reads(f"sqlite:///{tmp_path / 'copy.db'}", ring.path, c, bob)


def test_a_postgres_copy_taken_before_an_erasure_gives_back_nothing_of_the_user(
    postgres_server: servers.Server, postgres_url: str, tmp_path: Path
) -> None:
    """The copy: ``CREATE DATABASE ... TEMPLATE`` of the store's database, taken with
    no connection open to it."""
    ring = Keyring.create(tmp_path / "store.keyring")
    c, bob = _alice_and_bob(postgres_url, ring)
    name = postgres_url.rsplit("/", 1)[1]
    with _pg_admin(postgres_server) as conn:
        conn.execute(f"CREATE DATABASE {name}_copy TEMPLATE {name}")
    try:
        _erase(postgres_url, ring, c.user)
        _nothing_of_the_user_reads(f"{postgres_url}_copy", ring.path, c, bob)
    finally:
        postgres_server.drop_database(f"{name}_copy")


def test_a_mariadb_dump_taken_before_an_erasure_gives_back_nothing_of_the_user(
    mysql_server: servers.Server, mysql_url: str, tmp_path: Path
) -> None:
    """The copy: a ``mariadb-dump`` of the store's database loaded into another one."""
    ring = Keyring.create(tmp_path / "store.keyring")
    c, bob = _alice_and_bob(mysql_url, ring)
    dump = _mariadb_dump(mysql_server, mysql_url)
    name, copy = mysql_server.create_database()
    try:
        _mariadb_load(mysql_server, copy, dump)
        _erase(mysql_url, ring, c.user)
        _nothing_of_the_user_reads(copy, ring.path, c, bob)
    finally:
        mysql_server.drop_database(name)


def test_a_redis_copy_taken_before_an_erasure_gives_back_nothing_of_the_user(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The copy: every key DUMPed before the erasure, RESTOREd into another database."""
    ring = Keyring.create(tmp_path / "store.keyring")
    c, bob = _alice_and_bob(redis_url, ring)
    copy = {key: redis_client.dump(key) for key in redis_client.scan_iter()}
    _erase(redis_url, ring, c.user)
    other_db = redis_url.rsplit("/", 1)[0] + "/1"
    with redis.Redis.from_url(other_db) as target:
        target.flushdb()
        for key, value in copy.items():
            target.restore(key, 0, value)  # type: ignore[arg-type]
    try:
        _nothing_of_the_user_reads(other_db, ring.path, c, bob)
    finally:
        with redis.Redis.from_url(other_db) as target:
            target.flushdb()


def _two_sessions(tmp_path: Path) -> tuple[SQLStore, SessionManager, list[str]]:
    inner = SQLStore(f"sqlite:///{tmp_path / 'm.db'}", auto_migrate=True)
    sm = SessionManager(_sealed(inner, tmp_path))
    ids = []
    for user in ("alice", "alice", "bob"):
        sid = sm.create_session(user_id=user, title=f"{user}-title").session_id
        for text in ("one", "two"):
            sm.append_message(
                session_id=sid, user_id=user, message={"role": "user", "content": text}
            )
        ids.append(sid)
    return inner, sm, ids


def _move(inner: SQLStore, table: sa.Table, column: str, src: dict, dst: dict) -> None:
    t = table
    with inner.engine.begin() as conn:
        value = conn.execute(
            sa.select(t.c[column]).where(*(t.c[k] == v for k, v in src.items()))
        ).scalar_one()
        conn.execute(
            sa.update(t).where(*(t.c[k] == v for k, v in dst.items())).values({column: value})
        )


@pytest.mark.parametrize("where", ["row", "session", "user"])
def test_a_ciphertext_moved_by_hand_does_not_open(tmp_path: Path, where: str) -> None:
    inner, sm, (a1, a2, b1) = _two_sessions(tmp_path)
    target = {"row": (a1, "alice", 2), "session": (a2, "alice", 1), "user": (b1, "bob", 1)}
    sid, user, seq = target[where]
    _move(inner, messages, "payload", {"session_id": a1, "seq": 1}, {"session_id": sid, "seq": seq})
    with pytest.raises(KeyringError, match=r"does not open|another user"):
        sm.get_messages(session_id=sid, user_id=user)
    # A title moved to another user's session does not open either.
    _move(inner, sessions, "title", {"session_id": a1}, {"session_id": b1})
    with pytest.raises(KeyringError):
        sm.get_session(session_id=b1, user_id="bob")
    sm.close()


def test_plaintext_where_a_ciphertext_is_expected_is_refused(tmp_path: Path) -> None:
    inner, sm, (a1, _, _) = _two_sessions(tmp_path)
    sm.update_working_memory(session_id=a1, user_id="alice", data={"goal": "sealed"})
    with inner.engine.begin() as conn:
        conn.execute(
            sa.update(messages)
            .where(messages.c.session_id == a1, messages.c.seq == 2)
            .values(payload={"role": "user", "content": "planted"})
        )
        conn.execute(
            sa.update(working_memory)
            .where(working_memory.c.session_id == a1)
            .values(data={"goal": "planted"})
        )
    with pytest.raises(KeyringError, match="plaintext"):
        sm.get_messages(session_id=a1, user_id="alice")
    with pytest.raises(KeyringError, match="plaintext"):
        sm.get_working_memory(session_id=a1, user_id="alice")
    sm.close()


def test_a_missing_keyring_file_is_a_keyring_error(tmp_path: Path) -> None:
    with pytest.raises(KeyringError, match="no keyring"):
        SessionManager.from_url("memory://", keyring=tmp_path / "absent")


def test_http_answers_a_ciphertext_that_does_not_open_503_without_details(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's own data cannot be opened: 503 ``store-unavailable`` with
    ``Retry-After``, nothing of the place in the answer nor in the log."""
    from fastapi.testclient import TestClient

    from agentsession.http.app import create_app
    from agentsession.http.keys import MemoryKeyStore as ApiKeys
    from agentsession.settings import Settings

    inner, sm, (a1, a2, _) = _two_sessions(tmp_path)
    _move(inner, messages, "payload", {"session_id": a2, "seq": 1}, {"session_id": a1, "seq": 1})
    keys = ApiKeys()
    token = keys.create(user_id="alice")[1]
    app = create_app(sm, Settings(url="memory://"), keys=keys)
    with TestClient(app, raise_server_exceptions=False) as http:
        r = http.get(f"/v1/sessions/{a1}/messages", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    body = r.json()
    assert body["type"].endswith("/store-unavailable")
    assert a1 not in r.text and "keyring" not in r.text and "alice" not in r.text
    assert a1 not in caplog.text and "alice" not in caplog.text
    sm.close()


def test_a_sealed_read_builds_each_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store hands the sealed payload to the sealed store, which opens it and
    builds the message: one build per message, not a sealed one and an opened one."""
    _, sm, (a1, _, _) = _two_sessions(tmp_path)
    built: list[int] = []
    real = Message.from_store.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Message], *args: Any, **kwargs: Any) -> Message:
        built.append(kwargs["seq"])
        return real(cls, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(Message, "from_store", classmethod(counted))
    page = sm.get_messages(session_id=a1, user_id="alice")
    assert [m.content for m in page.items] == ["one", "two"]
    assert sorted(built) == [1, 2]
    sm.close()
