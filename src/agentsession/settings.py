"""Settings read from the environment, at the edges only (CLI, HTTP service).

The library itself never reads ``os.environ``: the CLI and the service build one
:class:`Settings` and pass explicit values down. Every field maps to an environment
variable with the ``AGENTSESSION_`` prefix, e.g. ``AGENTSESSION_URL``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, SecretStr
from pydantic import ValidationError as PydanticValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from .service.policy import Limits, Policy
from .usage import load_prices

__all__ = ["Settings", "load_settings"]

#: The library's defaults; the settings only override them from the environment.
_POLICY = Policy()
#: The default body limit: one record of ``Limits.max_record_bytes`` in base64 (4 bytes
#: per 3), plus room for its meta (64 KiB of JSON) and the JSON around it.
_BODY_BYTES = 4 * math.ceil(Limits().max_record_bytes / 3) + 256 * 1024


class Settings(BaseSettings):
    """Configuration of the CLI and the HTTP service.

    Attributes:
        url: the store URL (``AGENTSESSION_URL``); default ``sqlite:///sessions.db``,
            an SQLite file in the current directory (the name the README uses).
        auto_migrate: bring the schema to the current revision at start
            (``AGENTSESSION_AUTO_MIGRATE``); off by default: run ``agentsession db upgrade``.
        sqlite_synchronous: ``FULL`` (default; no acknowledged write lost on power loss)
            or ``NORMAL`` (faster; a power loss may drop the last commits).
        host, port, workers: where ``agentsession serve`` listens, and how many
            worker processes it starts (several need a multi-process store).
        keys_file: the JSON file of API keys (SHA-256 hashes only); set, the service
            and ``agentsession keys`` use it whatever ``keys`` says. Unset, a key file
            is next to an SQLite database (``<db>.keys.json``), else
            ``agentsession-keys.json``.
        keys: where API keys live (``AGENTSESSION_KEYS``): ``store``, the session
            store's key table, shared by every instance on every machine (default on
            PostgreSQL, MySQL/MariaDB and Redis); ``file``, a key file (default on
            SQLite and ``memory://``).
        keys_cache_seconds: how long an instance trusts what it read of a key in the
            store: a revoked key is refused by every instance within this time
            (default 5).
        max_body_bytes: the largest request body the service reads; larger -> 413.
            Default: a put of one record of ``Limits.max_record_bytes`` fits (its data
            in base64), 11,446,956 bytes with the default limits.
        max_header_bytes: the largest request header section (request line and every
            header field, in bytes); larger -> 431, the rest of it is not read.
        max_header_count: the most header fields a request may carry; more -> 431.
        header_timeout_seconds: seconds from the connection (or from the first byte of
            a request on a kept-alive connection) within which the whole header section
            must arrive; later -> 408 and the connection is closed (``serve`` only).
        body_timeout_seconds: seconds from the start of a request (its headers read)
            within which the whole body must arrive; later -> 408 and the connection is
            closed.
        max_concurrent_requests: requests one worker process serves at once; the next
            one is answered 503 with ``Retry-After`` at once (each worker counts its own).
        pool_size: PostgreSQL and MySQL/MariaDB: the most server connections one worker
            process keeps (``AGENTSESSION_POOL_SIZE``); default: ``max_concurrent_requests``,
            so every request the worker admits has a connection and none is opened and
            closed per request. Keep it times the workers (and instances) under the
            server's ``max_connections``; a request finding them all in use waits.
        auth_failures_per_address: failed authentications (no key, unknown or revoked
            key) one client address may make within ``auth_failure_window_seconds``;
            past it every request of that address that needs a key is answered 429 with
            ``Retry-After``, a correct key too, until the window has room again.
        auth_failures_per_key: failed authentications naming one key id (the token's
            part before the dot) within the window; past it a wrong secret with that key
            id is answered 429 (the key's own token still works).
        auth_failure_window_seconds: the moving window of both counts, in seconds.
        require_if_match: PUT/PATCH/DELETE, message pops and lifecycle actions
            without ``If-Match`` are answered 428 Precondition Required.
        idempotency_retention_seconds: how long an idempotency key is remembered
            (default: ``Policy``'s, 24 h); ``agentsession sweep`` purges older ones.
        expired_restore_window_seconds: how long an EXPIRED session may be restored
            (default: ``Policy``'s, 7 days; unset = always, 0 = never).
        tombstone_key: the secret of the keyed hash standing for the user id in the
            tombstone of a deleted session (``AGENTSESSION_TOMBSTONE_KEY``, at least 16
            characters); unset = a random key per process, so tombstones cannot be
            linked to users (``Policy.tombstone_key``).
        metrics_token: the bearer token ``GET /metrics`` demands
            (``AGENTSESSION_METRICS_TOKEN``, at least 16 characters); unset, there is no
            ``/metrics`` (docs/deployment.md, "Metrics").
        otel_traces: OpenTelemetry spans of requests and store calls, to the global
            tracer provider (``AGENTSESSION_OTEL_TRACES``; the extra ``otel``).
        jwt_jwks: bearer JWTs are accepted, verified against this JWKS: a file, or an
            ``https://`` URL (``AGENTSESSION_JWT_JWKS``; the extra ``jwt``); unset, only
            API keys are (:mod:`agentsession.http.jwtauth`).
        jwt_audience, jwt_issuer: the ``aud`` and ``iss`` a JWT must carry (required
            with ``jwt_jwks``).
        jwt_algorithms: the signature algorithms accepted (asymmetric only; default
            ``["RS256"]``; in the environment a JSON list).
        jwt_user_claim: the claim holding the user id (default ``sub``).
        jwt_scope_claim: the claim holding the scopes ``read``, ``write``, ``admin``
            (default ``scope``: space-separated, or a list).
        jwt_agents_claim: the claim holding the agents a JWT is limited to (a
            space-separated string or a list of agent names; docs/security.md, "Keys
            limited to agents"); unset (default) = JWTs reach every agent.
        jwt_leeway_seconds: clock skew allowed on ``exp`` and ``nbf`` (default 30).
        jwt_jwks_cache_seconds: how long keys fetched from a JWKS URL are kept (300).
        redis_rewrite_aof: a Redis store rewrites its append-only file after every
            erasure (``AGENTSESSION_REDIS_REWRITE_AOF``), so erased values leave it at once.
        keyring_file: the keyring file (``AGENTSESSION_KEYRING_FILE``; ``agentsession
            keyring create``): content is stored sealed with per-user keys
            (docs/security.md, "Encryption at rest"); unset = stored as it is.
        search_with_keyring: with a keyring, turn search on anyway
            (``AGENTSESSION_SEARCH_WITH_KEYRING``; off by default): the search index
            then holds the plaintext text of titles, messages and tool calls
            (docs/security.md, "Search with a keyring").
        prices_file: the price table of the usage ledger (``AGENTSESSION_PRICES_FILE``),
            a JSON file of model name -> prices per million tokens
            (:func:`agentsession.usage.load_prices`); unset (default): no prices, so
            costs are null (docs/semantics.md, "Usage and budgets").
    """

    model_config = SettingsConfigDict(env_prefix="AGENTSESSION_", extra="ignore")

    url: str = "sqlite:///sessions.db"
    auto_migrate: bool = False
    sqlite_synchronous: str = "FULL"
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    keys_file: str | None = None
    keys: Literal["store", "file"] | None = None
    keys_cache_seconds: float = Field(5.0, ge=0, le=300)
    max_body_bytes: int = _BODY_BYTES
    max_header_bytes: int = Field(16 * 1024, ge=1024)
    max_header_count: int = Field(100, ge=10)
    header_timeout_seconds: float = Field(10.0, gt=0)
    body_timeout_seconds: float = Field(15.0, gt=0)
    max_concurrent_requests: int = Field(100, ge=1)
    pool_size: int | None = Field(None, ge=1)
    auth_failures_per_address: int = Field(30, ge=1)
    auth_failures_per_key: int = Field(10, ge=1)
    auth_failure_window_seconds: int = Field(60, ge=1)
    require_if_match: bool = False
    idempotency_retention_seconds: float = _POLICY.idempotency_retention_seconds
    expired_restore_window_seconds: float | None = _POLICY.expired_restore_window_seconds
    tombstone_key: SecretStr | None = None
    redis_rewrite_aof: bool = False
    keyring_file: str | None = None
    search_with_keyring: bool = False
    prices_file: str | None = None
    metrics_token: SecretStr | None = Field(None, min_length=16)
    otel_traces: bool = False
    jwt_jwks: str | None = None
    jwt_audience: str | None = None
    jwt_issuer: str | None = None
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["RS256"])
    jwt_user_claim: str = "sub"
    jwt_scope_claim: str = "scope"
    jwt_agents_claim: str | None = None
    jwt_leeway_seconds: float = Field(30.0, ge=0, le=600)
    jwt_jwks_cache_seconds: float = Field(300.0, ge=1)

    def manager_options(self) -> dict[str, Any]:
        """Keyword arguments for ``SessionManager.from_url(self.url, ...)``: the policy,
        and the options that apply to the store this URL names."""
        options: dict[str, Any] = {
            "auto_migrate": self.auto_migrate,
            "policy": Policy(
                idempotency_retention_seconds=self.idempotency_retention_seconds,
                expired_restore_window_seconds=self.expired_restore_window_seconds,
                tombstone_key=None
                if self.tombstone_key is None
                else self.tombstone_key.get_secret_value().encode("utf-8"),
                prices=None if self.prices_file is None else load_prices(self.prices_file),
            ),
        }
        if self.keyring_file:
            options["keyring"] = self.keyring_file
            options["search_with_keyring"] = self.search_with_keyring
        if self.url.startswith("sqlite"):
            options["sqlite_synchronous"] = self.sqlite_synchronous
        if self.url.startswith(("redis://", "rediss://")):
            options["rewrite_aof_after_erasure"] = self.redis_rewrite_aof
        if self.url.startswith(("postgresql", "mysql", "mariadb")):
            options["pool_size"] = self.pool_size or self.max_concurrent_requests
        return options


#: The prefix of every setting's environment variable.
_PREFIX = Settings.model_config.get("env_prefix", "")


def load_settings() -> Settings:
    """Read the settings from the environment, reporting a bad value in one sentence.

    Returns:
        The :class:`Settings` of the ``AGENTSESSION_*`` environment.

    Raises:
        ValueError: a variable holds a value its setting refuses; the message names
            the variable and what is wrong (never the value: it may be a secret), e.g.
            ``AGENTSESSION_KEYS_CACHE_SECONDS: Input should be a valid number, ...``.
    """
    try:
        return Settings()
    except PydanticValidationError as exc:
        problems = (
            f"{_PREFIX}{str(error['loc'][0]).upper() if error['loc'] else ''}: {error['msg']}"
            for error in exc.errors()
        )
        raise ValueError("; ".join(problems)) from None
    except SettingsError as exc:  # a list setting whose value is not JSON
        name = next((n for n in Settings.model_fields if f'"{n}"' in str(exc)), "")
        raise ValueError(f"{_PREFIX}{name.upper()}: not a JSON list ({exc.__cause__})") from None
