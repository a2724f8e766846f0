"""``agentsession trace export SESSION_ID``: a session's runs as OpenTelemetry spans
(:mod:`agentsession.tracing`), one JSON object a line, on stdout or in ``--out``, or
sent to a collector by OTLP/HTTP with ``--otlp URL``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from .common import (
    AdminOpt,
    Options,
    SessionArg,
    UrlOpt,
    UsageError,
    UserOpt,
    cli_errors,
    new_app,
    open_manager,
    resolve_options,
)

__all__ = ["trace_app"]

trace_app = new_app("A session's runs, steps and tool calls as OpenTelemetry traces.")


@trace_app.command("export")
@cli_errors
def trace_export(
    ctx: typer.Context,
    session_id: SessionArg,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the spans to this file.", show_default="stdout"),
    ] = None,
    include_content: Annotated[
        bool,
        typer.Option(
            "--include-content",
            help="Also put inputs, outputs, tool arguments and results on the spans.",
        ),
    ] = False,
    otlp: Annotated[
        str | None,
        typer.Option(
            "--otlp",
            help="Send the spans by OTLP/HTTP to this traces URL, e.g. "
            "http://localhost:4318/v1/traces (instead of writing them).",
        ),
    ] = None,
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
) -> None:
    """Write the session's runs (root spans), their steps and tool calls (child spans)
    as OpenTelemetry spans, one JSON object a line (the SDK's span JSON), with their
    stored times and statuses; content only with --include-content. With --otlp, send
    them in one OTLP/HTTP request instead (protobuf; the exporter's
    OTEL_EXPORTER_OTLP_TRACES_HEADERS apply); exit 1 if the collector does not take
    them. Exit 2 without the otel extra, or with both --otlp and --out."""
    if otlp is not None:
        if out is not None:
            raise UsageError("give --otlp or --out, not both")
        _send(ctx, session_id, otlp, include_content, url, user, admin)
        return
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

        from .. import tracing  # noqa: F401  (it needs the otel extra)
    except ImportError:
        raise UsageError("traces need: pip install 'agentsession[otel]'") from None
    opts = resolve_options(ctx, url, user, admin, False)
    stream: TextIO = sys.stdout if out is None else out.open("w", encoding="utf-8")
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(
            ConsoleSpanExporter(out=stream, formatter=lambda span: span.to_json(indent=None) + "\n")
        )
    )
    try:
        count = _export(opts, session_id, provider, include_content)
    finally:
        provider.shutdown()
        if out is not None:
            stream.close()
    if out is not None:
        typer.echo(f"{count} spans of {session_id} written to {out}", err=True)


def _send(
    ctx: typer.Context,
    session_id: str,
    endpoint: str,
    include_content: bool,
    url: str | None,
    user: str | None,
    admin: bool,
) -> None:
    """Export the session's spans to memory, then send them all to ``endpoint`` in one
    OTLP/HTTP request, so a refusal is known and reported (exit 1)."""
    try:
        # The exporter is typed but its shutdown is not; an environment without the
        # otel extra has no exporter at all: either way one ignore, never both.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[import-not-found,unused-ignore]
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from .. import tracing  # noqa: F401  (it needs the otel extra)
    except ImportError:
        raise UsageError("OTLP export needs: pip install 'agentsession[otel]'") from None
    if not endpoint.startswith(("http://", "https://")):
        raise UsageError(f"--otlp must be an http:// or https:// URL, not {endpoint!r}")
    opts = resolve_options(ctx, url, user, admin, False)
    collected = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collected))
    try:
        count = _export(opts, session_id, provider, include_content)
    finally:
        provider.shutdown()
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
    try:
        result = exporter.export(collected.get_finished_spans())
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call,unused-ignore]
    if result is not SpanExportResult.SUCCESS:
        typer.echo(f"error: {endpoint} did not take the {count} spans of {session_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"{count} spans of {session_id} sent to {endpoint}", err=True)


def _export(opts: Options, session_id: str, provider: Any, include_content: bool) -> int:
    """Export ``session_id``'s runs as spans to ``provider`` (an OpenTelemetry
    ``TracerProvider``; the otel extra is known to be installed); the number of spans."""
    from ..tracing import export_session

    with open_manager(opts) as sm:
        return export_session(
            sm,
            session_id=session_id,
            user_id=opts.principal,
            admin=opts.admin,
            tracer_provider=provider,
            include_content=include_content,
        )
