"""Settings read from the environment, at the edges only (CLI, HTTP service).

The library itself never reads ``os.environ``: the CLI and the service build one
:class:`Settings` and pass explicit values down. Every field maps to an environment
variable with the ``AGENTSESSION_`` prefix, e.g. ``AGENTSESSION_URL``.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .service.policy import Policy

__all__ = ["Settings"]

#: The library's defaults; the settings only override them from the environment.
_POLICY = Policy()


class Settings(BaseSettings):
    """Configuration of the CLI and the HTTP service.

    Attributes:
        url: the store URL (``AGENTSESSION_URL``); default an SQLite file in the
            current directory.
        auto_migrate: bring the schema to the current revision at start
            (``AGENTSESSION_AUTO_MIGRATE``); off by default: run ``agentsession db upgrade``.
        sqlite_synchronous: ``FULL`` (default; no acknowledged write lost on power loss)
            or ``NORMAL`` (faster; a power loss may drop the last commits).
        host, port, workers: where ``agentsession serve`` listens, and how many
            worker processes it starts (several need a multi-process store).
        keys_file: the JSON file of API keys (SHA-256 hashes only); default: next to
            an SQLite database (``<db>.keys.json``), else ``agentsession-keys.json``.
        max_body_bytes: the largest request body the service reads; larger -> 413.
        require_if_match: PUT/PATCH/DELETE and lifecycle actions without ``If-Match``
            are answered 428 Precondition Required.
        idempotency_retention_seconds: how long an idempotency key is remembered
            (default: ``Policy``'s, 24 h); ``agentsession sweep`` purges older ones.
        expired_restore_window_seconds: how long an EXPIRED session may be restored
            (default: ``Policy``'s, 7 days; unset = always, 0 = never).
        tombstone_key: the secret of the keyed hash standing for the user id in the
            tombstone of a deleted session (``AGENTSESSION_TOMBSTONE_KEY``, at least 16
            characters); unset = a random key per process, so tombstones cannot be
            linked to users (``Policy.tombstone_key``).
        redis_rewrite_aof: a Redis store rewrites its append-only file after every
            erasure (``AGENTSESSION_REDIS_REWRITE_AOF``), so erased values leave it at once.
    """

    model_config = SettingsConfigDict(env_prefix="AGENTSESSION_", extra="ignore")

    url: str = "sqlite:///agentsession.db"
    auto_migrate: bool = False
    sqlite_synchronous: str = "FULL"
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = 1
    keys_file: str | None = None
    max_body_bytes: int = 8 * 1024 * 1024
    require_if_match: bool = False
    idempotency_retention_seconds: float = _POLICY.idempotency_retention_seconds
    expired_restore_window_seconds: float | None = _POLICY.expired_restore_window_seconds
    tombstone_key: SecretStr | None = None
    redis_rewrite_aof: bool = False

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
            ),
        }
        if self.url.startswith("sqlite"):
            options["sqlite_synchronous"] = self.sqlite_synchronous
        if self.url.startswith(("redis://", "rediss://")):
            options["rewrite_aof_after_erasure"] = self.redis_rewrite_aof
        return options
