"""Fuzzing from the OpenAPI schema (schemathesis): every operation, valid and malformed
requests, with a good key, no key and a bad key, in-process over ASGI.

Checks on every answer: no 5xx; every 4xx is ``application/problem+json`` with ``type``,
``title`` and ``status``; status code, content type and body conform to the schema
where it declares them. Failures are collected over the whole run and reported at once.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import CheckContext
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.memory import MemoryStore

#: Generated requests per operation and generation mode (about 25 operations x 2 modes).
EXAMPLES = 45
MINIMUM_REQUESTS = 2000
_CONDITIONAL = {"if-match", "idempotency-key"}


def _problem_shape(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """No 5xx; a 4xx is problem+json with type, title and status."""
    status = response.status_code
    assert status < 500, f"server error {status}: {response.text[:300]}"
    if status >= 400:
        ctype = response.headers.get("content-type", [""])
        ctype = ctype[0] if isinstance(ctype, list) else ctype
        assert ctype.startswith("application/problem+json"), f"{status} with {ctype!r}"
        body = response.json()
        assert isinstance(body, dict), body
        assert isinstance(body.get("type"), str) and body["type"], body
        assert isinstance(body.get("title"), str) and body["title"], body
        assert body.get("status") == status, body
    return None


CHECKS = [
    _problem_shape,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _seed(manager: SessionManager) -> dict[str, str]:
    """Alice's sessions to aim at: one with history, a run, a tool call; one closed."""
    s = manager.create_session(user_id="alice", agent="fuzz", working_memory={"counter": 0})
    sid = s.session_id
    manager.append_messages(
        session_id=sid, user_id="alice", messages=[{"role": "user", "content": "hi"}]
    )
    run = manager.start_run(session_id=sid, user_id="alice", input="task")
    manager.record_tool_call(session_id=sid, user_id="alice", tool="t", arguments={"a": 1})
    closed = manager.create_session(user_id="alice", agent="fuzz")
    manager.close_session(session_id=closed.session_id, user_id="alice")
    return {"session_id": sid, "run_id": run.run_id, "closed": closed.session_id}


def _fuzz(
    label: str,
    cases: st.SearchStrategy[Any],
    auth: st.SearchStrategy[dict[str, str]],
    requests: Counter[str],
    statuses: Counter[int],
    failures: dict[str, str],
) -> None:
    """Send ``EXAMPLES`` generated requests of one operation; record failed checks."""

    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, headers=auth, plain=st.booleans())
    def run(case: Any, headers: dict[str, str], plain: bool) -> None:
        if plain and case.headers:
            # Half the time without generated If-Match / Idempotency-Key, so that
            # writes also succeed and the success answers get checked.
            for name in [k for k in case.headers if k.lower() in _CONDITIONAL]:
                del case.headers[name]
        response = case.call(headers=headers)
        requests[label] += 1
        statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (AssertionError, FailureGroup) as exc:
            key = f"{label} {response.status_code} {type(exc).__name__}"
            failures.setdefault(key, str(exc)[:1500])

    run()


def test_fuzz_every_operation_from_the_openapi_schema() -> None:
    """>= 2,000 generated requests (valid and malformed): no 5xx, problem+json errors,
    answers as the schema declares them."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    manager = SessionManager(MemoryStore())
    app = create_app(manager, Settings(url="memory://", max_body_bytes=64 * 1024), keys=keys)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)

    auth = st.sampled_from(
        [{"Authorization": f"Bearer {token}"}] * 8 + [{}, {"Authorization": "Bearer key_nope.nope"}]
    )
    requests: Counter[str] = Counter()
    statuses: Counter[int] = Counter()
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20

    for operation in operations:
        # Fresh targets per operation, so an earlier DELETE leaves later ones something.
        ids = _seed(manager)
        paths: dict[str, Any] = {}
        params = {p.name for p in operation.path_parameters}
        if "session_id" in params:
            paths["session_id"] = st.sampled_from([ids["session_id"]] * 3 + [ids["closed"]])
        if "run_id" in params:
            paths["run_id"] = st.just(ids["run_id"])
        if "user_id" in params:
            paths["user_id"] = st.sampled_from(["alice", "bob"])
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            aimed = operation.as_strategy(generation_mode=mode)
            if paths:
                # Valid requests on real ids; malformed ones on real and generated ids.
                on_ids = st.fixed_dictionaries(paths).flatmap(
                    lambda p, m=mode, op=operation: op.as_strategy(
                        generation_mode=m, path_parameters=p
                    )
                )
                aimed = on_ids if mode is GenerationMode.POSITIVE else st.one_of(aimed, on_ids)

            try:
                _fuzz(operation.label, aimed, auth, requests, statuses, failures)
            except hypothesis.errors.Unsatisfiable:
                # Nothing to make invalid (no parameters, no body): only positive cases.
                assert mode is GenerationMode.NEGATIVE, operation.label

    total = sum(requests.values())
    print(f"fuzz: {total} requests over {len(requests)} operations; statuses {dict(statuses)}")
    assert not failures, "\n\n".join(f"{k}: {v}" for k, v in failures.items())
    assert total >= MINIMUM_REQUESTS, requests
    assert len(requests) == len(operations)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q", "-s"])
