"""``agentsession audit verify``: walk the store's audit chains and name the first broken
link (docs/security.md, "Tamper-evident audit"). An operator's command on the store
itself, so it runs as admin; exit 0 when every chain is intact, 1 when one is broken.

Registered in :mod:`agentsession.cli.app` with ``app.add_typer(audit_app, name="audit")``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..models import AuditReport
from .common import JsonOpt, UrlOpt, cli_errors, new_app, open_manager, resolve_options

__all__ = ["audit_app", "report_text"]

audit_app = new_app("Check that the audit log was not changed behind the service's back.")


def report_text(report: AuditReport) -> str:
    """The report in one line: intact, or the first broken link (a session's own chain:
    the session and version; the session chain: the link, and its session when known)."""
    checked = f"{report.sessions} sessions, {report.events} audit events"
    b = report.broken
    if b is None:
        return f"intact: {checked}"
    if b.link is None and b.session_id:
        at = "its head" if b.version is None else f"version {b.version}"
        where = f"session {b.session_id}, {at}"
    else:  # the session chain: its link, and its session when known
        where = "the session chain" + ("" if b.link is None else f", link {b.link}")
        where += f" (session {b.session_id})" if b.session_id else ""
    return f"broken: {where}: {b.problem} ({b.detail}); checked {checked}"


@audit_app.command("verify")
@cli_errors
def verify(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Option("--session", help="Check only this session (ses_...).")
    ] = None,
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Walk every session's audit chain (or one's) and the tombstones of deleted ones;
    exit 1 naming the first broken link: the session, the version, and whether an event
    was changed, removed or reordered. A --session never seen (no row, event or
    session-chain link) is an error (not found)."""
    opts = resolve_options(ctx, url, None, True, as_json)
    with open_manager(opts) as sm:
        report = sm.verify_audit(user_id=opts.principal, admin=True, session_id=session)
    typer.echo(report.model_dump_json() if opts.json else report_text(report))
    if report.broken is not None:
        raise typer.Exit(1)
