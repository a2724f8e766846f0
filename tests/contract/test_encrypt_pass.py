"""``agentsession encrypt`` on every store: a plaintext store, encrypted by a sealing
pass (:mod:`agentsession.stores.sealpass`) through the store port's content-rewrite
methods, reads back the same once reads fail closed again; a pass stopped after a few
batches resumes where it stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from contract_support import raw_store

from agentsession import SessionManager
from agentsession.crypto import ContentCipher, Keyring, MemoryKeyStore
from agentsession.crypto.marker import marker_path
from agentsession.stores.base import SessionStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sealpass import run_pass
from agentsession.transfer.jsonl import export_session
from canaries import Canaries, write_canaries


def _everything(sm: SessionManager, c: Canaries) -> list[Any]:
    """What the canaries' user can read: each session's export, its rewound messages,
    the user's shared document of the agent."""
    seen: list[Any] = []
    for sid in c.session_ids:
        scope = {"session_id": sid, "user_id": c.user}
        seen += list(export_session(sm, **scope))
        for rewind in sm.list_rewinds(**scope).items:
            page = sm.get_rewound_messages(**scope, number=rewind.number)
            seen += [m.model_dump(mode="json") for m in page.items]
    doc = sm.get_shared_memory(scope="user", agent=c.values["agent"], user_id=c.user)
    return [*seen, doc.model_dump(mode="json")]


def test_encrypt_pass_seals_a_plaintext_store_and_resumes(
    store: SessionStore, tmp_path: Path
) -> None:
    if isinstance(store, SealedStore):
        pytest.skip("the pass starts from the plaintext store below")
    inner = raw_store(store)
    with SessionManager(inner) as sm:
        c = write_canaries(sm)
        before = _everything(sm, c)
    keys = MemoryKeyStore()
    ring = Keyring.create(tmp_path / "store.keyring", key_store=keys)
    sealed = SealedStore(inner, ContentCipher(ring))
    stopped = run_pass(sealed, "encrypt", batch=1, max_batches=2)
    assert not stopped.complete and marker_path(ring.path).exists()
    # While the pass is declared, reads take plaintext and ciphertext alike.
    assert _everything(SessionManager(sealed), c) == before
    done = run_pass(sealed, "encrypt", batch=2)
    assert done.complete and not marker_path(ring.path).exists()
    assert stopped.rewritten + done.rewritten >= len(c.session_ids)
    # Fail closed again (a new process): every value read is a ciphertext that opens.
    reopened = Keyring.open(ring.path, key_store=keys)
    assert _everything(SessionManager(SealedStore(inner, ContentCipher(reopened))), c) == before
