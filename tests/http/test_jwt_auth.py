"""Bearer JWTs verified against a JWKS file, with keys made here: the user and scopes
come from their claims; a wrong signature, algorithm, audience, issuer, an expired or
not-yet-valid token, or one without a scope is a 401 (counted as a failure)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.errors import ValidationError
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

jwt = pytest.importorskip("jwt")
rsa = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.rsa")
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat  # noqa: E402

ISSUER, AUDIENCE = "https://idp.example.test/", "agentsession"


def _key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwks(path: Path, *keys: tuple[str, Any]) -> Path:
    found = []
    for kid, key in keys:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        found.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
    path.write_text(json.dumps({"keys": found}))
    return path


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hs256(secret: bytes) -> str:
    """A JWT signed with HS256 by hand (PyJWT refuses a PEM key as an HMAC secret)."""
    now = int(time.time())
    claims = {"sub": "alice", "scope": "write", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 60}
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def _token(key: Any, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "alice", "scope": "read write", "iss": ISSUER, "aud": AUDIENCE}
    body |= {"iat": now, "exp": now + 300, **claims}
    return jwt.encode({k: v for k, v in body.items() if v is not None}, key, alg, {"kid": kid})


@pytest.fixture
def setup(tmp_path: Path):  # type: ignore[no-untyped-def]
    key = _key()
    jwks = _jwks(tmp_path / "jwks.json", ("k1", key))
    settings = Settings(
        url="memory://", jwt_jwks=str(jwks), jwt_audience=AUDIENCE, jwt_issuer=ISSUER
    )
    with SessionManager.from_url("memory://") as manager:
        app = create_app(manager, settings, keys=MemoryKeyStore())
        with TestClient(app) as client:
            yield client, key


def _get(client: TestClient, token: str, path: str = "/v1/whoami") -> Any:
    return client.get(path, headers={"Authorization": f"Bearer {token}"})


def test_a_valid_jwt_acts_as_its_user_with_its_scopes(setup) -> None:  # type: ignore[no-untyped-def]
    client, key = setup
    assert _get(client, _token(key)).json() == {
        "user_id": "alice",
        "admin": False,
        "scope": "write",
        "agents": None,
    }
    read = _token(key, scope="read", sub="bob")
    assert _get(client, read).json() == {
        "user_id": "bob",
        "admin": False,
        "scope": "read",
        "agents": None,
    }
    writes = client.post("/v1/sessions", json={}, headers={"Authorization": f"Bearer {read}"})
    assert writes.status_code == 403
    admin = _token(key, scope=["write", "admin"], sub="root")
    assert _get(client, admin).json() == {
        "user_id": "root",
        "admin": True,
        "scope": "write",
        "agents": None,
    }


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "someone-else"},
        {"iss": "https://other.example.test/"},
        {"exp": -120},
        {"exp": None},
        {"nbf": 600},
        {"scope": "admin"},
        {"scope": None},
        {"sub": "not a user id"},
    ],
    ids=["aud", "iss", "expired", "no-exp", "nbf", "no-read-write", "no-scope", "bad-sub"],
)
def test_a_jwt_failing_a_check_is_refused(setup, claims: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """Each check refuses its claim; times are seconds from now, taken when the test
    runs (at collection they went stale in a long run: a ``nbf`` 600 s ahead passed)."""
    client, key = setup
    now = int(time.time())
    timed = {k: now + v for k, v in claims.items() if k in ("exp", "nbf") and v is not None}
    assert _get(client, _token(key, **(claims | timed))).status_code == 401


def test_other_keys_and_algorithms_are_refused(setup) -> None:  # type: ignore[no-untyped-def]
    client, key = setup
    assert _get(client, _token(_key())).status_code == 401  # not the JWKS's key
    assert _get(client, _token(_key(), kid="k2")).status_code == 401  # unknown kid
    assert _get(client, _token(key, alg="RS512")).status_code == 401  # not pinned
    # The public key as an HMAC secret (algorithm confusion): never accepted.
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    assert _get(client, _hs256(public)).status_code == 401
    unsigned = jwt.encode({"sub": "alice", "scope": "write"}, None, algorithm="none")
    assert _get(client, unsigned).status_code == 401


def test_a_rotated_jwks_file_is_read_again(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client, key = setup
    newer = _key()
    time.sleep(0.01)
    _jwks(tmp_path / "jwks.json", ("k1", key), ("k2", newer))
    assert _get(client, _token(newer, kid="k2")).status_code == 200


def test_settings_without_audience_or_with_a_symmetric_algorithm_are_refused(
    tmp_path: Path,
) -> None:
    jwks = _jwks(tmp_path / "jwks.json", ("k1", _key()))
    base = {"url": "memory://", "jwt_jwks": str(jwks), "jwt_issuer": ISSUER}
    with pytest.raises(ValidationError, match="AUDIENCE"):
        create_app(SessionManager.from_url("memory://"), Settings(**base))
    with pytest.raises(ValidationError, match="ALGORITHMS"):
        create_app(
            SessionManager.from_url("memory://"),
            Settings(**base, jwt_audience=AUDIENCE, jwt_algorithms=["HS256"]),
        )


def test_c31_a_jwt_may_limit_its_agents_in_the_configured_claim(tmp_path: Path) -> None:
    key = _key()
    settings = Settings(
        url="memory://",
        jwt_jwks=str(_jwks(tmp_path / "jwks.json", ("k1", key))),
        jwt_audience=AUDIENCE,
        jwt_issuer=ISSUER,
        jwt_agents_claim="agents",
    )
    with SessionManager.from_url("memory://") as manager:
        billing = manager.create_session(user_id="alice", agent="billing").session_id
        app = create_app(manager, settings, keys=MemoryKeyStore())
        with TestClient(app) as client:
            limited = {"Authorization": f"Bearer {_token(key, agents=['support'])}"}
            made = client.post("/v1/sessions", json={"agent": "support"}, headers=limited)
            assert made.status_code == 201, made.text
            other = client.post("/v1/sessions", json={"agent": "billing"}, headers=limited)
            assert other.status_code == 403, other.text
            assert client.get(f"/v1/sessions/{billing}", headers=limited).status_code == 404
            assert _get(client, _token(key), f"/v1/sessions/{billing}").status_code == 200
            assert _get(client, _token(key, agents="not a name!")).status_code == 401
            assert _get(client, _token(key, agents=[])).status_code == 401
