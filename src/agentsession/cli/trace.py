"""``agentsession trace export SESSION_ID``: a session's runs as OpenTelemetry spans
(:mod:`agentsession.tracing`), one JSON object a line, on stdout or in ``--out``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer

from .common import (
    AdminOpt,
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
    url: UrlOpt = None,
    user: UserOpt = None,
    admin: AdminOpt = False,
) -> None:
    """Write the session's runs (root spans), their steps and tool calls (child spans)
    as OpenTelemetry spans, one JSON object a line (the SDK's span JSON), with their
    stored times and statuses; content only with --include-content. Exit 2 without the
    otel extra."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

        from ..tracing import export_session
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
        with open_manager(opts) as sm:
            count = export_session(
                sm,
                session_id=session_id,
                user_id=opts.principal,
                admin=opts.admin,
                tracer_provider=provider,
                include_content=include_content,
            )
    finally:
        provider.shutdown()
        if out is not None:
            stream.close()
    if out is not None:
        typer.echo(f"{count} spans of {session_id} written to {out}", err=True)
