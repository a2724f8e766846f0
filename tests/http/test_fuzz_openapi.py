"""Fuzzing from the OpenAPI schema with schemathesis's own engine (what ``schemathesis
run --checks all`` does), in-process over ASGI: every phase (coverage, fuzzing,
stateful) and every check of the pinned schemathesis, plus our problem+json check.

Two built-in checks are run through wrappers that let through exactly the answers the
schema cannot express, each listed in ``DOCUMENTED`` with its reason; any other
refusal of a valid request, or acceptance of an invalid one, fails the test. The
failed-authentication limiter is set out of reach: its 429 would stand in for the
401s that ``ignored_auth`` and ``missing_required_header`` look for (its own tests
are in ``test_limits.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from schemathesis.checks import CheckContext
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore

PROBLEMS = "https://agentsession.dev/problems/"


def _problem(response: Any) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _sent(case: Any, header: str) -> bool:
    return any(k.lower() == header for k in (case.headers or {}))


def _cross_field(response: Any, case: Any) -> bool:
    # "pass cursor or a seq bound, not both", "before or after", "exactly one of message
    # and messages", "tool or provider_call_id", "started_at is after ended_at", "from_seq
    # must not be greater than to_seq": rules between fields that a JSON Schema cannot
    # express; the descriptions state each (tests/http/test_openapi_rules.py).
    detail = str(_problem(response).get("detail", ""))
    return any(
        w in detail
        for w in (
            "not both",
            "exactly one of",
            "or provider_call_id",
            "is after ended_at",
            "must not be greater than to_seq",
        )
    )


#: The ``field`` prefixes of JSON Patch and working-memory rules (see DOCUMENTED).
_PATCH_FIELDS = ("ops", "working_memory", "shared_memory_ops", "body", "data")

#: Answers to a schema-valid request that are right although the schema cannot say
#: so: (status, problem type) -> (when it applies, why).
DOCUMENTED: dict[tuple[int, str], tuple[Callable[[Any, Any], bool], str]] = {
    (412, "version-conflict"): (
        lambda r, c: _sent(c, "if-match"),
        "an If-Match naming a version the session is no longer at: a schema cannot "
        "know the current version",
    ),
    (422, "idempotency-key-reused"): (
        lambda r, c: _sent(c, "idempotency-key"),
        "a key the fuzzer already used with another body",
    ),
    (400, "validation-error"): (
        lambda r, c: (
            (_problem(r).get("field") in ("cursor", "after") and "issued" in r.text)
            or _cross_field(r, c)
            or str(_problem(r).get("field", "")).startswith("message")
            or str(_problem(r).get("field", "")).startswith(_PATCH_FIELDS)
            or _problem(r).get("field") in ("at_seq", "to_seq")
        ),
        "a cursor the server did not issue (it is opaque; the change feed's `after` "
        "too); a rule between fields; a seq "
        "past the session's message_count (`at_seq`, `to_seq`: the schema cannot know "
        "the count); a "
        "message's own rules (a role, or a Responses item type; content, tool_calls), "
        "which the schema states only as an object; a JSON Patch op's own rules (its "
        "`op`, a JSON Pointer, `value` or `from` by op) and what its result must be (an "
        "object, typed standard keys), and a PATCH body whose form its media type sets",
    ),
    (422, "request-validation"): (
        lambda r, c: _cross_field(r, c) or "query.arguments" in r.text,
        "exactly one of `message` and `messages`, checked by the body model; the "
        "deprecated GET lookup's `arguments` must hold a JSON object (a string to the "
        "schema)",
    ),
    (413, "payload-too-large"): (
        lambda r, c: True,
        "the body byte limit (AGENTSESSION_MAX_BODY_BYTES) counts encoded bytes",
    ),
    (422, "unsupported-value"): (
        lambda r, c: True,
        "the stored-value policy inside free JSON (integers within 64 bits, no NUL, "
        "nesting depth) is no JSON Schema keyword",
    ),
    (400, "malformed-json"): (
        lambda r, c: _problem(r).get("field") == "query.arguments",
        "the deprecated GET lookup's `arguments` is JSON inside a query string",
    ),
}

#: Refusals a schema-invalid request may get besides the 4xx the check expects.
DOCUMENTED_REFUSALS: dict[tuple[int, str], tuple[Callable[[Any, Any], bool], str]] = {
    (412, "version-conflict"): (
        lambda r, c: _sent(c, "if-match"),
        "a failed If-Match outranks a 422 (401 -> 404 -> 412 -> 422, docs/security.md)",
    ),
    (413, "payload-too-large"): (
        lambda r, c: True,
        "a body over the byte limit is refused before it is read, whatever it holds",
    ),
}


def _documented(table: dict[tuple[int, str], Any], response: Any, case: Any) -> bool:
    kind = str(_problem(response).get("type", "")).removeprefix(PROBLEMS)
    entry = table.get((response.status_code, kind))
    return entry is not None and bool(entry[0](response, case))


@schemathesis.check
def positive_data_acceptance_as_documented(
    ctx: CheckContext, response: Any, case: Any
) -> bool | None:
    """``positive_data_acceptance``, letting through the ``DOCUMENTED`` answers."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if _documented(DOCUMENTED, response, case):
            return None
        raise


@schemathesis.check
def negative_data_rejection_as_documented(
    ctx: CheckContext, response: Any, case: Any
) -> bool | None:
    """``negative_data_rejection``, letting through the ``DOCUMENTED_REFUSALS``."""
    try:
        return negative_data_rejection(ctx, response, case)
    except AssertionError:
        if _documented(DOCUMENTED_REFUSALS, response, case):
            return None
        raise


@schemathesis.check
def problem_json(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx is ``application/problem+json`` with type, title and status."""
    status = response.status_code
    if status >= 400:
        ctype = response.headers.get("content-type", [""])
        ctype = ctype[0] if isinstance(ctype, list) else ctype
        assert ctype.startswith("application/problem+json"), f"{status} with {ctype!r}"
        body = _problem(response)
        assert isinstance(body.get("type"), str) and body["type"], body
        assert isinstance(body.get("title"), str) and body["title"], body
        assert body.get("status") == status, body
    return None


def _run(examples: int, seed: int) -> tuple[Counter[str], Counter[int], dict[str, str]]:
    """One engine run over a fresh app; requests per phase, statuses, failures."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    settings = Settings(
        url="memory://",
        max_body_bytes=64 * 1024,
        auth_failures_per_address=10**9,
        auth_failures_per_key=10**9,
    )
    app = create_app(SessionManager(MemoryStore()), settings, keys=keys)
    config = SchemathesisConfig.from_dict(
        {
            "seed": seed,
            "headers": {"Authorization": f"Bearer {token}"},
            "continue-on-failure": True,
            "workers": 1,
            # Repeatable: the seed drives every phase (the stateful one too), derandomize
            # keeps Hypothesis off its random source, no example database carries over.
            "generation": {"max-examples": examples, "database": "none", "deterministic": True},
            "checks": {
                "enabled": True,
                "positive_data_acceptance": {"enabled": False},
                "negative_data_rejection": {"enabled": False},
            },
        }
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    phases: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: dict[str, str] = {}
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for interaction in recorder.interactions.values():
                phases[event.phase.value] += 1
                statuses[interaction.response.status_code if interaction.response else 0] += 1
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        case = recorder.cases[case_id].value
                        key = f"{recorder.label} {check.name}"
                        failures.setdefault(
                            key,
                            f"{check.failure_info.failure.message[:600]}\n"
                            f"{case.as_curl_command()[:600]}",
                        )
        elif isinstance(event, events.NonFatalError | events.FatalError):
            failures.setdefault(f"error {type(event).__name__}", repr(event)[:600])
    return phases, statuses, failures


def _fuzz(examples: int, minimum: int) -> None:
    started = time.monotonic()
    phases, statuses, failures = _run(examples, seed=20240611)
    total = sum(phases.values())
    print(
        f"fuzz: {total} requests in {time.monotonic() - started:.0f} s; phases "
        f"{dict(phases)}; statuses {dict(sorted(statuses.items()))}"
    )
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    assert total >= minimum, dict(phases)
    assert {"coverage", "fuzzing", "stateful"} <= set(phases), dict(phases)


def test_fuzz_every_check_every_phase() -> None:
    """>= 2,000 requests (coverage, fuzzing, stateful), every check: 0 failures."""
    _fuzz(examples=25, minimum=2000)


@pytest.mark.slow
def test_fuzz_every_check_every_phase_at_length() -> None:
    """>= 10,000 requests, every check: 0 failures (``make test-all``)."""
    _fuzz(examples=400, minimum=10_000)
