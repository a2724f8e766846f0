"""``agentsession trace export SESSION_ID --otlp URL``: the session's spans sent in one
OTLP/HTTP request (protobuf) to a collector, here a local HTTP receiver that records
what it gets; a collector refusing them is exit 1."""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.engine import AgentEngine, ProjectTools, ScriptedModel

pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

USER = "demo-user"
MODULE = "some_missing_module_for_otlp"
START = shlex.join([sys.executable, "-c", f"import {MODULE}"])
INSTALL = shlex.join([sys.executable, "-c", f"open('{MODULE}.py', 'w').write('')"])


class _Receiver(BaseHTTPRequestHandler):
    """Records each POST (path, content type, body); answers ``server.status``."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        server.received.append((self.path, self.headers["Content-Type"], body))  # type: ignore[attr-defined]
        self.send_response(server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    server.received = []  # type: ignore[attr-defined]
    server.status = 200  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _session(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    project = tmp_path / "project"
    project.mkdir()
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sid = sm.create_session(user_id=USER, agent="coding").session_id
        model = ScriptedModel(START, install_command=INSTALL)
        AgentEngine(sm, model, ProjectTools(project), user_id=USER).handle(sid, "go")
    return url, sid


def test_c31_trace_export_sends_the_spans_by_otlp_http(
    tmp_path: Path, collector: ThreadingHTTPServer
) -> None:
    url, sid = _session(tmp_path)
    out = tmp_path / "spans.jsonl"
    written = CliRunner().invoke(
        build_app(), ["trace", "export", sid, "--url", url, "--user", USER, "--out", str(out)]
    )
    assert written.exit_code == 0, written.output
    want = sorted(line.split('"name": "')[1].split('"')[0] for line in out.read_text().splitlines())
    endpoint = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    args = ["trace", "export", sid, "--url", url, "--user", USER, "--otlp", endpoint]
    sent = CliRunner().invoke(build_app(), args)
    assert sent.exit_code == 0, sent.output
    assert f"{len(want)} spans of {sid} sent to {endpoint}" in sent.stderr
    [(path, content_type, body)] = collector.received  # type: ignore[attr-defined]
    assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert sorted(s.name for s in spans) == want and len(want) > 1
    roots = [s for s in spans if not s.parent_span_id]
    assert [s.name for s in roots] == ["invoke_agent coding"]
    assert sid.encode() in body  # the session id is an attribute of the spans


def test_c31_a_collector_refusing_the_spans_is_exit_1(
    tmp_path: Path, collector: ThreadingHTTPServer
) -> None:
    url, sid = _session(tmp_path)
    collector.status = 400  # type: ignore[attr-defined]
    endpoint = f"http://127.0.0.1:{collector.server_port}/v1/traces"
    args = ["trace", "export", sid, "--url", url, "--user", USER, "--otlp", endpoint]
    refused = CliRunner().invoke(build_app(), args)
    assert refused.exit_code == 1, refused.output
    assert "did not take the" in refused.stderr
    both = CliRunner().invoke(build_app(), [*args, "--out", str(tmp_path / "x.jsonl")])
    assert both.exit_code == 2 and not (tmp_path / "x.jsonl").exists()
    bad = CliRunner().invoke(build_app(), [*args[:-1], "ftp://nowhere"])
    assert bad.exit_code == 2
