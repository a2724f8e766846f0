"""Bearer JWTs from an identity provider, verified against its JWKS (PyJWT).

On when ``AGENTSESSION_JWT_JWKS`` names a JWKS: a file (re-read when it changes) or an
``https://`` URL (fetched by PyJWT's ``PyJWKClient``, its keys cached for
``AGENTSESSION_JWT_JWKS_CACHE_SECONDS``). A bearer token that is not an API key
(``key_...``) is then taken for a JWT and accepted only if:

* its ``alg`` is one of ``AGENTSESSION_JWT_ALGORITHMS`` (default ``RS256``; only
  asymmetric algorithms may be configured, so a public key is never used as an HMAC
  secret, and ``none`` never is) and its signature verifies with the JWKS key its
  ``kid`` names;
* it has ``exp`` and is not expired, its ``nbf`` (if any) has passed, its ``aud`` holds
  ``AGENTSESSION_JWT_AUDIENCE`` and its ``iss`` is ``AGENTSESSION_JWT_ISSUER`` (both
  required settings), with ``AGENTSESSION_JWT_LEEWAY_SECONDS`` of clock skew;
* the claim ``AGENTSESSION_JWT_USER_CLAIM`` (default ``sub``) is a valid user id;
* the claim ``AGENTSESSION_JWT_SCOPE_CLAIM`` (default ``scope``: a space-separated
  string, or a list) holds ``read``, ``write`` or both, and ``admin`` for an admin;
* with ``AGENTSESSION_JWT_AGENTS_CLAIM`` set, that claim, if present, is one or more
  valid agent names (space-separated, or a list): the token reaches only those agents'
  sessions (absent: every agent).

Anything else is a failed authentication (401, counted like a wrong API key).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import jwt

from ..errors import ValidationError
from ..ids import NAME_PATTERN, check_name
from ..principal import Principal, Scope
from ..settings import Settings

__all__ = ["ASYMMETRIC", "JwtVerifier"]

logger = logging.getLogger(__name__)

#: The algorithms that may be configured: public-key signatures only.
ASYMMETRIC = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class JwtVerifier:
    """Verifies bearer JWTs (see the module docstring).

    Raises:
        ValidationError: (construction) a setting is missing or not allowed.
    """

    def __init__(self, settings: Settings) -> None:
        source = settings.jwt_jwks
        if source is None:
            raise ValidationError("AGENTSESSION_JWT_JWKS is not set", field="jwt_jwks")
        if not settings.jwt_audience or not settings.jwt_issuer:
            raise ValidationError(
                "JWTs need AGENTSESSION_JWT_AUDIENCE and AGENTSESSION_JWT_ISSUER",
                field="jwt_audience",
            )
        refused = set(settings.jwt_algorithms) - ASYMMETRIC
        if refused or not settings.jwt_algorithms:
            raise ValidationError(
                f"AGENTSESSION_JWT_ALGORITHMS may name only {', '.join(sorted(ASYMMETRIC))}",
                field="jwt_algorithms",
            )
        self._settings = settings
        self._client: jwt.PyJWKClient | None = None
        self._file: Path | None = None
        self._keys: jwt.PyJWKSet | None = None
        self._stamp: tuple[int, int] | None = None
        if source.startswith(("https://", "http://")):
            self._client = jwt.PyJWKClient(
                source, cache_keys=True, lifespan=int(settings.jwt_jwks_cache_seconds)
            )
        else:
            self._file = Path(source)
            self._signing_keys()  # a missing or malformed file stops the start

    def principal(self, token: str) -> Principal | None:
        """The principal of a valid JWT; None for anything else (logged at debug level:
        the reason, never the token)."""
        s = self._settings
        try:
            key = self._key_for(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(s.jwt_algorithms),
                audience=s.jwt_audience,
                issuer=s.jwt_issuer,
                leeway=s.jwt_leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, ValidationError) as exc:
            logger.debug("JWT refused: %s", exc)
            return None
        try:
            user = check_name(claims.get(s.jwt_user_claim), field="user_id")
        except ValidationError:
            logger.debug("JWT refused: no valid user id in claim %r", s.jwt_user_claim)
            return None
        scopes = _scopes(claims.get(s.jwt_scope_claim))
        scope: Scope
        if "write" in scopes:
            scope = "write"
        elif "read" in scopes:
            scope = "read"
        else:
            logger.debug("JWT refused: neither read nor write in claim %r", s.jwt_scope_claim)
            return None
        agents = None
        if s.jwt_agents_claim is not None and s.jwt_agents_claim in claims:
            agents = frozenset(_scopes(claims[s.jwt_agents_claim]))
            if not agents or not all(NAME_PATTERN.fullmatch(a) for a in agents):
                logger.debug("JWT refused: no valid agent names in %r", s.jwt_agents_claim)
                return None
        return Principal(user_id=user, admin="admin" in scopes, scope=scope, agents=agents)

    def _key_for(self, token: str) -> Any:
        if self._client is not None:
            return self._client.get_signing_key_from_jwt(token).key
        kid = jwt.get_unverified_header(token).get("kid")
        keys = self._signing_keys()
        for found in keys.keys:
            if kid is None or found.key_id == kid:
                return found.key
        raise ValidationError(f"no key {kid!r} in the JWKS")

    def _signing_keys(self) -> jwt.PyJWKSet:
        """The JWKS file's keys, read again when the file changed.

        Raises:
            ValidationError: the file cannot be read or is not a JWKS.
        """
        assert self._file is not None
        try:
            st = os.stat(self._file)
            stamp = (st.st_mtime_ns, st.st_size)
            if self._keys is None or stamp != self._stamp:
                self._keys = jwt.PyJWKSet.from_dict(json.loads(self._file.read_bytes()))
                self._stamp = stamp
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise ValidationError(f"the JWKS {self._file} cannot be used: {exc}") from exc
        return self._keys


def _scopes(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(value.split())
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return set()
