"""Signed exports: ``export --sign`` writes ``<out>.sig``; ``export-verify`` accepts
the file with the signer's public key and refuses (exit 1) a changed byte or another
key; ``export-keygen`` writes a private key only its owner can read."""

from __future__ import annotations

import stat
from pathlib import Path

from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app

runner = CliRunner()


def _signed_export(tmp_path: Path) -> tuple[Path, Path]:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as m:
        sid = m.create_session(user_id="alice").session_id
        m.append_message(session_id=sid, user_id="alice", message={"role": "user", "content": "hi"})
    key = tmp_path / "signing.pem"
    made = runner.invoke(build_app(), ["export-keygen", str(key)])
    assert made.exit_code == 0, made.output
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    out = tmp_path / "s.jsonl"
    args = ["--url", url, "export", sid, "--user", "alice", "--out", str(out), "--sign", str(key)]
    done = runner.invoke(build_app(), args)
    assert done.exit_code == 0, done.output
    assert (tmp_path / "s.jsonl.sig").exists()
    return out, tmp_path / "signing.pem.pub"


def _verify(out: Path, public: Path) -> tuple[int, str]:
    r = runner.invoke(build_app(), ["export-verify", str(out), "--key", str(public)])
    return r.exit_code, r.output


def test_good_signature_verifies(tmp_path: Path) -> None:
    out, public = _signed_export(tmp_path)
    code, output = _verify(out, public)
    assert code == 0, output
    assert "verified" in output


def test_a_changed_byte_is_refused(tmp_path: Path) -> None:
    out, public = _signed_export(tmp_path)
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 0x01
    out.write_bytes(bytes(data))
    code, output = _verify(out, public)
    assert code == 1
    assert "changed since it was signed" in output


def test_another_key_is_refused(tmp_path: Path) -> None:
    out, _ = _signed_export(tmp_path)
    other = tmp_path / "other.pem"
    assert runner.invoke(build_app(), ["export-keygen", str(other)]).exit_code == 0
    code, output = _verify(out, tmp_path / "other.pem.pub")
    assert code == 1
    assert "another key" in output


def test_sign_needs_out_and_keygen_keeps_an_existing_key(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    assert runner.invoke(build_app(), ["export-keygen", str(key)]).exit_code == 0
    before = key.read_bytes()
    again = runner.invoke(build_app(), ["export-keygen", str(key)])
    assert again.exit_code != 0 and "exists" in again.output
    assert key.read_bytes() == before
    url = f"sqlite:///{tmp_path / 'x.db'}"
    args = ["--url", url, "export", "ses_x", "--user", "a", "--sign", str(key)]
    refused = runner.invoke(build_app(), args)
    assert refused.exit_code == 2 and "--out" in refused.output
